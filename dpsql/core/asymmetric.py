"""Asymmetric sensitivity mechanism (seed 002, Durfee NeurIPS 2024), re-derived for add/remove neighbours.

"The digest" below is the seed's design notes (``seeds/digests/002-asymmetric-sensitivity.md``): external material,
not in this repository; docs/methods.md (seed 002) summarises the method.

The mechanism (ASM) runs AboveThreshold with one-sided exponential noise over a fixed increasing grid of
candidate outputs t, with the "reflective inverse sensitivity" query ``s(x; t) = -(len(x; t) - 1/2)`` below
f(x) and ``+(len(x; t) - 1/2)`` above, and outputs the first candidate whose noisy query crosses the noisy
threshold.  ``len`` is computed from lower/upper output bounds ``Lbar^l`` / ``Ubar^l`` (the smallest /
largest value of f within l add/remove operations, or valid relaxations of them).

What changed against the paper (swap neighbours, public n), and why:

* **Neighbours add or remove a row.**  The bounds are re-derived: for the population variance
  ``L^l(x) = min_{k <= l} W_k / (n + l - 2k)``, with ``W_k`` the smallest sum of squared deviations of a
  window of ``n - k`` sorted values (remove k extremes, add ``l - k`` rows at the mean of the rest); for a
  sum of non-negative terms ``L^l`` drops the l largest and ``U^l = f + l * B`` adds l rows at the upper
  bound B.  Every bound is the infimum (supremum) of f over the ball of radius l, truncated to 0 (``+inf``)
  past a level ``h(x)`` with ``|h(x) - h(x')| <= 1`` for neighbours, so Def. A.1 of the paper holds
  (``Lbar^l(x) >= Lbar^{l+1}(x')`` by ball inclusion) and the queries have sensitivity 1.
* **The query at t = f** is taken as -1/2 (instead of 0): with ``len^-(t) = min{l >= 1 : Lbar^l <= t}``
  for ``t <= f`` and the upper bounds for ``t > f``, neighbours differ by at most 1 (the only new case,
  ``f(x') < t <= f(x)``, has ``Lbar^1(x) <= f(x') < t``, so ``len^-(x; t) = 1``).
* **A scale-free grid** (digest pitfall 1): ``t_0 = 0`` and ``t_i = 2**-1000 * beta**(i-1)`` up to
  ``2**1020``, the same relative resolution ``beta - 1`` at every scale (the paper's ``beta**i - 1`` has an
  additive resolution of 0.005 near 0).  ``beta`` comes from eps and a released noisy count
  (:func:`grid_ratio`), never from the data directly.  That is up to ~14 million candidates, yet each run
  costs O(C): the queries take only C + O(1) distinct values along the grid (runs of equal s), and the
  first crossing inside a run of equal queries is geometric given the noisy threshold, so it is drawn
  exactly in one step (``floor(E / lambda)``, ``lambda = -log(1 - p)``, ``p = exp(-eps2 (T - s))``): the
  same output distribution as scanning the grid query by query.
* **Truncation scaled with 1/eps** (pitfall 3): below ``Lbar^C`` every query is ``-(C + 1/2)``; with
  ``Q`` candidates there a false stop has probability at most ``Q exp(-eps2 (C + 1/2))``, so
  ``C = ceil((ln Q + C_SLACK) / eps2)`` (clamped to [C_MIN, C_MAX]; it depends on eps only, never on
  the private n).
* **The heavy right tail** (pitfall 2): with no upper bound every query above f is +1/2 and the overshoot
  K (grid steps past f) has ``P(K >= k) ~ Gamma(r+1) e^{-eps1/2} k^{-r}`` with ``r = eps1/eps2``.  The
  paper's equal split (r = 1) gives a 1/k tail (0.7% of runs above 2 f); we use r = 2 (``RATIO``).
  With both bounds, queries above the largest possible value of f are ``+inf`` (output capped).
* **Means** (digest 5.3, not in the paper): under add/remove the mean's queries are not monotone, so
  dp_mean / dp_sum release ASM estimates of *sums* of non-negative terms (monotone: ``eps1 + eps2``, Lemma
  E.6 carried over) plus a noisy count: ``x - lower`` with ``lower :=`` (the paper's losses), otherwise
  ``(x - c)+`` and ``(c - x)+`` around seed 003's private centre c.

Known limits: a downward bias of a few ``Lbar`` levels (about ``ln(#candidates per band) / eps2``), so
heavy right tails (where dropping a few top rows moves f a lot) lose accuracy; groups smaller than about
100/eps stop early (at n = 100, eps = 1, the median relative error of the variance is ~25%).

Floating point: the output is always a grid point (a data-independent set); the bounds are computed
without cancellation (sums accumulate outward from an anchor inside every window) and in 80-bit long
double (``WIDE``: a squared deviation spans 2**-2148..2**2002 over the data domain, beyond float64's
range; one huge row used to make every other row's square underflow to 0, so ``Lbar^1`` was 0 and the
release collapsed, issue 11), so they are exact to relative rounding error; the crossing probabilities
are float64 (relative error ~1e-16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..noise import Rng, failures_before_success
from .accounting import Privacy
from .batch import Batch
from .helpers import B_MIN, bounded
from .intervals import dlap_quantile, tail_index, tail_shells
from .primitives import WIDE, fixed_point_grid, need_wide, noisy_count, per_row, pow2_floor, release_sum
from .ranges import mean_range, radius
from .registry import Method, Params
from .spending import charge_pure

__all__ = [
    "BETA",
    "BETA_K",
    "grid_ratio",
    "RATIO",
    "asm_scan",
    "grid_value",
    "var_bounds",
    "var_bounds_of",
    "var_summary",
    "VarSummary",
    "sum_bounds",
    "truncation",
    "run_var",
    "run_mean",
    "run_sum",
]

BETA: float | None = None  # fixed grid ratio (benchmarks only); None = grid_ratio(eps, n~) (the paper: 1.005)
BETA_K, BETA_MIN, BETA_MAX = 30.0, 1.0001, 1.05  # grid_ratio = 1 + clip(BETA_K / (eps n~), ...)
LOG_G0 = -1000.0 * math.log(2.0)  # t_1 = 2**-1000
LOG_TOP = 1020.0 * math.log(2.0)  # last grid point ~ 2**1020
RATIO = 2.0  # eps1 / eps2 (threshold / query noise); 1 is the paper's split
C_SLACK = 7.0  # false stop below Lbar^C with probability <= e^-7
C_MIN = 100  # the paper's c
C_MAX = 1000  # O(min(C, n)^2) work per group

# budget shares
SPLIT_VAR = {"count": 0.05, "asm": 0.95}  # the count only tunes the grid ratio
SPLIT_MEAN = {"bound": 0.1, "range": 0.2, "count": 0.1, "asm": 0.6}  # no `lower :=`: private centre
SPLIT_MEAN_LOWER = {"count": 0.15, "asm": 0.85}  # `lower :=` given


# --------------------------------------------------------------------------- the grid and the scan


def _grid_size(log_beta: np.ndarray | float) -> np.ndarray:
    """Number of positive grid points (indices 1..I), per group."""
    return (np.ceil((LOG_TOP - LOG_G0) / np.asarray(log_beta)) + 1).astype(np.int64)


def grid_value(idx: np.ndarray, log_beta: np.ndarray | float) -> np.ndarray:
    """Candidate ``t_idx``: 0 for idx 0, else ``2**-1000 * beta**(idx-1)``."""
    idx = np.asarray(idx)
    return np.where(idx == 0, 0.0, np.exp(LOG_G0 + np.maximum(idx - 1, 0) * np.asarray(log_beta)))


def _col(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Per-group array shaped to broadcast against ``like`` ([G] or [G, k])."""
    return a if like.ndim == 1 else a[:, None]


def _n_le(logv: np.ndarray, log_beta: np.ndarray, I: np.ndarray) -> np.ndarray:
    """#{grid points <= v} given log v (-inf for v = 0, +inf allowed)."""
    with np.errstate(invalid="ignore"):
        k = np.floor((logv - LOG_G0) / _col(log_beta, logv)) + 1.0
    k = np.where(np.isnan(k), 0.0, k)
    return 1 + np.clip(k, 0, _col(I, logv)).astype(np.int64)


def _n_lt(logv: np.ndarray, log_beta: np.ndarray, I: np.ndarray) -> np.ndarray:
    """#{grid points < v} given log v (0 for v = 0)."""
    with np.errstate(invalid="ignore"):
        k = np.ceil((logv - LOG_G0) / _col(log_beta, logv))
    k = np.where(np.isnan(k), 0.0, k)
    return np.where(np.isneginf(logv), 0, 1 + np.clip(k, 0, _col(I, logv)).astype(np.int64))


def grid_ratio(eps: float, n: np.ndarray) -> np.ndarray:
    """The grid ratio per group from the ASM's eps and a *released* noisy count n (public).

    ``beta - 1 = clip(BETA_K / (eps n), BETA_MIN - 1, BETA_MAX - 1)``.  Below f the run stops about
    ``ln(#candidates per band) / eps2`` levels under f, and the bands of equal queries are ~1/n wide
    (relative), so a grid finer than ~1/(eps n) only adds downward bias while a coarser one adds
    resolution error and a heavier right tail in value terms; BETA_K was tuned on the benchmark panel
    (``benchmarks/paper_seed002.py``).  The paper fixes 1.005 (``BETA`` overrides, for benchmarks).
    """
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    if BETA is not None:
        return np.full(n.shape, BETA)
    return 1.0 + np.clip(BETA_K / (eps * n), BETA_MIN - 1.0, BETA_MAX - 1.0)


def truncation(eps2: float) -> int:
    """C: how many lower bounds to compute, from eps only (never from data or n): the false-stop bound
    ``Q exp(-eps2 (C + 1/2)) <= e^-C_SLACK`` with Q the candidate count of the finest grid (BETA_MIN)."""
    finest = math.log(BETA if BETA is not None else BETA_MIN)
    q = math.log(float(_grid_size(finest)) + 1.0)
    return int(min(C_MAX, max(C_MIN, math.ceil((q + C_SLACK) / eps2))))


def asm_scan(
    log_f: np.ndarray,
    log_lower: np.ndarray,
    log_upper: np.ndarray,
    log_cap: np.ndarray,
    eps1: float,
    eps2: float,
    rng: Rng,
    log_beta: np.ndarray,
    shift: float = 0.0,
    monotone: bool = False,
) -> np.ndarray:
    """AboveThreshold with exponential noise over the grid, for every group at once; returns t.
    ``shift`` (public) moves the threshold: ``-d`` makes the scan fire about d rows' worth below f (an
    interval's lower end; the privacy is unchanged).

    ``log_lower[g, l-1] = log Lbar^l`` (l = 1..C, non-increasing, ``-inf`` for 0; ``Lbar^l = 0`` past C),
    ``log_upper[g, l-1] = log Ubar^l`` (l = 1..K, non-decreasing; ``Ubar^l = +inf`` past K, i.e. the
    query is ``K + 1/2`` there), ``log_cap[g]``: candidates above it are impossible values of f for any
    dataset (query ``+inf``; ``+inf`` when there is no such cap).  Threshold noise Expo(1/eps1), query
    noise Expo(1/eps2), sensitivity 1: (eps1 + 2 eps2)-DP, or (eps1 + eps2)-DP when the queries are
    monotone (Durfee 2023, Prop. 2.5 of the paper; the caller says so with ``monotone``, and is charged
    accordingly).  A run that never crosses returns the last grid point (data-independent).
    """
    G = log_f.size
    log_beta = np.broadcast_to(np.asarray(log_beta, dtype=np.float64), (G,))
    I = _grid_size(log_beta)
    C = log_lower.shape[1]
    K = log_upper.shape[1]
    # boundaries in grid-index space, increasing in t
    b_low = _n_lt(log_lower[:, ::-1], log_beta, I)  # starts of runs l = C..1
    b_f = _n_le(log_f, log_beta, I)[:, None]
    b_up = _n_le(log_upper, log_beta, I)
    b_cap = _n_le(log_cap, log_beta, I)[:, None]
    bounds = np.concatenate([np.zeros((G, 1), np.int64), b_low, b_f, b_up, b_cap, (I + 1)[:, None]], axis=1)
    bounds = np.maximum.accumulate(bounds, axis=1)
    start, length = bounds[:, :-1], np.diff(bounds, axis=1)
    s = np.concatenate(
        [-(np.arange(C + 1, 0, -1) - 0.5), np.arange(1, K + 2) - 0.5, [np.inf]]
    )  # runs: l = C+1..1 below f, 1..K+1 above, +inf above the cap
    charge_pure(eps1 + (1.0 if monotone else 2.0) * eps2, "asymmetric sensitivity scan" + " (monotone)" * monotone)
    thr = rng.exponential(G) / eps1 + shift
    gap = np.maximum(thr[:, None] - s[None, :], 0.0)
    with np.errstate(under="ignore"):
        p = np.exp(-eps2 * gap)  # each candidate of a run crosses with probability p
    j = failures_before_success(p, rng)  # the first crossing inside each run (+inf: none)
    fire = j < length
    first = np.argmax(fire, axis=1)
    any_fire = fire[np.arange(G), first]
    rows = np.arange(G)
    idx = np.where(any_fire, start[rows, first] + np.where(any_fire, j[rows, first], 0), I)
    return grid_value(idx.astype(np.int64), log_beta)


# --------------------------------------------------------------------------- variance bounds


def _rev_cumsum(a: np.ndarray) -> np.ndarray:
    """``out[:, j] = sum(a[:, j:])`` accumulated from the right (no subtraction); one extra 0 column."""
    out = np.zeros((a.shape[0], a.shape[1] + 1), dtype=a.dtype)
    if a.shape[1]:
        out[:, :-1] = np.cumsum(a[:, ::-1], axis=1)[:, ::-1]
    return out


@dataclass(frozen=True)
class VarSummary:
    """Everything :func:`var_bounds` reads of a group's rows (issue 17: a source may compute it without the rows).

    Per group g of G (sorted positions ``0..n-1``, ``kg = min((n + 1) // 2 - 1, C)``, :func:`var_edges`):

    * ``n`` [G] int64: the row count; ``xm`` [G]: the anchor, any value inside the core (between its first and
      last rows, below): :func:`var_summary` takes the value at sorted position ``n // 2`` (the median), a source
      may take another (the bounds depend on it only through rounding: every window a bound sums over holds the
      core, so sums accumulate outward from a point inside it either way); 0 when n = 0;
    * ``lo``, ``hi`` [W, G] float64: ``lo[j] = x_(j)``, ``hi[j] = x_(n-1-j)`` for ``j < min(n, kg + 1)`` (0 past
      it, never read), ``W = max kg + 1``: the edges (``j < kg``, the rows outside the core), the core's first and
      last rows (``j = kg``) and, for ``n <= 2C + 1``, together every row (what the deeper windows read);
    * ``s1``, ``s2`` [G] float64: ``sum d`` and ``sum d**2`` over the core, the sorted positions ``[kg, n - kg)``,
      with ``d = (x - xm) / sc_c`` and ``sc_c`` the core's own power-of-two scale (:func:`var_core_scale`, a
      function of n, xm, lo and hi).

    :func:`var_summary` computes it from a sorted batch (the list route: :func:`var_bounds` is
    ``var_bounds_of(var_summary(s, C), C)``, the same floating-point operations as before the split); the summary
    plans compute it with native passes (top-k lists, then one pass for the core sums around the core's midpoint)."""

    n: np.ndarray
    xm: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    s1: np.ndarray
    s2: np.ndarray


def var_edges(n: np.ndarray, C: int) -> np.ndarray:
    """``kg = min((n + 1) // 2 - 1, C)`` (>= 0): the rows dropped from each end of the core; windows removing at
    most kg rows contain the median position."""
    return np.clip((np.asarray(n, dtype=np.int64) + 1) // 2 - 1, 0, C)


def var_core_scale(n: np.ndarray, xm: np.ndarray, lo: np.ndarray, hi: np.ndarray, kg: np.ndarray) -> np.ndarray:
    """The core's power-of-two scale ``sc_c``: ``pow2_floor`` of its largest deviation from xm (1 when it is 0),
    from the core's first and last rows ``lo[kg]`` and ``hi[kg]`` (the core is empty only when n = 0)."""
    G = n.size
    inner = n - 2 * kg > 0
    if lo.shape[0]:
        cols = np.arange(G)
        at = np.minimum(kg, lo.shape[0] - 1)
        a, b = lo[at, cols], hi[at, cols]
    else:
        a = b = xm
    cspread = np.maximum(xm - np.where(inner, a, xm), np.where(inner, b, xm) - xm)
    return np.where(cspread > 0, pow2_floor(np.maximum(cspread, 2.0**-1000)), 1.0)


def var_summary(s: Batch, C: int) -> VarSummary:
    """:class:`VarSummary` of a sorted batch: the edges and median read off the rows, the core sums by
    :func:`_deviations` (float64 at the core's scale, one ``np.add.reduceat`` segment per group).  O(n) per group
    plus O(W) for the edges."""
    G = s.groups
    n = s.sizes
    off = s.offsets
    v = s.values
    if v.size == 0:
        z = np.zeros(G)
        return VarSummary(n, z, np.zeros((0, G)), np.zeros((0, G)), z, z.copy())
    has = n > 0
    last = v.size - 1
    xm = np.where(has, v[np.minimum(off[:-1] + n // 2, last)], 0.0)
    kg = var_edges(n, C)
    jj = np.arange(int(kg.max()) + 1)[:, None]
    ok = jj < np.minimum(n, kg + 1)[None, :]
    lo = np.where(ok, v[np.clip(off[:-1][None, :] + jj, 0, last)], 0.0)
    hi = np.where(ok, v[np.clip(off[1:][None, :] - 1 - jj, 0, last)], 0.0)
    sc_c = var_core_scale(n, xm, lo, hi, kg)
    _, s1c, s2c = _deviations(v, off, xm, sc_c, off[:-1] + kg, off[1:] - kg)
    return VarSummary(n, xm, lo, hi, s1c, s2c)


def var_bounds(s: Batch, C: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log f, log Lbar)`` of a sorted batch: :func:`var_bounds_of` on :func:`var_summary` (the list route)."""
    return var_bounds_of(var_summary(s, C), C)


def var_bounds_of(S: VarSummary, C: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log f, log Lbar)`` for the population variance under add/remove: ``Lbar`` is ``[G, C]``; the data enter
    only through the summary ``S`` (:class:`VarSummary`, computed with the same ``C``).

    ``f = (1/n) sum (x - mean)**2`` (0 for n <= 1, and for the empty set).  For ``l < h = min(C + 1, n - 1)``:
    ``Lbar^l = L^l = min_{k <= l} W_k / (n + l - 2k)`` (exact infimum over the add/remove ball: removing k
    rows leaves at best a window of n - k sorted values, and adding ``l - k`` rows at its mean divides its
    SSD by the new size); ``Lbar^l = 0`` for ``l >= h`` (exact for ``l >= n - 1``: one row is left).  As
    ``|h(x) - h(x')| <= 1``, Def. A.1 holds.  Window sums never subtract: for ``k < n/2`` every window holds
    the median, and sums accumulate outward from it; the deeper windows (only when n <= 2C + 1) accumulate
    rightward from their own first row.  Either way the anchor lies in the window, so the relative rounding
    error is at most ~(window size) * 2**-53 even with huge outliers.  Work: O(C^2) per group, plus O(n C) for
    groups of n <= 2C + 1 (and the summary's O(n)).

    Cost: the O(C^2) window and bound minima run over contiguous column slices, on only the groups deep enough
    for each k / l (groups ordered by size), into contiguous buffers, with the divisors converted to WIDE once
    per block (about six WIDE numpy passes per window and two per bound: near numpy's floor for WIDE, ~4 ns an
    element); the core's two sums come in the summary.
    """
    n = S.n
    G = n.size
    has = n > 0
    if not has.any():
        return np.full(G, -np.inf), np.full((G, C), -np.inf)
    xm = S.xm
    first = np.where(has, S.lo[0], 0.0)
    lastv = np.where(has, S.hi[0], 0.0)
    spread = np.maximum(xm - first, lastv - xm)
    sc = np.where(spread > 0, pow2_floor(np.maximum(spread, 2.0**-1000)), 1.0)
    kg = var_edges(n, C)  # windows for k <= kg contain the median position
    # The core rows [kg, n - kg) (in every window) are summed in float64 at the core's own scale: their
    # squares cannot underflow next to a huge edge row, and the O(n) pass stays fast; the sums are then
    # moved to the group's scale in WIDE (a power-of-two ratio, exact), where the edge rows join them.
    sc_c = var_core_scale(n, xm, S.lo, S.hi, kg)
    to_group = sc_c.astype(WIDE) / sc.astype(WIDE)
    s1c = S.s1.astype(WIDE) * to_group
    s2c = S.s2.astype(WIDE) * to_group * to_group
    cw = int(kg.max())
    kf = np.clip(n - 2, 0, C)  # h - 1: deepest removal count used
    cwf = int(kf.max())
    nf = n.astype(np.float64)
    # groups by decreasing size: kg and kf are non-increasing, so the groups that take part at a given
    # depth k (kg >= k, or kf >= k) are a prefix
    order = None if np.all(n[:-1] >= n[1:]) else np.argsort(-n, kind="stable")

    def perm(a: np.ndarray) -> np.ndarray:
        return a if order is None else a[order]

    def unperm(a: np.ndarray) -> np.ndarray:
        if order is None:
            return a
        out = np.empty_like(a)
        out[order] = a
        return out

    def perm_cols(a: np.ndarray, depth: int) -> np.ndarray:  # [depth, G], groups in size order
        a = a[:depth]
        return a if order is None else a[:, order]

    kgp, kfp, nfp = perm(kg), perm(kf), perm(nf)
    # Work arrays are [depth, group] (groups contiguous, in size order), processed in blocks of B groups
    # that stay in cache.  Edges: lo[j] = d[start + j], hi[j] = d[end - 1 - j] for j < kg (0 past kg).
    B = max(512, 65536 // (max(cw, cwf) + 1))
    jj = np.arange(cw)[:, None]
    ok = jj < kgp[None, :]
    xmp, invp = perm(xm)[None, :], perm((1.0 / sc).astype(WIDE))[None, :]  # 1/sc: exact, a power of two
    lo = np.where(ok, (perm_cols(S.lo, cw) - xmp).astype(WIDE) * invp, 0.0)
    hi = np.where(ok, (perm_cols(S.hi, cw) - xmp).astype(WIDE) * invp, 0.0)
    # A1[cw - a] = s1c + sum(lo[a:]), H1[b] = sum(hi[b:]) (and A2, H2 for the squares): the edge sums
    # accumulate inward from the outermost kept row
    A1, A2, H1, H2 = (np.zeros((cw + 1, G), dtype=WIDE) for _ in range(4))
    _cumsum0(lo[::-1], out=A1[1:])
    _cumsum0(np.square(lo)[::-1], out=A2[1:])
    H1[:cw] = _cumsum0(hi[::-1])[::-1]
    H2[:cw] = _cumsum0(np.square(hi)[::-1])[::-1]
    A1 += perm(s1c)[None, :]
    A2 += perm(s2c)[None, :]
    # W_k = min_i SSD(window dropping k - i bottom and i top rows)
    mg = _prefix_counts(kgp, cw)
    WT = np.full((max(cw, cwf) + 1, G), np.inf, dtype=WIDE)
    # flat buffers, viewed as contiguous [rows, m] arrays (a column slice of a [rows, B] buffer is strided)
    b1, b2 = np.empty((cw + 1) * B, dtype=WIDE), np.empty((cw + 1) * B, dtype=WIDE)
    ks = np.arange(cw + 1, dtype=np.float64)[:, None]
    for c0 in range(0, G, B):
        c1 = min(c0 + B, G)
        a1, a2, h1, h2 = (np.ascontiguousarray(X[:, c0:c1]) for X in (A1, A2, H1, H2))
        # the divisors max(n - k, 1) of the block, converted to WIDE once (exact): a float64 divisor
        # broadcast over the rows would be cast again for every k
        dk = np.maximum(nfp[None, c0:c1] - ks, 1.0).astype(WIDE)
        for k in range(cw + 1):
            m = min(mg[k], c1) - c0  # groups of the block with kg >= k
            if m <= 0:
                break
            g = slice(c0, c0 + m)
            r = (k + 1) * m
            s1 = np.add(a1[cw - k :, :m], h1[: k + 1, :m], out=b1[:r].reshape(k + 1, m))
            s2 = np.add(a2[cw - k :, :m], h2[: k + 1, :m], out=b2[:r].reshape(k + 1, m))
            np.square(s1, out=s1)  # s1 * s1 (the same product; numpy's square loop is faster)
            s1 /= dk[k, :m]
            s2 -= s1
            s2.min(axis=0, out=WT[k, g])
    np.maximum(WT[: cw + 1], 0.0, out=WT[: cw + 1])  # min_i max(x_i, 0) == max(min_i x_i, 0); inf stays inf
    W = unperm(WT.T)
    _deep_windows(S, sc, kg, kf, W)
    f = np.where(n >= 2, W[:, 0] / np.maximum(nf, 1.0), 0.0)
    # L^l = min_{k <= l} W_k / (n + l - 2k), for l <= kf; W_k is +inf past kf, so only k <= kf contributes
    lc = min(cwf, C)
    if lc:
        WT = np.ascontiguousarray(perm(W).T)
        LT = np.empty((lc, G), dtype=WIDE)
        mf = _prefix_counts(kfp, lc)
        js = np.arange(-lc, lc + 1, dtype=np.float64)[:, None]
        buf = np.empty(lc * B, dtype=WIDE)
        for c0 in range(0, G, B):
            c1 = min(c0 + B, G)
            D = np.maximum(nfp[None, c0:c1] + js, 1.0).astype(WIDE)  # D[lc + j] = max(n + j, 1), exact
            lt = np.full((lc, c1 - c0), np.inf, dtype=WIDE)
            for k in range(lc + 1):
                m = min(mf[k], c1) - c0  # groups of the block with kf >= k
                if m <= 0:
                    break
                l0 = max(k, 1)
                q = np.divide(
                    WT[k, c0 : c0 + m],
                    D[l0 - 2 * k + lc : 2 * lc - 2 * k + 1, :m],
                    out=buf[: (lc - l0 + 1) * m].reshape(lc - l0 + 1, m),
                )
                dst = lt[l0 - 1 :, :m]
                np.minimum(dst, q, out=dst)
            LT[:, c0:c1] = lt
    # Lbar: L^l for l <= kf, 0 past it (and past lc), capped by f and made non-increasing in l
    two_log_sc = 2.0 * np.log(sc)
    log_L = np.full((G, C), -np.inf)
    if lc:
        LT = np.where(np.arange(1, lc + 1)[:, None] <= kfp[None, :], LT, 0.0)
        np.minimum(LT, perm(f)[None, :], out=LT)
        np.minimum.accumulate(LT, axis=0, out=LT)  # LT[l] = minimum(LT[l - 1], LT[l]), l = 1, 2, ...
        with np.errstate(divide="ignore"):
            LT = np.log(LT).astype(np.float64)
        LT += perm(two_log_sc)[None, :]
        log_L[:, :lc] = unperm(LT.T)
    with np.errstate(divide="ignore"):
        return np.log(f).astype(np.float64) + two_log_sc, log_L


def _cumsum0(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.cumsum(a, axis=0)`` (the same sequential sums), row by row when the rows are wide (numpy's
    accumulate down axis 0 walks column by column)."""
    if a.shape[1] < 256:
        return np.cumsum(a, axis=0, out=out)
    if out is None:
        out = np.empty(a.shape, dtype=a.dtype)
    if a.shape[0]:
        out[0] = a[0]
        for i in range(1, a.shape[0]):
            np.add(out[i - 1], a[i], out=out[i])
    return out


def _prefix_counts(depth: np.ndarray, top: int) -> list[int]:
    """``out[k] = #{g : depth[g] >= k}`` for k = 0..top (depth non-increasing: the groups are a prefix)."""
    c = np.bincount(np.minimum(depth, top), minlength=top + 1)
    return np.cumsum(c[::-1])[::-1].tolist()


_ROWS = 1 << 16  # rows per block of whole groups in _deviations


def _deviations(
    v: np.ndarray, off: np.ndarray, xm: np.ndarray, sc: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``d = (v - xm[g]) / sc[g]`` row by row, and ``(sum d, sum d**2)`` over the rows ``[lo[g], hi[g])``.

    In blocks of whole groups of about _ROWS rows, so the repeated per-group constants and the squares
    stay in cache; a group's sums do not depend on the block it falls in (one reduceat segment each).
    """
    G = xm.size
    n = np.diff(off)
    inv = 1.0 / sc  # exact (powers of two): x * inv == x / sc bit for bit
    d = np.empty_like(v)
    s1, s2 = np.zeros(G), np.zeros(G)
    cuts = np.searchsorted(off, np.arange(0, v.size, _ROWS), side="right") - 1
    cuts = np.unique(np.concatenate([[0], cuts, [G]])).tolist()
    with np.errstate(over="ignore", invalid="ignore"):  # rows outside [lo, hi) may overflow; never summed
        for g0, g1 in zip(cuts[:-1], cuts[1:], strict=True):
            r0, r1 = int(off[g0]), int(off[g1])
            if r1 == r0:
                continue
            x = d[r0:r1]
            if g1 - g0 == 1:
                np.subtract(v[r0:r1], xm[g0], out=x)
                x *= inv[g0]
            else:
                np.subtract(v[r0:r1], np.repeat(xm[g0:g1], n[g0:g1]), out=x)
                x *= np.repeat(inv[g0:g1], n[g0:g1])
            s1[g0:g1], s2[g0:g1] = _core_sums(x, lo[g0:g1] - r0, hi[g0:g1] - r0)
    return d, s1, s2


def _core_sums(d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sum d, sum d**2)`` over the disjoint, increasing row ranges ``[lo[g], hi[g])`` (0 when empty)."""
    G = lo.size
    s1, s2 = np.zeros(G, dtype=d.dtype), np.zeros(G, dtype=d.dtype)
    ne = np.flatnonzero(hi > lo)
    if ne.size == 0:
        return s1, s2
    idx = np.empty(2 * ne.size, dtype=np.int64)
    idx[0::2], idx[1::2] = lo[ne], hi[ne]
    if idx[-1] >= d.size:
        idx = idx[:-1]  # the last range runs to the end of d
    if G == 1:  # one range: square only its rows
        d, idx = d[idx[0] : hi[0]], idx[:1] - idx[0]
    s1[ne] = np.add.reduceat(d, idx)[0::2]
    s2[ne] = np.add.reduceat(d * d, idx)[0::2]  # reduceat, also for one group: the same sums in any batch
    return s1, s2


def _deep_windows(S: VarSummary, sc: np.ndarray, kg: np.ndarray, kf: np.ndarray, W: np.ndarray) -> None:
    """Fill ``W[g, k]`` for ``kg[g] < k <= kf[g]`` (windows of n - k sorted values that may miss the median).

    Loop over the window start a: sums of ``(x_j - x_a) / sc`` and their squares accumulate rightward from
    a, so the window ``[a, a + n - k)`` of every k >= a is read off one cumsum.  The differences are taken
    from the values themselves (not from deviations from the median, which round away rows that are close
    to each other but far from the median), then squared in WIDE precision.  Only groups of n <= 2C + 1
    take part; their rows are the summary's ``lo[:kg + 1]`` then ``hi`` read backwards (every row).  Work
    O(n) per (group, a).
    """
    n = S.n
    sel = np.flatnonzero(kf > kg)
    if sel.size == 0:
        return
    sel = sel[np.argsort(-n[sel], kind="stable")]  # by decreasing size: the groups with kf >= a are a prefix
    ns = n[sel]
    width = int(ns.max())
    # [row, group] layout (groups contiguous): the cumsums run down columns, each group's sums in the
    # same order as along its row
    jj = np.arange(width)[:, None]
    inside = jj < ns[None, :]
    top = S.lo.shape[0] - 1
    from_lo = jj <= kg[sel][None, :]
    X = np.where(inside, np.where(from_lo, S.lo[np.minimum(jj, top), sel[None, :]],
                                  S.hi[np.clip(ns[None, :] - 1 - jj, 0, top), sel[None, :]]), 0.0)
    inv = (1.0 / sc[sel]).astype(WIDE)
    k_lo, k_hi = int(kg[sel].min()) + 1, int(kf[sel].max())
    ks = np.arange(k_lo, k_hi + 1)[:, None]
    w = ns[None, :] - ks  # window sizes n - k, [k, group]
    valid = (ks > kg[sel][None, :]) & (ks <= kf[sel][None, :]) & (w >= 1)
    best = np.full(w.shape, np.inf, dtype=WIDE)
    nf = ns.astype(np.float64)[None, :]
    deep = _prefix_counts(kf[sel], k_hi)
    span = int((ns - kg[sel] - 1).max())  # a deep window (k > kg) holds at most n - kg - 1 rows
    div = np.maximum(w, 1).astype(WIDE)  # the window sizes as WIDE divisors (exact), converted once
    cols = np.arange(w.shape[1])
    for a in range(k_hi + 1):
        m, i0 = deep[a], max(a - k_lo, 0)  # only k >= a, and groups with kf >= a, can take a window at a
        y = np.subtract(X[a : a + span, :m], X[a, :m]).astype(WIDE)  # |x_j - x_a| <= 2**1001: finite
        y *= inv[None, :m]
        c1 = _cumsum0(y)
        c2 = _cumsum0(np.square(y, out=y))  # y * y (the same product)
        wa = w[i0:, :m]
        # the entries of c1, c2 at row wa - 1 of each column, read off the flat (contiguous) arrays
        at = np.clip(wa - 1, 0, c1.shape[0] - 1)
        at *= m
        at += cols[:m]
        ok = valid[i0:, :m] & (ks[i0:] >= a) & (a + wa <= nf[:, :m])
        s1, s2 = c1.ravel().take(at), c2.ravel().take(at)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.square(s1, out=s1)  # s2 - s1 * s1 / max(wa, 1), then max(., 0), in place
            s1 /= div[i0:, :m]
            s2 -= s1
            np.maximum(s2, 0.0, out=s2)
        b = best[i0:, :m]
        np.minimum(b, s2, out=b, where=ok)
    sub = W[sel]
    sub[:, k_lo : k_hi + 1] = np.where(valid.T, best.T, sub[:, k_lo : k_hi + 1])
    W[sel] = sub


# --------------------------------------------------------------------------- sum bounds


def sum_bounds(s: Batch, a: np.ndarray, C: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log f, log Lbar, log scale)`` for ``f = sum (x - a)`` over a sorted batch with every x >= a.

    Add/remove: the smallest sum within l operations drops the l largest terms (adding a term >= 0 never
    lowers it), exact for l <= C, 0 past C (or past n).  Sums accumulate from the small terms outward, so
    no cancellation.  Returned in log units of the true sum.
    """
    G = s.groups
    n = s.sizes
    off = s.offsets
    gid = s.group_ids
    if s.values.size == 0:
        return np.full(G, -np.inf), np.full((G, C), -np.inf), np.zeros(G)
    last = s.values.size - 1
    w = np.maximum(s.values - a[gid], 0.0)
    top = np.where(n > 0, w[np.maximum(off[1:] - 1, 0)], 0.0)
    sc = np.where(top > 0, pow2_floor(np.maximum(top, 2.0**-1000)), 1.0)
    w = w.astype(WIDE) / sc[gid]  # WIDE: the small terms must not underflow next to a huge top term
    cg = np.minimum(n, C)
    base, _ = _core_sums(w, off[:-1], off[1:] - cg)
    jj = np.arange(C)
    ok = jj[None, :] < cg[:, None]
    tops = np.where(ok, w[np.clip(off[1:, None] - 1 - jj[None, :], 0, last)], 0.0)
    # L^l = base + sum of tops[l:] (the top values left after dropping the l largest)
    rest = _rev_cumsum(tops)
    f = base + rest[:, 0]
    L = base[:, None] + rest[:, 1:]
    L = np.where(jj[None, :] + 1 < n[:, None], L, 0.0)
    with np.errstate(divide="ignore"):
        ls = np.log(sc)
        return np.log(f).astype(np.float64) + ls, np.log(L).astype(np.float64) + ls[:, None], ls


# --------------------------------------------------------------------------- aggregates


def _var(s: Batch, eps_count: float, asms: tuple[tuple[float, float], ...], params: Params, rng: Rng
         ) -> tuple[list[np.ndarray], np.ndarray]:
    """A noisy count (``eps_count``, it only sets the grid ratio), then one ASM for the variance per
    ``(eps, threshold shift)`` in ``asms`` (each eps-DP on the same exact bounds; the grid is public once
    the count is released).  Returns the releases and the noisy count."""
    n_hat = noisy_count(s, eps_count, rng)
    return asm_vars(s, n_hat, asms, params, rng), n_hat


def asm_var(s: Batch, n_hat: np.ndarray, eps: float, params: Params, rng: Rng) -> np.ndarray:
    """One ASM for the variance at ``eps`` on a sorted batch given its released count (:func:`asm_vars`)."""
    return asm_vars(s, n_hat, ((eps, 0.0),), params, rng)[0]


def asm_vars(s: Batch, n_hat: np.ndarray, asms: tuple[tuple[float, float], ...], params: Params, rng: Rng
             ) -> list[np.ndarray]:
    """:func:`_var` after its count: one ASM per ``(eps, threshold shift)`` given the released count ``n_hat``
    (the grid ratio's input), on the sorted (bounded) batch ``s``."""
    steps = [(eps, sh, eps / (RATIO + 2.0)) for eps, sh in asms]
    log_f, log_L = var_bounds(s, max(truncation(e2) for _, _, e2 in steps))
    if params.lower is not None and params.upper is not None:
        cap = np.full(s.groups, 2.0 * math.log(max(params.upper - params.lower, 2.0**-1000) / 2.0))
    else:
        cap = np.full(s.groups, np.inf)
    out = []
    for eps, sh, eps2 in steps:
        lb = np.log(grid_ratio(eps, n_hat))
        t = asm_scan(log_f, log_L[:, :truncation(eps2)], np.zeros((s.groups, 0)), cap, RATIO * eps2, eps2, rng, lb,
                     sh)
        if params.lower is not None and params.upper is not None:
            with np.errstate(over="ignore"):  # inf when the square overflows: then no cap
                t = np.minimum(t, np.square(np.float64(params.upper / 2.0 - params.lower / 2.0)))
        out.append(t)
    return out


def run_var(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_var, asymmetric sensitivity mechanism (seed 002, Alg. 2, add/remove form).  Cost eps (pure).

    ``eps = eps1 + 2 eps2`` with ``eps1 = RATIO * eps2``: the variance queries are not monotone (digest
    4.5), so the general AboveThreshold bound applies.  No bounds needed: above f every query is +1/2
    (adding one row can raise the variance arbitrarily).  With ``lower`` and ``upper`` the data are
    clamped and candidates above ``(upper - lower)**2 / 4`` (the largest variance of any dataset in the
    bounds) are ``+inf``, which caps the output; one given bound only clamps.  Targets the population
    variance (1/n); never NULL (an empty group releases a grid point).  O(n + min(C, n)^2) per group.

    Cost split (SPLIT_VAR): a noisy count (0.05 eps) that only sets the grid ratio (:func:`grid_ratio`),
    then the ASM (0.95 eps); sequential composition, the grid being public once the count is released.
    """
    need_wide("dp_var asymmetric")
    eps = budget.epsilon
    return _var(bounded(batch, params).sorted(), SPLIT_VAR["count"] * eps, ((SPLIT_VAR["asm"] * eps, 0.0),),
                params, rng)[0][0]


#: dp_var_ci's split of eps: the count and the release's ASM (the release's draws, as before), then the upper end's
#: floor and median c, the radius R around c, the tail-shell counts and the clipped sum of squares
SPLIT_VAR_CI = {"count": 0.04, "asm": 0.45, "floor": 0.03, "centre": 0.08, "radius": 0.07, "tail": 0.2,
                "squares": 0.13}
#: the radius scan around c stops once about ``VAR_OUTSIDE / eps_radius`` rows lie outside ``[c - R, c + R]``
#: (at 10, R sat so deep in the bulk at n eps ~ 1e3 that the shell beyond R / 2 held half the rows and the tail
#: test saw the bulk: no finite upper end in 95-100 % of those runs; at 5, 15-25 % on light tails; at 3, more
#: runs with no finite end at n eps = 1e4: measured, benchmarks/intervals.py)
VAR_OUTSIDE = 5.0
#: the tail test's inner radii ``R / r`` (the scan passed them without stopping, so more rows lie beyond them
#: than beyond R); the largest index any of them gives decides (2, 4, 8 measured the same as 2 alone)
VAR_IN = (2.0,)
#: a finite upper end needs the tail's index estimate ``a > VAR_TAIL_MIN`` (> 2: a Pareto tail of index <= 2
#: has no finite second moment, the squares' sum is then ruled by the few rows nobody can see; 2.0 gave more
#: finite ends but wider ones)
VAR_TAIL_MIN = 2.2
#: the index is capped here in the allowance (light tails: ``2 R**2 / (a - 2)`` per row beyond R, not 0)
VAR_TAIL_CAP = 6.0


def overshoot_steps(eps1: float, eps2: float, alpha: float) -> int:
    """The least k >= 1 with ``P(J >= k) <= alpha``, J the grid steps an ASM scan (no upper bounds, threshold
    shift 0) runs past f before it fires: above f every query is +1/2, so given the threshold T = Exp(1) / eps1
    each candidate fires with ``p = exp(-eps2 (T - 1/2)+)`` and ``P(J >= k) = E[(1 - p)**k] = exp(-eps1 / 2)
    r B(r, k + 1)`` with ``r = eps1 / eps2`` (substitute ``v = exp(-eps2 (T - 1/2))``): exact, data-free.  A scan
    that fires below f, or whose queries turn +inf at a cap, only ends lower, so the bound holds for every
    dataset."""
    r = eps1 / eps2
    log_c = -eps1 / 2.0 + math.log(r) + math.lgamma(r)

    def log_tail(k: int) -> float:  # log(exp(-eps1/2) r B(r, k + 1))
        return log_c + math.lgamma(k + 1.0) - math.lgamma(r + k + 1.0)

    lo, hi = 1, 2
    while log_tail(hi) > math.log(alpha):
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if log_tail(mid) > math.log(alpha):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _release_lower(t: np.ndarray, eps_asm: float, n_hat: np.ndarray, alpha: float) -> np.ndarray:
    """A lower end for f from the ASM release t alone (post-processing): t lies at most
    :func:`overshoot_steps` grid steps above f except with probability alpha; grid steps are the released ratio
    beta (from the released count).  ``t <= t_1 beta**(k-1)`` may be a run from f = 0: then 0."""
    eps2 = eps_asm / (RATIO + 2.0)
    k = overshoot_steps(RATIO * eps2, eps2, alpha)
    log_beta = np.log(grid_ratio(eps_asm, n_hat))
    with np.errstate(under="ignore", over="ignore"):
        lo = np.exp(np.log(np.maximum(t, 2.0**-1074)) - k * log_beta) * (1.0 - 1e-9)
        first = np.exp(LOG_G0 + (k - 1) * log_beta) * (1.0 + 1e-9)
    return np.where(t > first, lo, 0.0)


def _tail_upper(s: Batch, n_hat: np.ndarray, eps: float, alpha: float, rng: Rng) -> np.ndarray:
    """The upper end: ``f <= mean((x - c)**2)`` for the released median c, bounded by the clipped sum of squares
    below R plus a tail allowance above R, or +inf where the tail test fails.  Misses with probability alpha
    (alpha / 4 each: the count, the sum, the rows beyond R, the largest of them) when the tail beyond R is no
    heavier than the released shells say (the assumption: see :func:`interval_var`)."""
    from . import scalefree as sf  # the scale-free median; scalefree does not import this module

    sp = SPLIT_VAR_CI
    e = sf.floor_exponent(s, sp["floor"] * eps, rng, n_hat)
    c = sf.centre(s, e, sp["centre"] * eps, rng)
    eps_r = sp["radius"] * eps
    s0 = np.maximum(np.ldexp(1.0, e) * 2.0**-8, B_MIN)
    R = radius(s, c, s0, eps_r, rng, 0.5, outside=VAR_OUTSIDE / eps_r, monotone=True, fine=True)
    huge = R > 2.0**500  # squares past ~2**1000: no finite bound (the domain's squares are not summed)
    R = np.minimum(R, 2.0**500)
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.abs(s.values - per_row(c, s.offsets))
    # disjoint shells (R, inf), (R / VAR_IN[0], R], (R / VAR_IN[1], R / VAR_IN[0]], ...: one charge of eps_t
    eps_t = sp["tail"] * eps
    noisy = tail_shells(s, d, R, VAR_IN, eps_t, rng, "dp_var_ci tail shells (disjoint counts)")
    R2 = R * R
    y = np.square(np.minimum(d, per_row(R, s.offsets)))
    eps_s = sp["squares"] * eps
    S = release_sum(y, s.offsets, R2, eps_s, rng)
    # noise bounds: the count and the sum alpha / 4 each, the shells alpha / 2 together
    k_n = dlap_quantile(1.0 / (sp["count"] * eps), alpha / 4.0)
    n_lo, n_hi = n_hat - k_n, np.maximum(n_hat + k_n, 1.0)
    sens, gamma = fixed_point_grid(R2)
    w = (dlap_quantile(np.ceil(sens / gamma + 0.5) / eps_s, alpha / 4.0) + n_hi / 2.0) * gamma
    # the tail: its index a point estimate from the shells, N_hi the rows beyond R at most (alpha / 4); a lower
    # confidence bound on the index left 95-100 % of light-tailed groups at n eps ~ 1e3 with no finite end (the
    # rows beyond R are about as few as the shells' noise)
    a, N_hi = tail_index(noisy, VAR_IN, n_hat, eps_t, alpha / 4.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        thin = a > VAR_TAIL_MIN
        a = np.minimum(np.where(thin, a, VAR_TAIL_CAP), VAR_TAIL_CAP)
        # the mean excess of N_hi Pareto(a) squares over R**2, plus the largest one's (1 - alpha / 4)-quantile
        top = np.maximum((N_hi / (alpha / 4.0)) ** (2.0 / a) - 1.0, 0.0)
        allowance = R2 * (N_hi * 2.0 / (a - 2.0) + top)
        hi = (S + w + allowance) / n_lo * (n_lo / (n_lo - 1.0))
    ok = thin & ~huge & (n_lo >= 2.0) & np.isfinite(hi)
    return np.where(ok, hi, np.inf)


def interval_var(batch: Batch, budget: Privacy, params: Params, rng: Rng
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_var_ci: an ASM release with an interval for the population variance f (and for ``var_samp``).

    Cost eps (pure, sequential composition over :data:`SPLIT_VAR_CI`).  The value: a count and the ASM (0.04 and
    0.45 eps), drawn first, so its law and draws are unchanged by the interval code (they are not run_var's,
    which spends 0.95 eps on its ASM: a ``_ci`` call costs what the plain call costs, so the interval's own
    steps share that eps).  Then, for the upper end only: a scale-free floor and median c (0.03 + 0.08), a radius
    scan (0.07), tail-shell counts (0.2) and a clipped sum of squares (0.13).  Each end misses with probability
    at most ``alpha / 2`` (``alpha = 1 - level``):

    * Lower end, post-processing of the release, no assumption.  Above f every query is +1/2, so the scan runs
      past f a number J of grid steps whose law is exact and data-free (:func:`overshoot_steps`; a scan that
      fires below f ends lower still): ``lo = t / beta**k`` with ``P(J >= k) <= alpha / 2`` and beta the grid
      ratio set by the released count (k ~ 8 at level 0.95, so lo is t less ~8 grid steps); 0 when t is within
      k steps of the grid's start (f may be 0).  It replaces a second ASM with a lowered threshold (0.26 eps),
      whose share now pays for the upper end's tail test.
    * Upper end: ``f = min_c mean((x - c)**2) <= mean((x - c)**2)`` for the released c.  R: seed 003's radius scan
      around c (monotone SVT), stopping once about ``VAR_OUTSIDE / eps_radius`` rows lie beyond it.  Disjoint
      shells ``|x - c| > R`` and ``R / r < |x - c| <= R`` (r in :data:`VAR_IN`) are counted with discrete
      Laplace (a row lies in one shell at most: the vector has L1 sensitivity 1, one charge), and ``S = sum
      min(|x - c|, R)**2`` is released at sensitivity R**2.  Tail test: with N the noisy rows beyond R and M the
      noisy rows beyond R / r (each floored at 1), ``a = ln(M / N) / ln r`` estimates the tail's Pareto index (a
      point estimate, as dp_sum_ci's: a lower confidence bound left most light-tailed groups at n eps ~ 1e3 with
      no finite end, the rows beyond R being about as few as the noise).  Unless ``a > VAR_TAIL_MIN`` (and fewer
      than half the rows lie beyond R / r, else the shells measure the bulk, e.g. c off the data), ``hi =
      +inf``: a tail of index ~2 or less keeps most of the squares in its top rows, which no DP count can see
      (Pareto 1.5 at n = 1e4: the top 10 of 10,000 rows hold 73 % of the sum of squares, and the previous upper
      end, dp_mean's interval of the squares, covered 0.17 of runs there).  Else ``hi = (S_hi + R**2 (N_hi 2 /
      (a - 2) + (N_hi / (alpha / 8))**(2 / a) - 1)) / n_lo * n_lo / (n_lo - 1)``, ``a = min(a, VAR_TAIL_CAP)``:
      every row beyond R adds its Pareto(a) excess over R**2, ``2 R**2 / (a - 2)`` on average, plus the largest
      one's quantile (a heavy tail's sum of squares is ruled by its largest rows); N_hi the noisy count's upper
      bound, n_lo from the released count; the last factor bounds ``var_samp`` too.  Why it covers: the count,
      the sum, N_hi and the largest row miss their bounds with probability alpha / 8 each (exact
      discrete-Laplace quantiles; the Pareto tail's), and the allowance holds when the tail beyond R thins at
      least as fast as between R / r and R (the assumption, stated like dp_mean_ci's: no DP interval can bound a
      variance when one row may lie arbitrarily far out; the coverage
      table in benchmarks/results/intervals.md measures it).  +inf also when n_lo < 2 or R > 2**500.

    With public ``lower`` and ``upper``, ``hi <= (upper - lower)**2 / 4`` (the largest variance of any clamped
    dataset: rigorous, so bounded calls always have a finite upper end).
    """
    need_wide("dp_var asymmetric")
    alpha = 1.0 - float(params.level)
    eps = budget.epsilon
    sp = SPLIT_VAR_CI
    s = bounded(batch, params).sorted()
    (t,), n_hat = _var(s, sp["count"] * eps, ((sp["asm"] * eps, 0.0),), params, rng)
    lo = _release_lower(t, sp["asm"] * eps, n_hat, alpha / 2.0)
    hi = _tail_upper(s, n_hat, eps, alpha / 2.0, rng)
    if params.lower is not None and params.upper is not None:
        with np.errstate(over="ignore"):
            hi = np.minimum(hi, np.square(np.float64(params.upper / 2.0 - params.lower / 2.0)))
    return t, np.minimum(lo, t), np.maximum(hi, t)


def _asm_sum(s: Batch, a: np.ndarray, upper: float | None, eps: float, n: np.ndarray, rng: Rng) -> np.ndarray:
    """ASM for ``sum (x - a)`` (x clamped to [a, upper]); monotone queries: ``eps = eps1 + eps2``.

    Monotone under add/remove: adding a row z >= a raises f and every ``Lbar^l`` and ``Ubar^l``, so the
    query sequence of the larger dataset is pointwise <= the smaller one's.  Upper bounds: ``+inf`` for
    l >= 1 without ``upper``; with it, ``Ubar^l = f + l (upper - a)`` (exact: add l rows at the top) for
    l <= C, ``+inf`` past C.  ``n`` is the released noisy count (sets the grid ratio).
    """
    G = s.groups
    eps2 = eps / (RATIO + 1.0)
    eps1 = RATIO * eps2
    lb = np.log(grid_ratio(eps, n))
    C = truncation(eps2)
    log_f, log_L, _ = sum_bounds(s, a, C)
    if upper is None:
        log_U = np.zeros((G, 0))
    else:
        B = np.maximum(upper - a, 0.0)
        with np.errstate(divide="ignore", over="ignore"):
            f = np.exp(log_f)
            log_U = np.log(f[:, None] + np.arange(1, C + 1)[None, :] * B[:, None])
    return asm_scan(log_f, log_L, log_U, np.full(G, np.inf), eps1, eps2, rng, lb, monotone=True)


def _clamped_above(s: Batch, a: np.ndarray) -> Batch:
    """``max(x, a[group])`` of a sorted batch (a monotone map keeps it sorted)."""
    out = Batch(np.maximum(s.values, a[s.group_ids]), s.offsets)
    out._sorted = out
    return out


def _centred_sum(
    batch: Batch, params: Params, eps: float, sp: dict, rng: Rng
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(c, S, n~)`` with S an ASM estimate of ``sum (x - c)`` and n~ a noisy count (post-clamping).

    With ``lower``: c = lower, S = ASM on the terms ``x - c >= 0`` (``sp['asm'] * eps``).  Without it: c is the
    centre of seed 003's private range (``mean_range``, cost ``sp['bound'] + sp['range']``) and
    ``S = S+ - S-``, two ASM sums of the non-negative terms ``(x - c)+`` and ``(c - x)+`` at
    ``sp['asm'] * eps / 2`` each (each monotone: eps1 + eps2).  Both one-sided sums are biased down by
    similar relative amounts on symmetric data, which largely cancels, and the error scales with
    ``mean |x - c|`` rather than with the distance to a lower end.
    """
    need_wide("the asymmetric mean and sum")
    s = bounded(batch, params).sorted()
    G = s.groups
    n = noisy_count(s, sp["count"] * eps, rng)
    eps_asm = sp["asm"] * eps
    if params.lower is not None:
        c = np.full(G, float(params.lower))
        return c, _asm_sum(_clamped_above(s, c), c, params.upper, eps_asm, n, rng), n
    l, r = mean_range(s, sp["bound"] * eps, sp["range"] * eps, rng, params.beta, eps)
    c = l / 2.0 + r / 2.0
    if params.upper is not None:
        c = np.minimum(c, params.upper)
    pos = _asm_sum(_clamped_above(s, c), c, params.upper, eps_asm / 2.0, n, rng)
    neg_batch = Batch(-s.values, s.offsets).sorted()
    neg = _asm_sum(_clamped_above(neg_batch, -c), -c, None, eps_asm / 2.0, n, rng)
    return c, pos - neg, n


def run_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean, asymmetric: ASM on sums of non-negative per-row terms, divided by a noisy count.

    Under add/remove the *mean* is not monotone (x = {0, 10}, x' = x + {4}: L^1 rises, f falls), so we
    release *sums* of non-negative terms (monotone, ``eps1 + eps2``) and a noisy count (see
    :func:`_centred_sum`): ``c + S / n~``.  With ``lower`` (e.g. 0 for losses) the right tail is never
    clipped and no upper bound is needed; ``upper`` clamps and tightens the queries above f.  Cost eps
    (pure): with ``lower`` SPLIT_MEAN_LOWER (count 0.15 + ASM 0.85); without, SPLIT_MEAN (IQR bound 0.1 +
    range 0.2 + count 0.1 + two ASM sums 0.3 each).  NULL when the noisy count < 1.
    """
    eps = budget.epsilon
    sp = SPLIT_MEAN_LOWER if params.lower is not None else SPLIT_MEAN
    c, S, n = _centred_sum(batch, params, eps, sp, rng)
    mean = c + S / np.maximum(n, 1.0)
    if params.lower is not None:
        mean = np.maximum(mean, params.lower)
    if params.upper is not None:
        mean = np.minimum(mean, params.upper)
    return np.where(n >= 1.0, mean, np.nan)


def run_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_sum, asymmetric: ``c * n~ + S`` (see :func:`run_mean`; the count serves the shift ``c n``).

    Cost eps (pure), same splits as the mean.
    """
    eps = budget.epsilon
    sp = SPLIT_MEAN_LOWER if params.lower is not None else SPLIT_MEAN
    c, S, n = _centred_sum(batch, params, eps, sp, rng)
    with np.errstate(over="ignore", invalid="ignore"):  # +-inf past float64: post-processing of releases
        return c * np.maximum(n, 0.0) + S


_SRC = "seed 002 (Durfee), add/remove form"
METHODS = (
    Method("var", "asymmetric", "pure", run_var, "asymmetric sensitivity mechanism, scale-free grid", source=_SRC,
           interval=interval_var),
    Method("mean", "asymmetric", "pure", run_mean, "ASM on the sum of x - lower, / noisy count", source=_SRC),
    Method("sum", "asymmetric", "pure", run_sum, "ASM on the sum of x - lower, + lower * count", source=_SRC),
)
