"""Summary plans for dp_mean and dp_sum (issue 17): :class:`MeanDuckSource`, the native DuckDB passes behind
:class:`dpsql.core.summary_mean.MeanSource` (the core module has the design and the privacy argument).

Besides the median's passes (:class:`dpsql.plans.DuckSource`: count, gap histograms, bucket and tail passes):

* :meth:`MeanDuckSource.radius_histogram`, one pass: per row the first index k of the radius ladder (``x_1 = 0``,
  ``x_k = s0 2**((k-2)/2)``, s0 = ``2**e0`` per group) with ``c - x_k <= v <= c + x_k``, as IEEE doubles exactly as
  :func:`dpsql.core.ranges.radius` compares (``pow(2.0, e0 + j)`` is the exact power of two ``ldexp`` gives,
  ``* sqrt(2.0)`` the same single rounding, ``c - x`` and ``c + x`` the same subtractions; inf where numpy's
  overflow).  Exact search without a loop: for ``v != c`` let ``d = v - c`` (real).  ``x >= |d|`` puts v inside;
  ``x < |d| / 2`` leaves it outside (then ``c + x`` lies below the midpoint of c and v, which is at least half a
  spacing of v below v, so it cannot round to v; the same below c).  Consecutive ladder steps of the same parity
  differ by exactly 2, so the first inside index is one of ``k0 - 2, k0 - 1, k0`` with ``k0`` the first index at
  which ``x_k >= |d|``; the pass estimates ``k0`` as ``ceil(2 (log2 |fl(v - c)| - e0)) + 2`` (off by at most one:
  the subtraction's relative error 2**-53 and log2's few ulps move the argument of ceil by < 1e-11) and tests the
  predicate exactly on the seven indices ``k0' - 4 .. k0' + 2``: the first true one is the row's index.  A row
  whose window does not bracket the change (never, by the argument; counted as a bug guard) fails the pass.
* :meth:`MeanDuckSource.clipped_sums`, one pass: ``CAST(clip(clip(v, l, h) [- c], -S, S) / gamma AS BIGINT)``
  (DuckDB's DOUBLE to BIGINT cast rounds half to even, as numpy's rint; sql/native.sql's clipped route does the
  same) summed exactly (HUGEINT) per group: :func:`dpsql.core.primitives.fixed_point_sum`'s integers.
* :meth:`MeanDuckSource.derived`: a source over ``|v - c_g|`` (not clamped: up to 2**1001), the cap's input, whose
  bucket and tail passes are the median's over that expression (c joined per group in each pass).

Per-group parameters (c, e0, l, h, S, gamma) are registered Arrow tables joined on the group keys, as the median's
passes do; they are released values.  The passes' number and statements are functions of the released counts
(the route classes, the ladders) only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..core.primitives import fixed_point_grid
from ..core.summary_mean import RADIUS_QUERIES
from . import _TINY, _VALID, _VC, DuckSource, _np

__all__ = ["MeanDuckSource"]

#: ladder indices tested per row: ``k_a .. k_a + WIDTH - 1`` with ``k_a = max(2, k0' - 3)`` (the argument needs
#: ``k0' - 3 .. k0' + 1``)
WIDTH = 5


def _x_at(t: int) -> str:
    """The ladder radius ``x_k`` at ``k = k_a + t`` as SQL.  With ``j_a, _par = divmod(k_a - 2, 2)``, ``P = 2**(e0 +
    j_a)`` and ``R = P * sqrt(2.0)``, the radii from k_a on are P, R, 2P, 2R, 4P, ... (``_par = 0``) or R, 2P, 2R,
    4P, 4R, ... (``_par = 1``): ``_A`` (P or R) times ``2**(t/2)`` for even t, ``_B`` (R or 2P) times ``2**((t-1)/2)``
    for odd t.  Scalings by literal powers of two >= 1: exact, and inf exactly where ldexp's ``2**(e0 + j)`` or its
    product with sqrt 2 overflows, as :func:`dpsql.core.ranges._step` (the intermediates never exceed the result)."""
    return f"({'_A' if t % 2 == 0 else '_B'} * {float(2 ** (t // 2))!r})"


def _inside(t: int) -> str:
    return f"(_v >= _c - {_x_at(t)} AND _v <= _c + {_x_at(t)})"


class MeanDuckSource(DuckSource):
    """:class:`dpsql.plans.DuckSource` with the mean's and the sum's passes (module docstring)."""

    def radius_histogram(self, groups, c, s0):  # noqa: ANN001, ANN201, D102
        self._registered = []
        m, ex = np.frexp(np.asarray(s0, dtype=np.float64))
        if np.any(m != 0.5):
            raise ValueError("summary plans: the radius ladder's s0 must be powers of two")
        e0 = ex.astype(np.int64) - 1
        src = self._params(groups, {"_c": np.asarray(c, dtype=np.float64), "_e0": e0})
        Q = RADIUS_QUERIES
        rows = f"SELECT p._g AS _g, p._c AS _c, p._e0 AS _e0, {_VC} AS _v FROM {src} WHERE {_VALID}"
        # v = c: index 1 (x_1 = 0); else k0' = ceil(2 (log2 |v - c| - e0)) + 2 and the window from k_a
        ka = (f"greatest(2, least({Q}, CAST(ceil(2.0::DOUBLE * (log2(greatest(abs(_v - _c), {_TINY})) - _e0)) "
              f"AS BIGINT) + 2) - 3)")
        base = (f"SELECT *, CASE WHEN _par = 0 THEN _P ELSE _P * sqrt(2.0) END AS _A, CASE WHEN _par = 0 THEN "
                f"_P * sqrt(2.0) ELSE _P * 2.0 END AS _B FROM (SELECT *, pow(2.0, _e0 + (_ka - 2) // 2) AS _P, "
                f"(_ka - 2) % 2 AS _par FROM (SELECT *, {ka} AS _ka FROM ({rows})))")
        first = " ".join(f"WHEN {_inside(t)} THEN _ka + {t}" for t in range(WIDTH))
        # the bug guard: the window's first index inside (and above 2), or its last outside
        bad = f"(_v <> _c AND (({_inside(0)} AND _ka > 2) OR NOT {_inside(WIDTH - 1)}))"
        sql = (f"SELECT _g, k, count(*) AS c, count_if(_bad) AS bad FROM ("
               f"SELECT _g, CASE WHEN _v = _c THEN 1 ELSE least({Q}, CASE {first} ELSE {Q} END) END AS k, "
               f"{bad} AS _bad FROM ({base})) GROUP BY ALL ORDER BY _g, k")
        t = self._run(sql)
        if _np(t, "bad").any():
            raise RuntimeError("summary plans: the radius pass's window missed a row's ladder index (a bug)")
        return _np(t, "_g"), _np(t, "k"), _np(t, "c")

    def clipped_sums(self, groups, l, h, c, sens):  # noqa: ANN001, ANN201, D102
        self._registered = []
        G = groups.size
        S, gamma = fixed_point_grid(np.broadcast_to(np.asarray(sens, dtype=np.float64), (G,)))
        cols = {"_l": np.asarray(l, dtype=np.float64), "_h": np.asarray(h, dtype=np.float64), "_S": S, "_gm": gamma}
        y = f"greatest(least({_VC}, p._h), p._l)"
        if c is not None:
            cols["_cc"] = np.asarray(c, dtype=np.float64)
            y = f"({y} - p._cc)"
        src = self._params(groups, cols)
        k = f"CAST(greatest(least({y}, p._S), -p._S) / p._gm AS BIGINT)"
        t = self._run(f"SELECT p._g AS _g, CAST(sum({k}) AS BIGINT) AS s FROM {src} WHERE {_VALID} GROUP BY p._g")
        out = np.zeros(G, dtype=np.int64)
        out[_np(t, "_g")] = _np(t, "s")
        return out

    def derived(self, groups: np.ndarray, c: np.ndarray) -> DuckSource:  # noqa: D102
        return _Derived(self, np.asarray(groups, dtype=np.int64), np.asarray(c, dtype=np.float64))


class _Derived(DuckSource):
    """The rows of a parent's ``groups`` (group i = groups[i]) with value ``|v - c[i]|`` (v the parent's clamped
    value; the difference as numpy computes it, not clamped again).  Its passes count into the parent's."""

    VALUE = "_x"

    def __init__(self, parent: MeanDuckSource, groups: np.ndarray, c: np.ndarray) -> None:
        self.con, self.plan, self.rng, self.parent = parent.con, parent.plan, parent.rng, parent
        self.groups = parent.groups.take(pa.array(groups)) if parent.plan.keys else parent.groups
        self.n, self.rows = parent.n[groups], parent.rows[groups]
        self.c = c
        self.passes = 0
        self._registered = []

    def _params(self, groups: np.ndarray, cols: dict[str, np.ndarray], base: str | None = None) -> str:
        # the derived rows: the parent's rows joined with c per group (registered for this pass)
        name = f"_dpsql_plan_c{next(self._ids)}"
        keys = self.plan.keys
        t = self.groups if keys else pa.table({})
        t = t.append_column("_dc", pa.array(self.c)) if keys else pa.table({"_dc": pa.array(self.c)})
        self.con.register(name, t)
        self._registered.append(name)
        vc, valid = _VC.replace("_x", "b._x"), _VALID.replace("_x", "b._x")
        sel = "".join(f"b._k{i} AS _k{i}, " for i in range(len(keys)))
        if keys:
            on = " AND ".join(f"b._k{i} IS NOT DISTINCT FROM q._k{i}" for i in range(len(keys)))
            join = f"JOIN {name} q ON {on}"
        else:
            join = f"CROSS JOIN {name} q"
        derived = f"(SELECT {sel}abs({vc} - q._dc) AS _x FROM {self.parent.base} b {join} WHERE {valid})"
        return super()._params(groups, cols, derived)

    def _run(self, sql: str, params: dict | None = None):  # noqa: ANN202
        self.parent.passes += 1
        return super()._run(sql, params)
