"""Vectorised DP building blocks shared by the estimator families.

Every function works on many groups at once (flat arrays + offsets) and draws its noise from a
:class:`~dpsql.noise.Rng`.  Neighbours differ by adding or removing one row; each docstring states the
sensitivity it assumes and the privacy it gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..noise import Rng, discrete_laplace, exponential_mechanism
from .batch import Batch
from .spending import charge_pure

__all__ = [
    "ceil_log2",
    "seg_count_le",
    "seg_count_lt",
    "svt_scan",
    "noisy_count",
    "release_sum",
    "fixed_point_sum",
    "per_row",
    "release_fixed_sum",
    "noisy_count_of",
    "snap",
    "quantile_em",
    "rank_em",
    "rank_window",
    "propose",
    "RankWindow",
    "window_reach",
    "GridCodes",
    "seg_search",
    "pow2_floor",
    "em_target",
    "MAX_SPAN",
]

#: codes of the exponential mechanism's integer domain span at most this many grid points
MAX_SPAN = 2**50


#: Extended precision for sums of squares over the whole data domain: with values in [-2**1000, 2**1000],
#: a squared deviation spans 2**-2148 .. 2**2002 in the units of one group, beyond float64's exponent
#: range (a huge row used to make the rest of the group underflow to 0).  x86-64's 80-bit long double has
#: a 15-bit exponent (up to 2**16383) and 64 significant bits.
WIDE = np.longdouble
WIDE_OK = bool(np.finfo(np.longdouble).maxexp >= 8192)


def need_wide(what: str) -> None:
    """Refuse (data-independently) a method whose exact bounds need :data:`WIDE` on a platform without it."""
    if not WIDE_OK:
        raise RuntimeError(f"{what} needs 80-bit extended floats (x86-64); this platform's long double is too narrow")


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
    t = np.clip(t, -np.finfo(np.float64).max, np.finfo(np.float64).max)  # g + 1j * inf has a NaN real part
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
    monotone: bool = False,
) -> np.ndarray:
    """AboveThreshold (SVT, seed 003 Alg. 1) for every group at once, with discrete Laplace noise.

    ``queries(active, ks)`` returns an int64 matrix ``[len(active), len(ks)]`` of query values
    ``Q_k`` (1-based k) for the active groups.  Each query has integer sensitivity ``sensitivity``
    under add/remove of one row, and ``threshold`` is an integer (per group or scalar).  Returns, per
    group, the 1-based index of the first query whose noisy value exceeds the noisy threshold, or
    ``max_queries`` if none of the first ``max_queries - 1`` does (post-processing of the infinite SVT).

    Privacy: threshold noise DLap(2 s / eps), query noise DLap(4 s / eps): eps-DP for any number of
    queries (the standard AboveThreshold proof holds verbatim for integer queries with integer
    sensitivity s and discrete Laplace noise).  ``monotone=True`` (the caller's promise that adding a
    row moves every query in the same direction, and removing one in the other): query noise
    DLap(2 s / eps), still eps-DP (Lyu, Su & Li 2017, Thm 4 / Alg. 7: with monotone queries the
    threshold's shift covers the queries' shift in one direction only, so the query noise needs half
    the scale).
    """
    charge_pure(epsilon, "svt" + (" (monotone)" if monotone else ""))
    thr = np.broadcast_to(np.asarray(threshold, dtype=np.int64), (groups,))
    t_noisy = thr + discrete_laplace(2.0 * sensitivity / epsilon, rng, groups)
    result = np.full(groups, max_queries, dtype=np.int64)
    active = np.arange(groups)
    k0 = 1
    while active.size and k0 < max_queries:
        k1 = min(k0 + block, max_queries)
        ks = np.arange(k0, k1, dtype=np.int64)
        q = queries(active, ks)
        nu = discrete_laplace((2.0 if monotone else 4.0) * sensitivity / epsilon, rng, q.size).reshape(q.shape)
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
    return noisy_count_of(batch.sizes, epsilon, rng)


def noisy_count_of(n: np.ndarray, epsilon: float, rng: Rng) -> np.ndarray:
    """:func:`noisy_count` from the group sizes ``n`` (int64)."""
    n = np.asarray(n, dtype=np.int64)
    charge_pure(epsilon, "count")
    return (n + discrete_laplace(1.0 / epsilon, rng, n.size)).astype(np.float64)


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
    output set is the grid whatever the data.  = :func:`fixed_point_sum` then :func:`release_fixed_sum`
    (the native SQL path computes the first step in DuckDB, see ``sql/macros.sql``).
    """
    G = offsets.size - 1
    sums = fixed_point_sum(values, offsets, sensitivity)
    return release_fixed_sum(sums, np.broadcast_to(np.asarray(sensitivity, dtype=np.float64), (G,)), epsilon, rng)


def fixed_point_grid(sensitivity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sensitivity floored at 2**-1000, its grid ``pow2_floor(sensitivity) * 2**-20``)."""
    sens = np.maximum(np.asarray(sensitivity, dtype=np.float64), 2.0**-1000)
    return sens, pow2_floor(sens) * 2.0**-20


def per_row(per_group: np.ndarray, offsets: np.ndarray) -> np.ndarray | np.float64:
    """A per-group array spread over the rows of ``offsets``; a scalar when there is one group (no gather,
    same arithmetic when broadcast)."""
    G = offsets.size - 1
    return per_group[0] if G == 1 else per_group[np.repeat(np.arange(G), np.diff(offsets))]


def fixed_point_sum(values: np.ndarray, offsets: np.ndarray, sensitivity: np.ndarray) -> np.ndarray:
    """Per-group exact int64 sums of ``rint(clip(v, -sens, sens) / gamma)`` (the data part of release_sum)."""
    G = offsets.size - 1
    sens, gamma = fixed_point_grid(np.broadcast_to(np.asarray(sensitivity, dtype=np.float64), (G,)))
    s_row, g_row = per_row(sens, offsets), per_row(gamma, offsets)
    v = np.clip(values, -s_row, s_row)
    k = np.rint(v / g_row).astype(np.int64)
    return _segment_sum_int(k, offsets)


def release_fixed_sum(sums: np.ndarray, sensitivity: np.ndarray, epsilon: float, rng: Rng) -> np.ndarray:
    """``(sums + DLap((sens/gamma + 1/2) / eps)) * gamma``: the noise step of :func:`release_sum` given the
    exact integer sums (eps-DP when each row moves its group's sum by at most ``sens / gamma + 1/2``)."""
    sens, gamma = fixed_point_grid(sensitivity)
    steps = np.ceil(sens / gamma + 0.5)
    charge_pure(epsilon, "sum")
    noise = discrete_laplace(steps / epsilon, rng)
    with np.errstate(over="ignore"):  # +-inf past float64: post-processing of the released integer
        return (np.asarray(sums, dtype=np.int64) + noise).astype(np.float64) * gamma


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
    charge_pure(epsilon, "exponential mechanism")
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



# --------------------------------------------------------------------------- windowed rank EM

#: the rank window keeps the tails' envelope mass below 2**-TAIL_BITS of the window's (see rank_em)
TAIL_BITS = 12


def seg_search(a: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray, side: str = "left",
               g: np.ndarray | None = None) -> np.ndarray:
    """Vectorised ``searchsorted`` of ``x[i]`` inside the sorted slice ``a[lo[i]:hi[i]]``; returns absolute
    indices in ``[lo[i], hi[i]]``.  One binary search per query, all queries advanced together (about
    log2 of the longest slice numpy passes over the queries; no per-query Python work).  ``g``: the group of
    each query's slice, when ``a`` is a :class:`GridCodes` (its reads then skip finding the rows' groups)."""
    lo = np.array(lo, dtype=np.int64, copy=True)
    hi = np.array(hi, dtype=np.int64, copy=True)
    x = np.asarray(x)
    act = np.flatnonzero(lo < hi)
    grid = g is not None and isinstance(a, GridCodes)
    while act.size:
        mid = (lo[act] + hi[act]) // 2
        v = a.take(mid, g[act]) if grid else a[mid]
        right = (v <= x[act]) if side == "right" else (v < x[act])
        lo[act[right]] = mid[right] + 1
        hi[act[~right]] = mid[~right]
        act = act[lo[act] < hi[act]]
    return lo


class GridCodes:
    """Integer grid codes of sorted per-group values, computed only at the positions that are read.

    ``codes[i] = clip(floor((x[i] - a[g]) / step[g]), 0, K[g])`` (or ``rint`` with ``nearest``) for the
    row i of group g; with ``reflect`` the group's codes are ``K - code`` in reverse order (the data of
    -D on the reflected grid, still ascending).  Indexing with an int array gives exactly what the same
    formula over the whole array would give at those positions: :func:`rank_em` reads O(W log n) codes
    per group, so the O(n) code array is never built.  The map is monotone, so codes stay sorted.
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray, a: np.ndarray, step: np.ndarray, K: np.ndarray,
                 nearest: bool = False, reflect: bool = False) -> None:
        self.values, self.offsets = values, np.asarray(offsets, dtype=np.int64)
        self.a, self.step, self.K = a, step, np.asarray(K, dtype=np.int64)
        self.nearest, self.reflect = nearest, reflect
        self.size = values.size

    def reflected(self) -> GridCodes:
        return GridCodes(self.values, self.offsets, self.a, self.step, self.K, self.nearest, not self.reflect)

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        return self.take(idx)

    def group_of(self, idx: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
        """The groups of rows ``idx`` (``g`` when the caller already knows them)."""
        if self.offsets.size == 2:
            return np.zeros(np.shape(idx), dtype=np.int64)
        return np.searchsorted(self.offsets, idx, side="right") - 1 if g is None else g

    def take(self, idx: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
        """Codes at rows ``idx`` (``g``: their groups, when the caller knows them)."""
        idx = np.asarray(idx, dtype=np.int64)
        g = self.group_of(idx, g)
        src = self.offsets[g + 1] - 1 - (idx - self.offsets[g]) if self.reflect else idx
        with np.errstate(over="ignore", invalid="ignore"):  # far outside [a, b]: +-inf, clipped below
            q = (self.values[src] - self.a[g]) / self.step[g]
        q = np.rint(q) if self.nearest else np.floor(q)
        c = np.clip(q, 0, self.K[g]).astype(np.int64)
        return self.K[g] - c if self.reflect else c


def _ranges(start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``arange(start[i], stop[i])`` and the offsets of each range in the result."""
    lens = np.maximum(stop - start, 0)
    off = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    idx = np.arange(int(off[-1]), dtype=np.int64) - np.repeat(off[:-1] - start, lens)
    return idx, off


def _pieces(
    c: np.ndarray, cg: np.ndarray, G: int, A: np.ndarray, B: np.ndarray, base: np.ndarray, w: int,
    sub_off: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of ``[A[g], B[g]]`` on which ``#{c <= y + w}`` and ``#{c < y - w}`` are constant.

    ``c``: codes sorted within groups (group ids ``cg`` ascending), every code of the group at least
    ``A - w - 1`` and at most ``B + w``; ``base[g]`` codes lie below them.  Events: a distinct code u
    (multiplicity m) enters the first count at ``y = u - w`` and the second at ``y = u + w + 1``.  Both
    event lists are sorted; they are merged without sorting: an exit event ``u_j + w + 1`` comes after
    the entries of the codes ``<= u_j + 2w + 1`` (all earlier codes and at most 2w + 1 later ones,
    found by shifted comparisons), an entry after the exits of the codes ``< u_i - 2w - 1``.  Returns
    (group, left end, first count, second count) of each piece, ordered by group and position.  ``w = 0``
    builds the pieces directly (:func:`_pieces0`; ``sub_off``: the offsets of ``c``'s groups, if known).
    """
    if w == 0:
        if sub_off is None:
            sub_off = np.searchsorted(cg, np.arange(G + 1))
        left, F, Gc, npieces = _pieces0(c, G, A, B, base, np.asarray(sub_off, dtype=np.int64))
        return np.repeat(np.arange(G), npieces), left, F, Gc
    new = np.ones(c.size, dtype=bool)
    if c.size > 1:
        new[1:] = (c[1:] != c[:-1]) | (cg[1:] != cg[:-1])
    rs = np.flatnonzero(new)
    u, ug = c[rs], cg[rs]
    mult = np.diff(np.append(rs, c.size))
    U = u.size
    nu = np.bincount(ug, minlength=G)
    u_off = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(nu, out=u_off[1:])
    loc = np.arange(U) - u_off[ug]
    after = np.zeros(U, dtype=np.int64)  # codes after j with u <= u_j + 2w + 1
    before = np.zeros(U, dtype=np.int64)  # codes before i with u >= u_i - 2w - 1
    for k in range(1, 2 * w + 2):
        if k >= U:
            break
        same = ug[k:] == ug[:-k]
        after[:-k] += same & (u[k:] <= u[:-k] + 2 * w + 1)
        before[k:] += same & (u[:-k] >= u[k:] - 2 * w - 1)
    ev_off = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(2 * nu + 1, out=ev_off[1:])
    n_ev = int(ev_off[-1])
    ev_g = np.repeat(np.arange(G), 2 * nu + 1)
    ev_p = np.empty(n_ev, dtype=np.int64)
    ev_in = np.zeros(n_ev, dtype=np.int64)
    ev_out = np.zeros(n_ev, dtype=np.int64)
    ev_p[ev_off[:-1]] = A
    x_at = ev_off[ug] + 1 + loc + (loc - before)  # entries: own index + exits strictly before
    y_at = ev_off[ug] + 1 + loc + (loc + 1 + after)  # exits: own index + entries at or before
    ev_p[x_at] = np.maximum(u - w, A[ug])
    ev_in[x_at] = mult
    ev_p[y_at] = np.maximum(u + w + 1, A[ug])
    ev_out[y_at] = mult
    # events past B come last in their group (positions ascend), so they are dropped only at the end: they
    # shift no count of the kept events of their group, and later groups subtract their own start
    n_in = np.cumsum(ev_in)
    n_out = np.cumsum(ev_out)
    last = ev_p <= B[ev_g]
    last[:-1] &= (ev_p[1:] != ev_p[:-1]) | (ev_g[1:] != ev_g[:-1])
    first_of_g = ev_off[:-1]  # every group's window-start event
    prev_in = np.where(first_of_g > 0, n_in[np.maximum(first_of_g - 1, 0)], 0)
    prev_out = np.where(first_of_g > 0, n_out[np.maximum(first_of_g - 1, 0)], 0)
    pg = ev_g[last]
    F = base[pg] + n_in[last] - prev_in[pg]
    Gc = base[pg] + n_out[last] - prev_out[pg]
    return pg, ev_p[last], F, Gc


def _pieces0(
    c: np.ndarray, G: int, A: np.ndarray, B: np.ndarray, base: np.ndarray, sub_off: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_pieces` for ``w = 0`` without the groups of the pieces: (left end, counts, counts, pieces per group).

    A distinct code u (rows ``rs .. end - 1`` of ``c``) enters the first count at ``y = u`` and the second at
    ``u + 1``, so entries and exits alternate and each piece is known from u alone: the entry's piece
    ``[u, ..]`` (counts ``end``, ``rs``, as ranks in the group) exists when ``A <= u <= B`` (u = A - 1 enters
    and leaves at A), the exit's ``[u + 1, ..]`` (counts ``end``, ``end``) when ``u + 1 <= B`` and the next
    code of the group is not ``u + 1`` (then that code's entry starts the piece).  Each group's codes get a
    virtual code ``A - 1`` of multiplicity 0 in front: its exit's piece is the group's first piece ``[A, ..]``
    (counts 0, 0; none when a code A starts there), and it joins a real code A - 1's run.  The same pieces as
    the event merge, with no sort and no event arrays.  Counts are int32 when they fit."""
    heads = sub_off[:-1]
    c = np.insert(c, heads, A - 1)
    heads = heads + np.arange(G)  # the virtual codes' rows
    N = c.size
    new = np.empty(N, dtype=bool)
    new[:1] = True
    np.not_equal(c[1:], c[:-1], out=new[1:])
    new[heads] = True
    rs = np.flatnonzero(new)
    U = rs.size
    u = c[new]
    u_off = np.searchsorted(rs, heads)  # every group has a run (its virtual code)
    nu = np.diff(np.append(u_off, U))
    it = np.int32 if N + int(np.max(base, initial=0)) < 2**31 else np.int64
    d = np.repeat((heads + 1 - base).astype(it), nu)  # a row's position in c minus d: its rank in the group
    end = np.empty(U, dtype=it)
    end[:-1] = rs[1:]
    end[U - 1:] = N
    Bu = np.repeat(B, nu)
    keep = np.empty((U, 2), dtype=bool)  # per code: its entry's piece, its exit's piece
    kx, ky = keep[:, 0], keep[:, 1]
    np.greater_equal(u, np.repeat(A, nu), out=kx)
    kx &= u <= Bu
    up = u + 1
    np.less_equal(up, Bu, out=ky)
    adj = u[1:] == up[:-1]  # the exit at u + 1 is the next code's entry (same group): that entry's piece
    adj[u_off[1:] - 1] = False
    ky[:-1] &= ~adj
    kr = keep.ravel()
    npieces = np.add.reduceat(kx.view(np.uint8) + ky.view(np.uint8), u_off, dtype=np.int64) if G else u_off
    left2 = np.empty((U, 2), dtype=np.int64)
    left2[:, 0] = u
    left2[:, 1] = up
    F2 = np.empty((U, 2), dtype=it)
    np.subtract(end, d, out=F2[:, 0])
    F2[:, 1] = F2[:, 0]
    G2 = np.empty((U, 2), dtype=it)
    np.subtract(rs, d, out=G2[:, 0], casting="unsafe")
    G2[:, 1] = F2[:, 0]
    return left2.ravel()[kr], F2.ravel()[kr], G2.ravel()[kr], npieces


def rank_em(
    codes: np.ndarray,
    offsets: np.ndarray,
    K: np.ndarray,
    target: np.ndarray,
    window: int,
    epsilon: float,
    rng: Rng,
    reach: int | None = None,
    sensitivity: float = 1.0,
    levels: int = 0,
    origin: np.ndarray | None = None,
) -> np.ndarray:
    """Exponential mechanism over each group's integers ``0..K[g]`` for a rank target, sampled exactly
    while looking only at the data near the target.

    ``codes``: each group's data as int64 codes, sorted within groups and inside ``[0, K[g]]``.  Loss
    (seed 000's PrvThreshold with window ``w``; ``w = 0`` is seed 003's quantile score, the loss of
    :func:`quantile_em`)::

        l(y) = max(0, t - #{c <= y + w}, #{c < y - w} - t)

    and ``P(y) ~ exp(-eps l(y) / 2)``.  Privacy is that of the mechanism, not of this sampler: each count
    moves by 0 or 1 when a row is added or removed, ``t`` must move by a value in [0, 1] in the same
    direction, so l has sensitivity 1 and the release is eps-DP.  A caller whose target moves by up to
    ``sensitivity`` (e.g. ``p n`` unclamped: max(p, 1 - p)) passes ``eps / sensitivity`` and says so: the
    release is then eps-DP, and that is what it is charged (:mod:`~dpsql.core.spending`).

    Sampling (exact, not an approximation).  Let ``W`` be the reach (default
    ``ceil(2 (ln(K + 2) + TAIL_BITS ln 2) / eps) + 2`` ranks), ``a`` the code of rank ``floor(t) - W`` and
    ``b`` that of rank ``ceil(t) + W`` (1-based, when they exist).  Every ``y < a - w`` has
    ``#{c <= y + w} < floor(t) - W`` so ``l(y) >= L_lo = t - floor(t) + W + 1``; every ``y > b + w`` has
    ``l(y) >= L_hi = ceil(t) + W - t``.  Inside the window ``[a - w, b + w]`` the loss is piecewise
    constant between the events ``c - w`` and ``c + w + 1`` of the codes near the window; each piece is
    a candidate with log-weight ``log(length) - eps l / 2``.  Each tail is one candidate whose weight is
    its envelope ``|tail| exp(-eps L / 2)``.  Gumbel-max picks a candidate; a piece is final (uniform
    integer inside it); a tail proposes a uniform y in it, accepted with probability
    ``exp(-eps (l(y) - L) / 2) <= 1`` (l(y) from the full data; tested as ``E >= eps (l - L) / 2`` with a
    tail-exact ``E ~ Exp(1)``, so no probability is rounded to 0); on rejection the group draws again.
    Rejection sampling with these envelopes returns exactly ``P(y) ~ exp(-eps l(y) / 2)``.  The window
    holds a y with l = 0 when 1 <= t <= n, and the envelopes weigh at most ``(K + 1) exp(-eps W / 2)
    <= 2**-TAIL_BITS``, so a retry happens with probability below 2**-12.  Work: O(W + ties near the
    target) per group after the sort, instead of O(n); small groups fall back to the whole domain.

    ``levels`` Z > 0 (default 0: uniform over the codes) gives the EM the roundness base measure of
    :func:`levelled_mass` around ``origin`` (per group; ignored at Z = 0): ``P(y) ~ m(y) exp(-eps l(y) / 2)`` with
    ``m(y) = sum_{z <= min(tz(y - origin), Z)} 2**z``, so codes with many trailing zero bits (round values, e.g. the
    tied integers of SQL data) weigh more.  A base measure fixed by public values changes no privacy argument (the
    ratio of densities on neighbours is the loss's, the normaliser's ratio bounded the same way).  Sampling as
    above with every ``length`` / ``|tail|`` replaced by its mass and every uniform integer by
    :func:`levelled_integers`; the reach uses the domain's mass (at most ``(Z + 1)(K + 1) + 2**(Z + 1)``), so the
    envelopes' bound holds.  The scale-free quantiles use Z = :data:`dpsql.core.scalefree.LEVELS`.
    """
    charge_pure(epsilon * sensitivity, "exponential mechanism (rank window)")
    win = rank_window(codes, offsets, K, target, window, epsilon, reach, levels, origin)
    t, start, stop, w, half = win.t, win.start, win.stop, win.w, win.half
    out = np.empty(K.size, dtype=np.int64)
    todo = np.arange(K.size)
    while todo.size:
        y, is_lo, is_piece = propose(win, todo, rng)
        ok = is_piece.copy()
        tail = np.flatnonzero(~is_piece)
        if tail.size:
            tg = todo[tail]
            yt = y[tail]
            f_le = seg_search(codes, start[tg], stop[tg], yt + w, "right", tg) - start[tg]
            g_lt = seg_search(codes, start[tg], stop[tg], yt - w, "left", tg) - start[tg]
            lt = np.maximum(0.0, np.maximum(t[tg] - f_le, g_lt - t[tg]))
            env = np.where(is_lo[tail], win.L_lo[tg], win.L_hi[tg])
            # accept with probability exp(-eps (l - L) / 2): E ~ Exp(1) (tail-exact) exceeds eps (l - L) / 2;
            # a log-space test keeps tiny acceptance probabilities exact instead of rounding them to 0
            ok[tail] = rng.exponential(tail.size) >= half * (lt - env)
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out


def window_reach(K: np.ndarray, epsilon: float, levels: int = 0) -> np.ndarray:
    """:func:`rank_em`'s default reach W (ranks each side of the target) over the codes ``0..K``: the log of the
    domain's mass plus one (``K + 2`` codes' worth; with ``levels`` Z, a bound on :func:`levelled_mass` of ``0..K``
    whatever the origin, ``(Z + 1)(K + 1) + 2**(Z + 1)``: each level counts at most ``(K + 1) / 2**z + 1``
    multiples)."""
    if levels:
        total = np.log((levels + 1.0) * (np.asarray(K, dtype=np.float64) + 1.0) + 2.0 ** (levels + 1))
    else:
        total = np.log(K + 2.0)
    return np.ceil(2.0 * (total + TAIL_BITS * np.log(2.0)) / epsilon).astype(np.int64) + 2


#: the largest ``levels`` :func:`levelled_mass` accepts (its masses stay below 2**63 for codes below 2**50)
LEVELS_MAX = 24


def levelled_mass(lo: np.ndarray, hi: np.ndarray, levels: int, origin: np.ndarray | int = 0) -> np.ndarray:
    """The mass of the integers ``lo..hi`` (inclusive; ``lo <= hi + 1``, an empty range weighs 0) under the
    roundness measure with ``levels`` Z around ``origin``: ``m(c) = sum_{z <= min(tz(c - origin), Z)} 2**z`` (tz:
    trailing zero bits; 0 has all), i.e. ``sum_{z=0}^{Z} 2**z #{c in [lo, hi] : 2**z divides c - origin}``: every
    level z weighs about the same per unit length, and a code with many trailing zeros (a round value: few
    significant bits, when the codes are signed magnitudes around ``origin``) weighs up to ``2**(Z + 1) - 1``
    codes.  Z = 0 is the uniform measure (``hi - lo + 1``).  Exact int64 (codes below 2**50)."""
    origin = np.asarray(origin, dtype=np.int64)
    lo = np.asarray(lo, dtype=np.int64) - origin
    hi = np.asarray(hi, dtype=np.int64) - origin
    if not 0 <= levels <= LEVELS_MAX:
        raise ValueError(f"levels must be in [0, {LEVELS_MAX}]")
    m = hi - lo + 1
    below = lo - 1
    for z in range(1, levels + 1):
        m = m + ((hi >> z) - (below >> z)) * (1 << z)  # >> floors: (-1) >> z = -1 counts 0 as a multiple
    return m


def levelled_integers(rng: Rng, lo: np.ndarray, hi: np.ndarray, levels: int, origin: np.ndarray | int = 0
                      ) -> np.ndarray:
    """Integers in ``[lo, hi]`` (inclusive, ``lo <= hi``) drawn with probability proportional to their
    :func:`levelled_mass` around ``origin``, exactly: a level z with probability ``2**z #{multiples of 2**z} /
    mass`` (one uniform integer below the mass), then a uniform multiple of ``2**z`` (from ``origin``) in the range;
    a code c is reached from every level z <= min(tz(c - origin), Z), so its probability is ``sum_z 2**z / mass =
    m(c) / mass``.  Z = 0: ``rng.integers(lo, hi)`` itself (the same draws)."""
    if not levels:
        return rng.integers(lo, hi)
    origin = np.broadcast_to(np.asarray(origin, dtype=np.int64), np.shape(lo))
    lo = np.asarray(lo, dtype=np.int64) - origin
    hi = np.asarray(hi, dtype=np.int64) - origin
    below = lo - 1
    z = np.arange(levels + 1, dtype=np.int64)
    cnt = (hi[:, None] >> z[None, :]) - (below[:, None] >> z[None, :])
    cum = np.cumsum(cnt << z[None, :], axis=1)
    u = rng.integers(np.zeros(lo.size, dtype=np.int64), cum[:, -1] - 1)
    level = (cum <= u[:, None]).sum(axis=1)  # the first level whose cumulative mass exceeds u
    j = rng.integers((below >> level) + 1, hi >> level)
    return (j << level) + origin


class RankWindow(NamedTuple):
    """The candidates of :func:`rank_em` (lower tail, the pieces of the window, upper tail per group) and what
    its rejection step needs: built by :func:`rank_window`, sampled by :func:`propose`."""

    t: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    w: int
    half: float
    K: np.ndarray
    A: np.ndarray
    B: np.ndarray
    L_lo: np.ndarray
    L_hi: np.ndarray
    lw: np.ndarray
    cand_off: np.ndarray
    npieces: np.ndarray
    pg: np.ndarray
    left: np.ndarray
    right: np.ndarray
    #: the base measure's roundness levels (:func:`levelled_mass`; 0: uniform over the codes) and its origin per
    #: group (the code of 0 when codes are signed magnitudes)
    levels: int = 0
    origin: np.ndarray | None = None


#: codes per chunk of groups in :func:`rank_window`
WINDOW_CHUNK = 2**15


def _group_chunks(off: np.ndarray, n: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``[g0, g1)`` of the groups of ``off`` holding about ``n`` entries each (a larger group
    alone)."""
    G = off.size - 1
    cut = np.searchsorted(off, np.arange(n, int(off[-1]), n), side="right") - 1
    cuts = np.unique(np.concatenate([[0], np.clip(cut, 0, G), [G]]))
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _window_pieces(c: np.ndarray, cg: np.ndarray, G: int, A: np.ndarray, B: np.ndarray, base: np.ndarray,
                   sub_off: np.ndarray, w: int, t: np.ndarray, half: float, levels: int = 0,
                   origin: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`rank_window`'s pieces of some groups: (left end, right end, log-weight, pieces per group)."""
    if w == 0:
        left, F, Gc, npieces = _pieces0(c, G, A, B, base, sub_off)
    else:
        pg, left, F, Gc = _pieces(c, cg, G, A, B, base, w)
        npieces = np.bincount(pg, minlength=G)
    # a piece ends where the next one of its group starts, the group's last at B
    right = np.empty_like(left)
    right[:-1] = left[1:]
    right -= 1
    last = np.cumsum(npieces) - 1
    right[last[npieces > 0]] = B[npieces > 0]
    tp = np.repeat(t, npieces)
    loss = np.subtract(tp, F)
    np.maximum(loss, np.subtract(Gc, tp, out=tp), out=loss)
    np.maximum(0.0, loss, out=loss)
    loss *= half
    length = right - left
    length += 1
    mass = levelled_mass(left, right, levels, np.repeat(origin, npieces)) if levels else length
    lw_piece = np.log(mass.astype(np.float64))
    lw_piece -= loss  # log(length) - half * loss
    return left, right, lw_piece, npieces


def rank_window(codes: np.ndarray, offsets: np.ndarray, K: np.ndarray, target: np.ndarray, window: int,
                epsilon: float, reach: int | None = None, levels: int = 0, origin: np.ndarray | None = None
                ) -> RankWindow:
    """:func:`rank_em`'s candidates (its docstring): reads the codes at ranks ``floor(t) - W`` and ``ceil(t) +
    W``, binary-searches each group for the codes that can move the loss inside the window and reads those;
    nothing else (so a caller may pass a codes object that knows only those positions).  Draws nothing."""
    G = K.size
    K = np.asarray(K, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    start, stop = offsets[:-1], offsets[1:]
    sizes = stop - start
    t = np.broadcast_to(np.asarray(target, dtype=np.float64), (G,))
    w = int(window)
    half = epsilon / 2.0
    if reach is None:
        W = window_reach(K, epsilon, levels)
    else:
        W = np.full(G, int(reach), dtype=np.int64)
    if levels:
        origin = np.broadcast_to(np.asarray(0 if origin is None else origin, dtype=np.int64), (G,))
    i_lo = np.floor(t).astype(np.int64) - W
    i_hi = np.ceil(t).astype(np.int64) + W
    has_lo = (i_lo >= 1) & (i_lo <= sizes)  # a tail needs its bounding code to exist
    has_hi = (i_hi >= 1) & (i_hi <= sizes)
    a = codes[np.where(has_lo, start + i_lo - 1, 0)] if codes.size else np.zeros(G, dtype=np.int64)
    b = codes[np.where(has_hi, start + i_hi - 1, 0)] if codes.size else np.zeros(G, dtype=np.int64)
    A = np.where(has_lo, a - w, 0)
    has_lo &= A > 0
    A = np.maximum(A, 0)
    B = np.where(has_hi, b + w, K)
    has_hi &= B < K
    B = np.minimum(B, K)
    L_lo = t - (i_lo - 1)
    L_hi = i_hi - t
    # the codes that can move the loss inside [A, B]: c in [A - w - 1, B + w]; all below count as base
    groups = np.arange(G)
    p0 = seg_search(codes, start, stop, A - w - 1, "left", groups)
    p1 = seg_search(codes, p0, stop, B + w, "right", groups)
    base = p0 - start
    idx, sub_off = _ranges(p0, p1)
    # the pieces group by group in chunks of about WINDOW_CHUNK codes: the same arrays, but the temporaries stay
    # small (cache, allocator); measured on dp_mean's 42 calls at 1e7 rows / 10^4 groups: rank_em 1.43-1.45 s in
    # one pass, 1.23-1.36 s in chunks of 2**15 codes, 1.25 s of 2**16
    parts = []
    for g0, g1 in _group_chunks(sub_off, WINDOW_CHUNK):
        so = sub_off[g0:g1 + 1]
        ii = idx[so[0]:so[-1]]
        cg = np.repeat(groups[g0:g1], np.diff(so))
        c = codes.take(ii, cg) if isinstance(codes, GridCodes) else codes[ii]
        parts.append(_window_pieces(c, cg - g0 if w else cg, g1 - g0, A[g0:g1], B[g0:g1], base[g0:g1], so - so[0], w,
                                    t[g0:g1], half, levels, origin[g0:g1] if levels else None))
    left, right, lw_piece = (np.concatenate([q[i] for q in parts]) if parts else np.zeros(0, dtype=dt)
                             for i, dt in ((0, np.int64), (1, np.int64), (2, np.float64)))
    npieces = np.concatenate([q[3] for q in parts]) if parts else np.zeros(0, dtype=np.int64)
    pg = np.repeat(groups, npieces)
    # candidates per group: lower tail, pieces, upper tail
    cand_off = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(npieces + 2, out=cand_off[1:])
    lw = np.empty(int(cand_off[-1]))
    is_piece = np.ones(lw.size, dtype=bool)
    is_piece[cand_off[:-1]] = False
    is_piece[cand_off[1:] - 1] = False
    lw[is_piece] = lw_piece
    # the tails' masses: the codes 0 .. A - 1 and B + 1 .. K (at least 1: a tail that does not exist is -inf)
    m_lo, m_hi = (A, K - B) if not levels else (levelled_mass(np.zeros_like(A), A - 1, levels, origin),
                                                levelled_mass(B + 1, K, levels, origin))
    lw[cand_off[:-1]] = np.where(has_lo, np.log(np.maximum(m_lo, 1).astype(np.float64)) - half * L_lo, -np.inf)
    lw[cand_off[1:] - 1] = np.where(has_hi, np.log(np.maximum(m_hi, 1).astype(np.float64)) - half * L_hi, -np.inf)
    return RankWindow(t, start, stop, w, half, K, A, B, L_lo, L_hi, lw, cand_off, npieces, pg, left, right, levels,
                      origin)


def propose(win: RankWindow, todo: np.ndarray, rng: Rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One round of :func:`rank_em`'s sampler for the groups ``todo``: Gumbel-max over their candidates, then a
    uniform integer inside the pick.  Returns (y, picked the lower tail, picked a piece); a tail's y still needs
    the acceptance test.  ``todo``: distinct groups in ascending order (all of them: the candidates are read in
    place)."""
    cand_off, npieces, pg, left, right = win.cand_off, win.npieces, win.pg, win.left, win.right
    if todo.size == npieces.size:  # every group (todo ascends): all candidates, in place
        pick = exponential_mechanism(win.lw, cand_off, rng)
    else:
        sidx, soff = _ranges(cand_off[todo], cand_off[todo + 1])
        pick = sidx[exponential_mechanism(win.lw[sidx], soff, rng)]
    local = pick - cand_off[todo]
    is_lo = local == 0
    is_hi = local == npieces[todo] + 1
    is_piece = ~(is_lo | is_hi)
    j = np.clip(pick - 2 * todo - 1, 0, max(pg.size - 1, 0))
    lo_y = np.where(is_lo, 0, np.where(is_hi, win.B[todo] + 1, left[j] if pg.size else 0))
    hi_y = np.where(is_lo, win.A[todo] - 1, np.where(is_hi, win.K[todo], right[j] if pg.size else 0))
    return (levelled_integers(rng, lo_y, hi_y, win.levels, win.origin[todo] if win.levels else 0), is_lo,
            is_piece)
