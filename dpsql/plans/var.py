"""Summary plans for dp_var and dp_stddev (issue 17): :class:`DuckVarSource`, the native DuckDB passes behind
:class:`dpsql.core.summary_var.VarSource` (the core module has the steps and the privacy argument; dp_stddev is the
square root of dp_var's release).

:meth:`DuckVarSource.var_summary` computes :class:`dpsql.core.asymmetric.VarSummary` for the large groups (the
hybrid's small ones come back as rows: :meth:`dpsql.plans.DuckSource.batch`) in two passes over their valid,
clamped rows (the data rules of the list route: NULL and NaN dropped, values clamped to +-2**1000; the clamp is
monotone, so the passes compare and rank the unclamped values and clamp what they return: no CASE per row):

1. **Edges**, one hash aggregate: ``min(_x, C + 1)`` and ``max(_x, C + 1)`` (DuckDB's top-k aggregates: the C + 1
   smallest rows ascending and the C + 1 largest descending, ties included as rows), clamped in numpy.  The group keeps
   ``lo[:kg + 1]`` and ``hi[:kg + 1]``, ``kg = min((n + 1) // 2 - 1, C)`` (n from the count pass); for n <= 2C + 1
   these are every row, which the deeper windows read.  The anchor xm is the midpoint of the core's first and last
   rows ``a = lo[kg]``, ``b = hi[kg]`` (``a / 2 + b / 2`` clamped into ``[a, b]``; a when a = b), not the list
   route's sorted value at n // 2: any value inside the core serves (``VarSummary``: the bounds do not depend on it
   but through rounding, and every window the sums accumulate over holds the core, so the no-cancellation argument
   is the same), and the exact median (``quantile_disc``, a holistic aggregate that buffers every row) cost 0.19 s
   more of this pass's 0.27 s at 10**7 rows.
2. **Core sums**, one pass with per-group parameters (xm, a, b, ``1 / sc_c`` from
   :func:`~dpsql.core.asymmetric.var_core_scale`, all functions of pass 1): ``fsum(d) FILTER (a < _x < b)`` and
   the same of ``d * d``, ``d = (_x - xm) * (1 / sc_c)`` (``|d| < 2`` on those rows; a row outside them may give
   inf, never summed; a row strictly inside is within +-2**1000, where the clamp is the identity), and
   ``count_if(_x <= a)``, ``count_if(_x >= b)``.  The core is defined by position (sorted ``[kg, n - kg)``), and
   rows equal to an edge value may lie on both sides of it; they are all equal, so the core's share of them is
   counted: every row below a is one of the kg bottom edges and every edge is <= a, so ``#(_x <= a) - kg`` core
   rows equal a (for a < b the clamp changes no such comparison: ``_x <= a`` iff the clamped row is, also at a =
   -2**1000), and ``#(_x >= b) - kg`` equal b; a constant core (``a = b``, then xm = a and d = 0) adds ``n - 2 kg``
   rows at 0.  (FILTER instead of a CASE per sum, and no clamp: 0.13 s instead of 0.23 s at 10**7 rows.)

Rounding.  d and d * d are the IEEE operations of :func:`~dpsql.core.asymmetric._deviations` around another
anchor, and the sums add them in another order: DuckDB's ``fsum`` (Kahan-Babuska, error <= ~2 ulp of ``sum |d|``)
instead of numpy's pairwise reduceat (``O(log n)`` ulp), and the tie rows as a count times d.  So the bounds equal
the list route's to relative rounding error of the size ``var_bounds`` already admits (its docstring; the
mechanism's proof needs no more), not bit for bit; the releases, grid points at least ``BETA_MIN - 1 = 1e-4`` apart
relatively, are the list route's under the same draws unless a bound lies within those few ulps of a grid boundary
(tests/plans/test_plans_var.py checks the bounds to 1e-9 in log and the releases equal under seeded draws).  Exact
sums (fixed point fine enough for ``|d| < 2`` down to 2**-1074, or HUGEINT sums of scaled mantissas) would still not
reproduce numpy's rounding, so they would buy no byte equality.

Privacy and timing: the passes and their statements are the same for every dataset with the same released
counts (pass 1 and 2 run iff some group's released count reaches the hybrid threshold; C is a function of
epsilon); the top-k aggregates' heap work, like any sort (the list route sorts every group), depends on the order
of the rows, not on anything released.  Memory: ``2 (C + 1)`` doubles per large group in pass 1, a few per group
in pass 2 (against every row of the group for the list route).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..core.asymmetric import VarSummary, var_core_scale, var_edges
from ..core.batch import DOMAIN, Batch

__all__ = ["DuckVarSource", "VALID"]

#: the rows the passes read (dpsql.plans' ``_VALID``, restated: this module does not import the package, which
#: imports it; tests/plans/test_plans_var.py checks they agree); the clamp to +-DOMAIN is applied to what they return
VALID = "_x IS NOT NULL AND NOT isnan(_x)"


def _ints(t: pa.Table, col: str) -> np.ndarray:
    return t.column(col).to_numpy(zero_copy_only=False).astype(np.int64)


def _lists(t: pa.Table, col: str, G: int, at: np.ndarray, width: int, keep: np.ndarray) -> np.ndarray:
    """The list column ``col`` (row i for group ``at[i]``) as a ``[width, G]`` array, the first ``keep[g]`` entries
    of each list (0 past them)."""
    out = np.zeros((width, G))
    col = t.column(col).combine_chunks()
    if len(col) == 0 or width == 0:
        return out
    flat = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    offs = col.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    starts = offs[:-1]
    lens = np.diff(offs)
    k = np.minimum(lens, keep[at])
    j = np.arange(width)[:, None]
    ok = j < k[None, :]
    out[:, at] = np.where(ok, flat[np.clip(starts[None, :] + j, 0, max(flat.size - 1, 0))], 0.0)
    return out


class DuckVarSource:
    """:class:`dpsql.core.summary_var.VarSource` over a :class:`dpsql.plans.DuckSource` (its count, its per-group
    parameter tables and passes, and its rows for the hybrid's small groups)."""

    def __init__(self, src) -> None:  # noqa: ANN001 - a dpsql.plans.DuckSource (not imported: no cycle)
        self.src = src

    @property
    def passes(self) -> int:
        return self.src.passes

    def sizes(self) -> np.ndarray:
        return self.src.sizes()

    def batch(self, groups: np.ndarray) -> Batch:
        return self.src.batch(groups)

    def will_batch(self, parts: list[np.ndarray], rows: list[float]) -> None:  # noqa: D102 - DuckSource's
        self.src.will_batch(parts, rows)

    def var_summary(self, groups: np.ndarray, C: int) -> VarSummary:
        """Module docstring: two passes over the valid rows of ``groups`` (ascending)."""
        src = self.src
        G = groups.size
        n = np.asarray(src.sizes(), dtype=np.int64)[groups]
        kg = var_edges(n, C)
        keep = np.minimum(n, kg + 1)
        width = int(keep.max(initial=0))
        # pass 1: the edges and the exact median
        src._registered = []
        t = src._run(f"SELECT _g, min(_x, {C + 1}) AS lo, max(_x, {C + 1}) AS hi "
                     f"FROM (SELECT p._g AS _g, _x FROM {src._params(groups, {})} WHERE {VALID}) GROUP BY _g")
        at = _ints(t, "_g")
        lo = np.clip(_lists(t, "lo", G, at, width, keep), -DOMAIN, DOMAIN)  # the clamp, monotone: after the top-k
        hi = np.clip(_lists(t, "hi", G, at, width, keep), -DOMAIN, DOMAIN)
        cols = np.arange(G)
        a = lo[np.minimum(kg, max(width - 1, 0)), cols] if width else np.zeros(G)
        b = hi[np.minimum(kg, max(width - 1, 0)), cols] if width else np.zeros(G)
        xm = np.where(a == b, a, np.minimum(np.maximum(a / 2.0 + b / 2.0, a), b))  # the anchor: inside the core
        # pass 2: the core sums
        inv = 1.0 / var_core_scale(n, xm, lo, hi, kg)  # a power of two: exact
        src._registered = []
        par = src._params(groups, {"_xm": xm, "_a": a, "_b": b, "_inv": inv})
        d = "((_x - _xm) * _inv)"
        core = "FILTER (WHERE _x > _a AND _x < _b)"
        t = src._run(f"SELECT _g, fsum({d}) {core} AS s1, fsum({d} * {d}) {core} AS s2, "
                     f"count_if(_x <= _a) AS ca, count_if(_x >= _b) AS cb "
                     f"FROM (SELECT p._g AS _g, _x, p._xm AS _xm, p._a AS _a, p._b AS _b, "
                     f"p._inv AS _inv FROM {par} WHERE {VALID}) GROUP BY _g")
        at = _ints(t, "_g")
        s1, s2, ca, cb = np.zeros(G), np.zeros(G), np.zeros(G, dtype=np.int64), np.zeros(G, dtype=np.int64)
        s1[at] = np.nan_to_num(t.column("s1").to_numpy(zero_copy_only=False).astype(np.float64), nan=0.0)
        s2[at] = np.nan_to_num(t.column("s2").to_numpy(zero_copy_only=False).astype(np.float64), nan=0.0)
        ca[at], cb[at] = _ints(t, "ca"), _ints(t, "cb")
        ca_core, cb_core = ca - kg, cb - kg
        same = a == b
        ca_core = np.where(same, n - 2 * kg, ca_core)
        cb_core = np.where(same, 0, cb_core)
        da, db = (a - xm) * inv, (b - xm) * inv
        s1 = s1 + ca_core * da + cb_core * db
        s2 = s2 + ca_core * (da * da) + cb_core * (db * db)
        return VarSummary(n, xm, lo, hi, s1, s2)
