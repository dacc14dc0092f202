"""Vectorised DP building blocks shared by the estimator families.

Every function works on many groups at once (flat arrays + offsets) and draws its noise from a
:class:`~dpsql.noise.Rng`.  Neighbours differ by adding or removing one row; each docstring states the
sensitivity it assumes and the privacy it gives.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..noise import Rng, discrete_laplace, exponential_mechanism
from .batch import Batch

__all__ = [
    "ceil_log2",
    "seg_count_le",
    "seg_count_lt",
    "svt_scan",
    "noisy_count",
    "release_sum",
    "snap",
    "quantile_em",
    "pow2_floor",
    "em_target",
    "MAX_SPAN",
]

#: codes of the exponential mechanism's integer domain span at most this many grid points
MAX_SPAN = 2**50


def pow2_floor(x: np.ndarray) -> np.ndarray:
    """Largest power of two <= x (x > 0), exactly, elementwise."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    return np.ldexp(np.ones_like(m), e - 1)


def ceil_log2(y: np.ndarray) -> np.ndarray:
    """Smallest integer k with y <= 2**k, for y > 0 (exact, via frexp); y == 0 gives a very small value."""
    y = np.asarray(y, dtype=np.float64)
    m, e = np.frexp(y)
    k = e.astype(np.int64) - (m == 0.5)
    return np.where(y > 0, k, np.int64(-(2**40)))


def _seg_count(batch: Batch, g: np.ndarray, t: np.ndarray, side: str, comp: np.ndarray | None) -> np.ndarray:
    """Position of t[i] inside group g[i] (vectorised segment searchsorted; ``side`` as in numpy)."""
    if batch.groups == 1:
        return np.searchsorted(batch.sorted().values, t, side=side)
    comp = batch.composite() if comp is None else comp
    pos = np.searchsorted(comp, g.astype(np.float64) + 1j * t, side=side)
    return pos - batch.offsets[g]


def seg_count_le(batch: Batch, g: np.ndarray, t: np.ndarray, _comp: np.ndarray | None = None) -> np.ndarray:
    """#{x in group g[i] : x <= t[i]} for every query i."""
    return _seg_count(batch, g, t, "right", _comp)


def seg_count_lt(batch: Batch, g: np.ndarray, t: np.ndarray, _comp: np.ndarray | None = None) -> np.ndarray:
    """#{x in group g[i] : x < t[i]}."""
    return _seg_count(batch, g, t, "left", _comp)


def svt_scan(
    queries: Callable[[np.ndarray, np.ndarray], np.ndarray],
    groups: int,
    threshold: np.ndarray | float,
    sensitivity: int,
    epsilon: float,
    rng: Rng,
    max_queries: int,
    block: int = 32,
) -> np.ndarray:
    """AboveThreshold (SVT, seed 003 Alg. 1) for every group at once, with discrete Laplace noise.

    ``queries(active, ks)`` returns an int64 matrix ``[len(active), len(ks)]`` of query values
    ``Q_k`` (1-based k) for the active groups.  Each query has integer sensitivity ``sensitivity``
    under add/remove of one row, and ``threshold`` is an integer (per group or scalar).  Returns, per
    group, the 1-based index of the first query whose noisy value exceeds the noisy threshold, or
    ``max_queries`` if none of the first ``max_queries - 1`` does (post-processing of the infinite SVT).

    Privacy: threshold noise DLap(2 s / eps), query noise DLap(4 s / eps): eps-DP for any number of
    queries (the standard AboveThreshold proof holds verbatim for integer queries with integer
    sensitivity s and discrete Laplace noise).
    """
    thr = np.broadcast_to(np.asarray(threshold, dtype=np.int64), (groups,))
    t_noisy = thr + discrete_laplace(2.0 * sensitivity / epsilon, rng, groups)
    result = np.full(groups, max_queries, dtype=np.int64)
    active = np.arange(groups)
    k0 = 1
    while active.size and k0 < max_queries:
        k1 = min(k0 + block, max_queries)
        ks = np.arange(k0, k1, dtype=np.int64)
        q = queries(active, ks)
        nu = discrete_laplace(4.0 * sensitivity / epsilon, rng, q.size).reshape(q.shape)
        above = (q + nu) > t_noisy[active][:, None]
        hit = above.any(axis=1)
        first = np.argmax(above, axis=1)
        result[active[hit]] = ks[first[hit]]
        active = active[~hit]
        k0 = k1
        block = min(block * 2, 1024)
    return result


def noisy_count(batch: Batch, epsilon: float, rng: Rng) -> np.ndarray:
    """n + DLap(1/eps) per group (float64).  Count has sensitivity 1 under add/remove: eps-DP."""
    return (batch.sizes + discrete_laplace(1.0 / epsilon, rng, batch.groups)).astype(np.float64)


def release_sum(
    values: np.ndarray,
    offsets: np.ndarray,
    sensitivity: np.ndarray,
    epsilon: float,
    rng: Rng,
) -> np.ndarray:
    """Noisy per-group sum of ``values`` on a fixed-point grid (floating-point safe).

    Each group's values must satisfy ``|v| <= sensitivity[g]`` (clip before calling), so adding or
    removing one row moves the exact sum by at most ``sensitivity[g]``.  The grid is
    ``gamma = 2**(floor(log2 sensitivity) - 20)``; each value is rounded to an integer number of grid
    steps (``|k| <= sensitivity / gamma + 1/2``), the integer sum is exact (int64, order-independent),
    and discrete Laplace noise of scale ``(sensitivity/gamma + 1/2) / eps`` is added.  eps-DP, and the
    output set is the grid whatever the data.
    """
    G = offsets.size - 1
    sens = np.maximum(np.asarray(sensitivity, dtype=np.float64), 2.0**-1000)
    sens = np.broadcast_to(sens, (G,))
    gamma = pow2_floor(sens) * 2.0**-20
    gid = np.repeat(np.arange(G), np.diff(offsets))
    v = np.clip(values, -sens[gid], sens[gid])
    k = np.rint(v / gamma[gid]).astype(np.int64)
    sums = _segment_sum_int(k, offsets)
    steps = np.ceil(sens / gamma + 0.5)
    noise = discrete_laplace(steps / epsilon, rng)
    return (sums + noise).astype(np.float64) * gamma


def _segment_sum_int(k: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Exact int64 segment sums (empty segments give 0)."""
    csum = np.zeros(k.size + 1, dtype=np.int64)
    np.cumsum(k, out=csum[1:])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def snap(value: np.ndarray, noise: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``grid * (rint(value/grid) + rint(noise/grid))`` for continuous noise distributions.

    Use with a power-of-two ``grid`` and a sensitivity inflated by ``grid`` (the rounded value moves by
    at most sensitivity + grid).  The release is then post-processing of the ideal continuous
    mechanism on the rounded value, and its support is the grid whatever the data.
    """
    return grid * (np.rint(value / grid) + np.rint(noise / grid))


def quantile_em(
    codes: np.ndarray,
    offsets: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    target: np.ndarray,
    epsilon: float,
    rng: Rng,
) -> np.ndarray:
    """Exponential mechanism for a rank target over each group's integer domain ``[lo, hi]``.

    ``codes`` are each group's data as int64 grid codes, sorted within groups and clamped to
    ``[lo[g], hi[g]]`` (span <= MAX_SPAN).  ``target[g]`` is a real rank.  Every integer ``y`` of the
    domain gets the score ``len(y) = max(target - c_le(y), c_lt(y) - target, 0)`` (distance in ranks,
    the digest's inverse-sensitivity length with a real target), and is drawn with probability
    proportional to ``exp(-eps * len(y) / 2)``.

    Privacy: adding one row raises c_le and c_lt by 0 or 1; the caller's target must move by a value in
    [0, 1] in the same direction (e.g. ``p * n``, or a clamp of it with slope <= 1), so each term of the
    max moves by at most 1 and len has sensitivity 1: eps-DP.  The domain is data-independent given
    ``lo``/``hi`` (themselves DP releases).  Sampling: equal-score runs (points and gaps between
    distinct values) are candidates with log-weight ``log(size) - eps*len/2``, picked by Gumbel-max,
    then a uniform integer inside (exact).  Returns int64 codes.
    """
    G = offsets.size - 1
    sizes = np.diff(offsets)
    n = codes.size
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    t_g = np.asarray(target, dtype=np.float64)
    # runs of equal codes: a new run starts where the code or the group changes
    new_run = np.ones(n, dtype=bool)
    if n > 1:
        np.not_equal(codes[1:], codes[:-1], out=new_run[1:])
        if G > 1:
            new_run[offsets[1:-1][offsets[1:-1] < n]] = True
    run_start = np.flatnonzero(new_run)
    R = run_start.size
    run_gid = np.searchsorted(offsets, run_start, side="right") - 1 if G > 1 else np.zeros(R, dtype=np.int64)
    runs_per_group = np.bincount(run_gid, minlength=G)
    run_first = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(runs_per_group, out=run_first[1:])
    run_val = codes[run_start]
    base = offsets[run_gid]
    run_clt = run_start - base
    run_cle = np.append(run_start[1:], n) - base
    run_cle = np.minimum(run_cle, sizes[run_gid])  # a group's last run ends at the group's end
    first_of_group = np.zeros(R, dtype=bool)
    first_of_group[run_first[:-1][runs_per_group > 0]] = True
    prev_val = np.empty(R, dtype=np.int64)
    prev_cle = np.empty(R, dtype=np.int64)
    if R:
        prev_val[1:] = run_val[:-1]
        prev_cle[1:] = run_cle[:-1]
        prev_val[first_of_group] = lo[run_gid[first_of_group]] - 1
        prev_cle[first_of_group] = 0
    has_runs = runs_per_group > 0
    last_val = np.where(has_runs, run_val[np.maximum(run_first[1:] - 1, 0)] if R else 0, lo - 1)
    half_eps = epsilon / 2.0

    def neg_score(c_lt: np.ndarray, c_le: np.ndarray, t: np.ndarray) -> np.ndarray:
        return -half_eps * np.maximum(np.maximum(t - c_le, c_lt - t), 0.0)

    def log_size(size: np.ndarray) -> np.ndarray:
        out = np.full(size.shape, -np.inf)
        pos = size > 0
        out[pos] = np.log(size[pos].astype(np.float64))
        return out

    t_run = t_g[run_gid]
    lw_gap = log_size(run_val - prev_val - 1) + neg_score(prev_cle, prev_cle, t_run)
    lw_pt = neg_score(run_clt, run_cle, t_run)  # a point has size 1: log 1 = 0
    lw_tail = log_size(hi - last_val) + neg_score(sizes, sizes, t_g)
    # candidate order per group: gap_0, point_0, gap_1, point_1, ..., tail
    cand_off = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(2 * runs_per_group + 1, out=cand_off[1:])
    lw = np.empty(int(cand_off[-1]))
    gap_pos = 2 * np.arange(R) + run_gid
    lw[gap_pos] = lw_gap
    lw[gap_pos + 1] = lw_pt
    lw[cand_off[1:] - 1] = lw_tail
    pick = exponential_mechanism(lw, cand_off, rng)
    local = pick - cand_off[:-1]
    j = run_first[:-1] + local // 2
    is_tail = local == 2 * runs_per_group
    is_pt = ~is_tail & (local % 2 == 1)
    jj = np.minimum(j, max(R - 1, 0))
    c_lo = np.where(is_tail, last_val + 1, np.where(is_pt, run_val[jj] if R else 0, (prev_val[jj] if R else 0) + 1))
    c_hi = np.where(is_tail, hi, np.where(is_pt, run_val[jj] if R else 0, (run_val[jj] if R else 0) - 1))
    return rng.integers(c_lo, c_hi)


def em_target(p: float, n: np.ndarray, margin: float) -> np.ndarray:
    """Rank target ``p*n`` clamped into ``[margin, n - margin]`` (or n/2 when that is empty).

    As n grows by one, every piece moves by a value in [0, 1], so the target does too (the condition
    :func:`quantile_em` needs).  The clamp is seed 003's FiniteDomainQuantile clamp with the real n;
    it pulls extreme quantiles inward by at most ``margin`` ranks.
    """
    n = np.asarray(n, dtype=np.float64)
    lo = np.minimum(margin, n / 2.0)
    hi = np.maximum(n - margin, n / 2.0)
    return np.clip(p * n, lo, hi)

