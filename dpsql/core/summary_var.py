"""Summary plans for dp_var and dp_stddev (issue 17): the asymmetric variance (:func:`~dpsql.core.asymmetric.run_var`;
the default's class below ``moments.VAR_TOP``) from per-group summaries, draw for draw the list route's releases from
:class:`VarBatchSource`.

The list route (``run_var`` -> ``_var``) draws a released count (``SPLIT_VAR['count'] eps``, it only sets the grid
ratio), computes ``var_bounds(sorted rows, C)`` (``C = truncation(eps2)``, a function of eps only) and runs one
:func:`~dpsql.core.asymmetric.asm_scan` over every group.  The rows enter only through ``var_bounds``, and that is
:func:`~dpsql.core.asymmetric.var_bounds_of` of a :class:`~dpsql.core.asymmetric.VarSummary`: per group n, the
value at sorted position n // 2, the ``kg + 1`` smallest and largest rows (``kg = min((n + 1) // 2 - 1, C)``) and
the two core sums.  :func:`variance` runs the same steps on summaries a :class:`VarSource` computes:

1. **Count**: the released count (:func:`released_count`, the list route's first draw).
2. **Bounds**: groups whose released count is below ``small`` (the hybrid route, :func:`row_groups`) are read as
   rows (:meth:`VarSource.batch`) and get ``var_bounds`` on them (the list route's code); the others get
   ``var_bounds_of`` on :meth:`VarSource.var_summary` (no draws: the summary is a deterministic function of the
   group's rows).
3. **Scan**: one ``asm_scan`` over every group, the list route's call with the list route's arguments.

So the draws are the list route's whatever the split; the releases are its releases whenever the bounds are the
same floats: always for the rows and for :class:`VarBatchSource` (it calls :func:`~dpsql.core.asymmetric.
var_summary`, the list route's own summary), and to rounding for a source whose core sums add in another order or
around another anchor inside the core (:mod:`dpsql.plans.var`: DuckDB's ``fsum`` around the core's midpoint; the
bounds then agree to a few ulps and the releases, grid points at
least ``BETA_MIN - 1 = 1e-4`` apart in relative terms, differ only where a bound lies within those ulps of a grid
boundary).

Cost: epsilon per group (pure), charged by the list route's calls (``noisy_count_of``, ``asm_scan``).  Privacy:
run_var's argument (``asymmetric``'s module docstring), which needs the bounds to be the infima over the add/remove
ball up to relative rounding error, the error ``var_bounds`` already admits; a source with other summation order
keeps that error of the same size (Kahan-Babuska sums: ``<= 2 ulp * sum |d|`` against pairwise's ``O(log n) ulp
* sum |d|``).  The split is post-processing of the released count, and which summary steps run is a function of
released counts only.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from ..noise import Rng
from .asymmetric import (
    RATIO,
    SPLIT_VAR,
    VarSummary,
    asm_scan,
    grid_ratio,
    truncation,
    var_bounds,
    var_bounds_of,
    var_summary,
)
from .batch import Batch, take_groups
from .primitives import need_wide, noisy_count_of
from .summary import announce_rows, row_parts

__all__ = ["VarSource", "VarBatchSource", "variance", "released_count", "row_groups", "truncation_of"]


class VarSource(Protocol):
    """Per-group data of one value column over G groups (group-local indices ``0..G-1``)."""

    def sizes(self) -> np.ndarray:
        """Exact row count per group (NULL and NaN dropped), int64."""

    def var_summary(self, groups: np.ndarray, C: int) -> VarSummary:
        """The :class:`~dpsql.core.asymmetric.VarSummary` of ``groups`` (ascending) at truncation C."""

    def batch(self, groups: np.ndarray) -> Batch:
        """The rows of ``groups`` as a sorted, cleaned Batch (the hybrid route's small groups)."""


class VarBatchSource:
    """The summaries from a Batch in Python: the reference (the list route's own summary)."""

    def __init__(self, batch: Batch) -> None:
        self.s = batch.sorted()

    def sizes(self) -> np.ndarray:
        return self.s.sizes

    def batch(self, groups: np.ndarray) -> Batch:  # noqa: D102
        return take_groups(self.s, groups)

    def var_summary(self, groups: np.ndarray, C: int) -> VarSummary:  # noqa: D102
        return var_summary(self.batch(groups), C)


def _shares(epsilon: float) -> tuple[float, float, float]:
    """(count eps, ASM eps, eps2) of run_var at ``epsilon``."""
    eps_asm = SPLIT_VAR["asm"] * epsilon
    return SPLIT_VAR["count"] * epsilon, eps_asm, eps_asm / (RATIO + 2.0)


def truncation_of(epsilon: float) -> int:
    """C of a dp_var call at ``epsilon`` (a function of epsilon only)."""
    return truncation(_shares(epsilon)[2])


def released_count(src: VarSource, epsilon: float, rng: Rng) -> np.ndarray:
    """The released count of :func:`variance` (its first draw, the list route's); pass it back as ``n_hat``."""
    return noisy_count_of(np.asarray(src.sizes(), dtype=np.int64), _shares(epsilon)[0], rng)


def row_groups(n_hat: np.ndarray, small: float) -> np.ndarray:
    """The groups :func:`variance` reads as rows: released count below ``small`` (a function of released values
    and a public constant; dp_var is never NULL, so every group takes part)."""
    return np.flatnonzero(np.asarray(n_hat, dtype=np.float64) < small)


#: the rows route's bounds run in chunks of consecutive groups of about this many released rows, on up to
#: :data:`THREADS` threads (numpy releases the GIL in the bounds' array work; each group's bounds are its own, so
#: the chunks change no bit: tests/core/test_summary_var.py).  Measured (in one process, noisy shared machine):
#: 10**7 rows in 10**4 groups at load ~1, 2.3-2.7 s in one piece, 1.1-1.3 s in chunks of 1000-2500 groups on two
#: threads (the macros' UDF calls also run about two at a time); at load ~2.5, 10**6 rows in 10**4 groups (deep
#: windows) 4.5 s whole, 4.6 / 3.6 / 3.4 s in chunks of 2**19 / 2**17 / 2**15 rows, 10**7 rows 2.2-2.4 s at every size
ROWS_CHUNK = 2.0**17
THREADS = max(1, min(4, os.cpu_count() or 1))


def _rows_bounds(s: Batch, n_hat: np.ndarray, C: int) -> tuple[np.ndarray, np.ndarray]:
    """``var_bounds(s, C)`` (a sorted batch) computed in chunks of consecutive groups cut on the released counts
    ``n_hat`` (:data:`ROWS_CHUNK`), on :data:`THREADS` threads: the same arrays bit for bit."""
    w = np.cumsum(np.maximum(n_hat, 1.0))
    cuts = np.concatenate([[0], np.flatnonzero(np.diff(np.floor(w / ROWS_CHUNK))) + 1, [s.groups]]).astype(np.int64)
    if cuts.size <= 2 or THREADS == 1:
        return var_bounds(s, C)
    off = s.offsets

    def part(i: int) -> tuple[np.ndarray, np.ndarray]:
        g0, g1 = int(cuts[i]), int(cuts[i + 1])
        sub = Batch(s.values[off[g0]:off[g1]], off[g0:g1 + 1] - off[g0])
        sub._sorted = sub
        return var_bounds(sub, C)

    return _in_parts(part, cuts.size - 1)


def _in_parts(part, k: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001 - int -> (log f, log L)
    """``part(0) .. part(k - 1)`` on :data:`THREADS` threads, concatenated along the groups."""
    with ThreadPoolExecutor(THREADS) as ex:
        parts = list(ex.map(part, range(k)))
    return np.concatenate([f for f, _ in parts]), np.concatenate([L for _, L in parts])


#: the summary route's bounds run on at most about this many ``[depth, group]`` cells per chunk of groups (the WIDE
#: work arrays of var_bounds_of are ~6 of them: 2**20 cells ~ 100 MB), on :data:`THREADS` threads
SUMMARY_CELLS = 2**20


def _summary_bounds(S: VarSummary, C: int) -> tuple[np.ndarray, np.ndarray]:
    """``var_bounds_of(S, C)`` in chunks of consecutive groups (:data:`SUMMARY_CELLS`): the same arrays bit for bit
    (each group's bounds are its own), the memory of one chunk's work arrays per thread."""
    G = S.n.size
    step = max(1, SUMMARY_CELLS // (C + 1))
    if G <= step:
        return var_bounds_of(S, C)

    def part(i: int) -> tuple[np.ndarray, np.ndarray]:
        g = slice(i * step, min((i + 1) * step, G))
        return var_bounds_of(VarSummary(S.n[g], S.xm[g], S.lo[:, g], S.hi[:, g], S.s1[g], S.s2[g]), C)

    return _in_parts(part, -(-G // step))


def variance(src: VarSource, epsilon: float, rng: Rng, n_hat: np.ndarray | None = None, small: float = 0.0,
             groups: np.ndarray | None = None) -> np.ndarray:
    """dp_var, asymmetric, without bounds: :func:`~dpsql.core.asymmetric.run_var`'s law (module docstring), the
    population variance per group, never NULL.  Cost epsilon (pure).  ``n_hat``: the released count
    (:func:`released_count`), else drawn here; ``small``: the hybrid split (:func:`row_groups`); ``groups``: only
    these groups (ascending; the default's asymmetric class, :mod:`dpsql.core.moments`), released in that order
    from ``n_hat``'s entries for them.  dp_stddev is the square root of the release (post-processing)."""
    need_wide("dp_var asymmetric")
    n = np.asarray(src.sizes(), dtype=np.int64)
    G = n.size
    if n_hat is None:
        n_hat = released_count(src, epsilon, rng)
    sel = np.arange(G) if groups is None else np.asarray(groups, dtype=np.int64)
    _, eps_asm, eps2 = _shares(epsilon)
    C = truncation(eps2)
    log_f, log_L = np.empty(sel.size), np.empty((sel.size, C))
    rows = row_groups(n_hat[sel], small)  # positions in sel
    # the rows in parts of summary.ROWS_CHUNK released rows (each group's bounds are its own: no bit changes)
    for g in announce_rows(src, row_parts(sel[rows], n_hat), n_hat) if rows.size else ():
        at = np.searchsorted(sel, g)
        log_f[at], log_L[at] = _rows_bounds(src.batch(g), n_hat[g], C)
    big = np.setdiff1d(np.arange(sel.size), rows)
    if big.size:
        log_f[big], log_L[big] = _summary_bounds(src.var_summary(sel[big], C), C)
    lb = np.log(grid_ratio(eps_asm, n_hat[sel]))
    return asm_scan(log_f, log_L, np.zeros((sel.size, 0)), np.full(sel.size, np.inf), RATIO * eps2, eps2, rng, lb,
                    0.0)
