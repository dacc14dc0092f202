"""Subset-optimal estimators of Dick, Kulesza, Sun & Suresh (seed 000), in add/remove form.

"The digest" below is the seed's design notes (``seeds/digests/000-subset-optimal.md``): external material, not in
this repository; docs/methods.md (seed 000) summarises the method.  The paper is pure eps-DP with add/remove
neighbours already, but it assumes a public domain ``[-R, R]`` and uses ``|D|`` in its parameters.  dpsql's changes
(each one is the digest's recommendation unless marked ours):

* **Range.**  Where the paper needs a public range we use ``lower``/``upper`` when both are given (data
  are clamped to them, a fixed per-row map, and the whole budget goes to the paper's algorithm).
  Otherwise a share of eps buys a private range from seed 003 (:mod:`.ranges`): ``mean_range``
  (IQR lower bound + InfiniteDomainRange on a Poisson subsample) for the means, ``iqr_lower_bound`` +
  ``infinite_range`` for the quantiles.  The data are then clamped to the released range (1-stable
  given the release); a one-sided bound is intersected with the released range.
* **n is private.**  Algorithm 3 releases the noisy count of its Algorithm 1 *first* and derives
  alpha, zeta, beta and the rank target from it (post-processing); the upper threshold is the lower
  search on the reflected data (footnote 2), so |D| is never needed.  Algorithm 2 as a quantile uses
  the rank ``p n`` with the true n: its loss keeps sensitivity 1 (digest 3.2).  Algorithm 4 uses public
  rank targets only (its r depends on eps, the grid and the range).
* **Floating point.**  Every exponential mechanism runs on an integer grid (codes ``(x - a) / g``,
  ``g`` a power of two) and releases a grid point, so the output set never depends on the data; this
  is the paper's Corollary 3.8 construction.  Algorithm 2's window alpha is kept as an integer number
  of grid steps.  Sums and counts use discrete Laplace noise (:func:`~.primitives.release_sum`).
* **Algorithm 4 as written costs 2 eps** (digest 3.4): its rank-based shifting step is 3-stable, so
  InvSen at eps/2 costs 3 eps/2.  We charge it: the user's epsilon is ``2 * eps_run``.  Typos fixed:
  rank target 7r/4 (not r/4), thresholds rounded to the grid, top group = the top floor(3r/2) points,
  InvSen weights ``exp(-eps len / 2)``.

Budget splits are module constants.  All methods here are pure eps-DP and never return NULL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..noise import Rng, exponential_mechanism
from .accounting import Privacy
from .batch import Batch
from .helpers import B_MIN, bounded, intersect
from .primitives import (
    MAX_SPAN,
    GridCodes,
    em_target,
    noisy_count,
    pow2_floor,
    rank_em,
    release_sum,
    seg_count_le,
    seg_count_lt,
)
from .ranges import infinite_range, iqr_lower_bound, mean_range
from .registry import Method, ParameterError, Params
from .spending import charge_pure, stable

__all__ = [
    "private_domain",
    "grid_codes",
    "piecewise_em",
    "threshold_codes",
    "threshold_codes_reference",
    "invsen_quantile_codes",
    "quantile_len",
    "alg3_rank_target",
    "alg4_rank",
    "run_bounded_mean",
    "run_subset_mean",
    "run_threshold_quantile",
    "run_threshold_iqr",
    "run_monotone_quantile",
]

#: share of eps spent on a private range when lower/upper are not both given (0 when they are)
RANGE_SHARE = {"bounded": 0.5, "subset": 0.2, "threshold": 0.3, "monotone": 0.2}
#: of that range share, the part that buys seed 003's IQR lower bound (the rest: InfiniteDomainRange)
RANGE_BOUND_PART = 0.25
#: Algorithm 2 as a quantile: grid step g = (b - a) * 2**-THRESHOLD_BITS (alpha = one step)
THRESHOLD_BITS = 40
#: Algorithm 2's window alpha, in grid steps
WINDOW = 1
#: Algorithm 3: default gamma = GAMMA_REL * (b - a) (the paper's additive-error parameter)
GAMMA_REL = 2.0**-20
#: Algorithm 3: rank target capped at n_hat * T_CAP (digest pitfall 2; post-processing of n_hat)
T_CAP = 0.25
#: Algorithm 4: grid step beta = (b - a) * 2**-MONOTONE_BITS (additive error 7 beta)
MONOTONE_BITS = 20
#: Algorithm 4: p is replaced by the nearest fraction with denominator <= 2**20 (public map)
P_DENOMINATOR = 2**20


# --------------------------------------------------------------------------- range and grid


def _has_bounds(params: Params) -> bool:
    return params.lower is not None and params.upper is not None


def private_domain(
    batch: Batch, params: Params, eps_range: float, rng: Rng, total_eps: float, kind: str, clamp: bool = True
) -> tuple[Batch, np.ndarray, np.ndarray]:
    """The public range ``[a, b]`` the paper needs, and the sorted data clamped into it.

    With both ``lower`` and ``upper``: those (cost 0).  Otherwise a private range of cost ``eps_range``
    (pure): ``kind == "mean"``: seed 003's ``mean_range``; ``kind == "quantile"``: ``iqr_lower_bound``
    (bucket ``b * 2**-20``) + ``infinite_range``, as seed 003's quantile does.  Either way a quarter of
    ``eps_range`` buys the IQR bound.  A single given bound is intersected with the release.
    """
    s = bounded(batch, params)
    G = s.groups
    if _has_bounds(params):
        a = np.full(G, float(params.lower))
        b = np.full(G, float(params.upper))
    else:
        e_bound, e_range = RANGE_BOUND_PART * eps_range, (1.0 - RANGE_BOUND_PART) * eps_range
        s.presort()  # sorted while the matching of the IQR bound is drawn
        if kind == "mean":
            a, b = mean_range(s, e_bound, e_range, rng, params.beta, total_eps)
        else:
            bucket = np.maximum(iqr_lower_bound(s, e_bound, rng) * 2.0**-20, B_MIN)
            a, b = infinite_range(s, bucket, e_range, rng, params.beta)
        a, b = intersect(a, b, params)
    s = s.sorted()
    if not clamp:  # the caller clips codes instead (the same result for grid codes)
        return s, a, b
    gid = s.group_ids
    c = Batch(np.clip(s.values, a[gid], b[gid]), s.offsets)
    c._sorted = c
    return c, a, b


def _grid(width: np.ndarray, resolution: np.ndarray) -> np.ndarray:
    """A power-of-two step <= resolution (>= B_MIN), coarsened so that width / step <= MAX_SPAN."""
    g = pow2_floor(np.maximum(resolution, B_MIN))
    need = pow2_floor(np.maximum(width, B_MIN) / MAX_SPAN) * 2.0
    return np.maximum(g, need)


def grid_codes(s: Batch, a: np.ndarray, b: np.ndarray, g: np.ndarray, nearest: bool = False):
    """Integer codes of sorted data in ``[a, b]`` on the grid ``a + g Z``: ``floor((x - a) / g)`` (or the
    nearest code), clipped to ``[0, K]`` with ``K = floor((b - a) / g)``.  Returns (codes, K); codes stay
    sorted within groups (the map is monotone)."""
    K = np.floor((b - a) / g).astype(np.int64)
    gid = s.group_ids
    q = (s.values - a[gid]) / g[gid]
    q = np.rint(q) if nearest else np.floor(q)
    codes = np.clip(q, 0, K[gid]).astype(np.int64)
    return codes, K


def _reflect(codes: np.ndarray, offsets: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``K - codes`` in ascending order within each group (the data of -D on the reflected grid)."""
    n = codes.size
    if n == 0:
        return codes.copy()
    gid = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    i = np.arange(n)
    rev = offsets[gid + 1] - 1 - i + offsets[gid]
    return K[gid] - codes[rev]


def _code_batch(codes: np.ndarray, offsets: np.ndarray) -> Batch:
    c = Batch(codes.astype(np.float64), offsets)  # codes <= 2**51: exact in float64
    c._sorted = c
    return c


# --------------------------------------------------------------------------- exponential mechanisms


def piecewise_em(
    codes: np.ndarray,
    offsets: np.ndarray,
    K: np.ndarray,
    shifts: tuple[int, ...],
    score: Callable[[np.ndarray, np.ndarray], np.ndarray],
    epsilon: float,
    rng: Rng,
) -> np.ndarray:
    """Exponential mechanism over each group's integers ``0..K[g]`` with a piecewise-constant score.

    ``score(g, y)`` is the (sensitivity-1) loss of candidate ``y`` in group ``g``; it must be constant
    between consecutive breakpoints ``{0} U {code + s : s in shifts}``.  Each piece ``[left, right]`` is a
    candidate with log-weight ``log(right - left + 1) - eps * score / 2`` (Gumbel-max), then a uniform
    integer inside it: exactly ``P(y) ~ exp(-eps * score(y) / 2)``.  eps-DP when the score has
    sensitivity 1.  Cost O((n + G) log n), independent of K.  Returns int64 codes.
    """
    G = K.size
    gid = np.repeat(np.arange(G), np.diff(offsets))
    v = np.concatenate([np.zeros(G, dtype=np.int64)] + [codes + int(s) for s in shifts])
    g = np.concatenate([np.arange(G)] + [gid] * len(shifts))
    keep = (v >= 0) & (v <= K[g])
    v, g = v[keep], g[keep]
    order = np.lexsort((v, g))
    v, g = v[order], g[order]
    new = np.ones(v.size, dtype=bool)
    new[1:] = (v[1:] != v[:-1]) | (g[1:] != g[:-1])
    left, pg = v[new], g[new]
    same_next = np.append(pg[1:] == pg[:-1], False)
    right = np.where(same_next, np.roll(left, -1) - 1, K[pg])
    cand_off = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(np.bincount(pg, minlength=G), out=cand_off[1:])
    sc = np.asarray(score(pg, left), dtype=np.float64)
    logw = np.log((right - left + 1).astype(np.float64)) - epsilon * sc / 2.0
    charge_pure(epsilon, "exponential mechanism (pieces)")
    pick = exponential_mechanism(logw, cand_off, rng)
    return rng.integers(left[pick], right[pick])


def threshold_codes(
    codes: np.ndarray,
    offsets: np.ndarray,
    K: np.ndarray,
    target: np.ndarray,
    window: int,
    epsilon: float,
    rng: Rng,
    reach: int | None = None,
) -> np.ndarray:
    """PrvThreshold (Algorithm 2) on integer codes: eps-DP (pure).

    Loss (digest's closed form, window ``w`` grid steps = the paper's alpha):
    ``l(y) = max(0, r - #{c <= y + w}, #{c < y - w} - r)``.  Adding or removing a row moves each count by
    0 or 1; ``target`` must be public or move by a value in [0, 1] in the same direction (``p n`` or
    :func:`~.primitives.em_target`), so l has sensitivity 1 and the mechanism ``exp(-eps l / 2)`` is
    eps-DP.  With ``w = 0`` on grid data this is Algorithm 2 with alpha = step/3 followed by rounding
    (Corollary 3.8), restricted to the grid.  Sampled by :func:`~.primitives.rank_em` (exact; reads only
    the codes near the target); :func:`threshold_codes_reference` is the whole-domain sampler it replaced.
    """
    return rank_em(codes, offsets, K, target, window, epsilon, rng, reach)


def threshold_codes_reference(
    codes: np.ndarray,
    offsets: np.ndarray,
    K: np.ndarray,
    target: np.ndarray,
    window: int,
    epsilon: float,
    rng: Rng,
) -> np.ndarray:
    """The same mechanism as :func:`threshold_codes`, sampled over every piece of the whole domain with
    :func:`piecewise_em` (O(n log n) per call).  Kept as the reference the law tests compare with."""
    cb = _code_batch(codes, offsets)
    comp = cb.group_ids.astype(np.float64) + 1j * cb.values
    t = np.asarray(target, dtype=np.float64)

    def score(pg: np.ndarray, left: np.ndarray) -> np.ndarray:
        cle = seg_count_le(cb, pg, (left + window).astype(np.float64), comp)
        clt = seg_count_lt(cb, pg, (left - window).astype(np.float64), comp)
        return np.maximum(0.0, np.maximum(t[pg] - cle, clt - t[pg]))

    return piecewise_em(codes, offsets, K, (-window, window + 1), score, epsilon, rng)


def _p_fraction(p: float) -> tuple[int, int]:
    """p as an exact fraction P/Q (Q <= 2**20), kept inside (0, 1) so that theta_p = x_(ceil(p n))
    is the minimum for p = 0 and the maximum for p = 1 (for n <= 2**20)."""
    f = Fraction(min(max(float(p), 0.0), 1.0)).limit_denominator(P_DENOMINATOR)
    f = min(max(f, Fraction(1, P_DENOMINATOR)), 1 - Fraction(1, P_DENOMINATOR))
    return f.numerator, f.denominator


def quantile_len(A: np.ndarray, E: np.ndarray, n: np.ndarray, P: int, Q: int) -> np.ndarray:
    """Inverse sensitivity ``len`` of the p-quantile ``theta_p(D) = x_(ceil(p n))`` at a point t, p = P/Q.

    ``A = #{x < t}``, ``E = #{x = t}``, ``n = |D|``; the fewest add/remove operations (adding at t) that
    make ``theta_p = t`` (digest 3.5; exact integer arithmetic scaled by Q; brute-force checked in tests).
    """
    A = np.asarray(A, dtype=np.int64)
    E = np.asarray(E, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    pn = P * n  # p n, scaled by Q
    a0 = (E == 0).astype(np.int64)
    cc = max(P, Q - P)  # max(p, 1 - p), scaled by Q
    zero = (E >= 1) & (A * Q < pn) & (pn <= (A + E) * Q)
    above = A * Q >= pn
    XQ = A * Q - pn - P * a0
    len_above = np.where(XQ < 0, a0, a0 + np.floor_divide(np.maximum(XQ, 0), cc) + 1)
    YQ = pn - (A + E) * Q - (Q - P) * a0
    len_below = np.where(YQ <= 0, a0, a0 + np.floor_divide(np.maximum(YQ, 0) + cc - 1, cc))
    return np.where(zero, 0, np.where(above, len_above, len_below))


def invsen_quantile_codes(
    codes: np.ndarray, offsets: np.ndarray, K: np.ndarray, p: float, epsilon: float, rng: Rng
) -> np.ndarray:
    """InvSen (Algorithm 5) for the p-quantile on the integer grid ``0..K``: eps-DP (pure).

    ``P(t) ~ exp(-eps len(D, t) / 2)`` (the paper's missing eps/2 restored).  len has sensitivity 1 under
    add/remove (triangle inequality for the add/remove distance over the same domain), so eps-DP.  len is
    constant on each data value and on each gap between values: segment sampler (digest 3.5).
    """
    P, Q = _p_fraction(p)
    cb = _code_batch(codes, offsets)
    comp = cb.group_ids.astype(np.float64) + 1j * cb.values
    sizes = cb.sizes

    def score(pg: np.ndarray, left: np.ndarray) -> np.ndarray:
        lf = left.astype(np.float64)
        A = seg_count_lt(cb, pg, lf, comp)
        AE = seg_count_le(cb, pg, lf, comp)
        return quantile_len(A, AE - A, sizes[pg], P, Q).astype(np.float64)

    return piecewise_em(codes, offsets, K, (0, 1), score, epsilon, rng)


def _threshold_value(
    codes: np.ndarray,
    s: Batch,
    a: np.ndarray,
    g: np.ndarray,
    K: np.ndarray,
    target: np.ndarray,
    window: int,
    eps: float,
    rng: Rng,
    upper: bool,
) -> np.ndarray:
    """A lower threshold (rank ``target`` from the bottom) or, with ``upper``, the lower search on the
    reflected data (rank ``target`` from the top; footnote 2), as a value ``a + code * g``."""
    if upper:
        ref = codes.reflected() if isinstance(codes, GridCodes) else _reflect(codes, s.offsets, K)
        y = threshold_codes(ref, s.offsets, K, target, window, eps, rng)
        y = K - y
    else:
        y = threshold_codes(codes, s.offsets, K, target, window, eps, rng)
    return a + y * g


# --------------------------------------------------------------------------- Algorithm 1


def run_bounded_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean 'bounded' (Algorithm 1): noisy count and centred clipped sum on a range [l, u].

    Cost eps (pure).  With lower/upper: count eps/2 (DLap(2/eps)) + sum eps/2, as in Lemma 3.3.  Without:
    seed 003's ``mean_range`` at 0.5 eps (IQR bound 0.125 eps + subsampled range 0.375 eps), then count
    0.25 eps + sum 0.25 eps.  Proof sketch: the count has sensitivity 1; ``sum(clip(x, l, u) - m)`` with
    ``m = (l + u)/2`` moves by at most ``w/2 = (u - l)/2`` when a row is added or removed, and is released
    on a fixed-point grid with discrete Laplace noise calibrated to that (inflated by the grid);
    composition.  Output ``m + clip(s_hat / max(n_hat, 1), [-w/2, w/2])`` (post-processing; never NULL).
    """
    eps = budget.epsilon
    share = 0.0 if _has_bounds(params) else RANGE_SHARE["bounded"]
    s, l, u = private_domain(batch, params, share * eps, rng, eps, "mean")
    rest = (1.0 - share) * eps
    return _alg1(s, l, u, noisy_count(s, rest / 2.0, rng), rest / 2.0, rng)


def _alg1(s: Batch, l: np.ndarray, u: np.ndarray, n_hat: np.ndarray, eps_sum: float, rng: Rng) -> np.ndarray:
    m = l / 2.0 + u / 2.0
    half = u / 2.0 - l / 2.0
    gid = s.group_ids
    x = np.clip(s.values, l[gid], u[gid]) - m[gid]
    total = release_sum(x, s.offsets, half, eps_sum, rng)
    with np.errstate(invalid="ignore"):
        return m + np.clip(total / np.maximum(n_hat, 1.0), -half, half)


# --------------------------------------------------------------------------- Algorithm 3


def alg3_rank_target(n_hat: np.ndarray, R: np.ndarray, gamma: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3 step 1 with n replaced by ``n_ = max(n_hat, 1)``: returns (alpha, t).

    ``alpha = gamma / n_``, ``zeta = alpha / (R n_ eps)``, ``beta = (2/eps) log(2R / (alpha zeta))
    = (2/eps) log(2 R**2 eps n_**3 / gamma**2)`` and ``t = 1/eps + beta``, capped at ``T_CAP * n_`` (ours,
    digest pitfall 2: keeps l <= u for small n).  Computed in log space.  Everything is a function of the
    released n_hat and public values.
    """
    n_ = np.maximum(n_hat, 1.0)
    alpha = gamma / n_
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = math.log(2.0 * eps) + 2.0 * np.log(R) + 3.0 * np.log(n_) - 2.0 * np.log(gamma)
    beta = np.where(np.isfinite(lg), 2.0 / eps * np.maximum(lg, 0.0), 0.0)
    t = np.minimum(1.0 / eps + beta, T_CAP * n_)
    return alpha, t


def _gamma(params: Params, width: np.ndarray) -> np.ndarray:
    """Algorithm 3's gamma: ``extra['gamma']`` (a public literal > 0) or ``GAMMA_REL * (b - a)``."""
    gamma = (params.extra or {}).get("gamma")
    if gamma is None:
        return np.maximum(GAMMA_REL * width, B_MIN)
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not (0 < gamma < math.inf):
        raise ParameterError("dp_mean: gamma must be a finite number > 0")
    return np.full(width.size, float(gamma))


def run_subset_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean 'subset' (Algorithm 3, the digest's implementable variant): subset-optimal mean.

    Cost eps (pure).  Per-step ``e = (1 - share) eps / 3`` (share = 0 with lower/upper, else 0.2 eps for
    seed 003's ``mean_range``): noisy count e/2 (released first), lower threshold e, upper threshold e,
    centred clipped sum e/2; total 3e + share.  Steps: n_hat; alpha, t from n_hat
    (:func:`alg3_rank_target`); ``l = PrvThreshold(D, t)``, ``u = -PrvThreshold(-D, t)`` (footnote 2, no
    |D|) on the grid ``a + gZ`` with g = alpha rounded down to a power of two and window one step; swap
    if u < l; Algorithm 1 on clip(D, [l, u]) reusing n_hat.  Each threshold's target depends only on
    n_hat, so its loss has sensitivity 1; the sum moves by <= (u - l)/2.  gamma: ``extra['gamma']`` or
    ``GAMMA_REL * (b - a)``.  Never NULL.
    """
    eps = budget.epsilon
    share = 0.0 if _has_bounds(params) else RANGE_SHARE["subset"]
    s, a, b = private_domain(batch, params, share * eps, rng, eps, "mean")
    e = (1.0 - share) * eps / 3.0
    n_hat = noisy_count(s, e / 2.0, rng)
    width = b - a
    gamma = _gamma(params, width)
    alpha, t = alg3_rank_target(n_hat, width / 2.0, gamma, e)
    g = _grid(width, alpha)
    codes, K = grid_codes(s, a, b, g)
    lo = _threshold_value(codes, s, a, g, K, t, WINDOW, e, rng, upper=False)
    hi = _threshold_value(codes, s, a, g, K, t, WINDOW, e, rng, upper=True)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    return _alg1(s, lo, hi, n_hat, e / 2.0, rng)


# --------------------------------------------------------------------------- Algorithm 2 as quantile / IQR


def _threshold_setup(batch: Batch, params: Params, eps: float, rng: Rng):
    share = 0.0 if _has_bounds(params) else RANGE_SHARE["threshold"]
    s, a, b = private_domain(batch, params, share * eps, rng, eps, "quantile", clamp=False)
    g = _grid(b - a, (b - a) * 2.0**-THRESHOLD_BITS)
    # the codes of grid_codes on the clamped data, computed only where the sampler reads them
    K = np.floor((b - a) / g).astype(np.int64)
    codes = GridCodes(s.values, s.offsets, a, g, K)
    return s, a, g, K, codes, (1.0 - share) * eps


def _quantile(s, a, g, K, codes, p: float, eps: float, rng: Rng) -> np.ndarray:
    n = s.sizes.astype(np.float64)
    if p <= 0.5:
        return _threshold_value(codes, s, a, g, K, em_target(p, n, 1.0), WINDOW, eps, rng, upper=False)
    return _threshold_value(codes, s, a, g, K, em_target(1.0 - p, n, 1.0), WINDOW, eps, rng, upper=True)


def run_threshold_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile 'threshold' (Algorithm 2 with r = p n): eps-DP (pure).

    Range: lower/upper, or 0.3 eps of seed 003's IQR bound + InfiniteDomainRange.  The rest runs one
    PrvThreshold on the grid ``g = (b - a) 2**-40`` (alpha = one step) with target ``p n`` clamped into
    ``[min(1, n/2), max(n - 1, n/2)]`` (Theorem 3.7 needs 1 <= r <= n; em_target keeps the slope in
    [0, 1], so the loss keeps sensitivity 1); for p > 1/2 the lower search on the reflected data with
    rank ``(1 - p) n`` (footnote 2).
    """
    s, a, g, K, codes, e = _threshold_setup(batch, params, budget.epsilon, rng)
    return _quantile(s, a, g, K, codes, float(params.p), e, rng)


def run_threshold_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_iqr 'threshold': two PrvThresholds (ranks n/4 from the bottom and from the top), each half of
    the non-range budget; eps-DP (pure) by composition.  max(q3 - q1, 0).  IQR is not monotone: the
    paper gives no optimality claim for it."""
    s, a, g, K, codes, e = _threshold_setup(batch, params, budget.epsilon, rng)
    q1 = _quantile(s, a, g, K, codes, 0.25, e / 2.0, rng)
    q3 = _quantile(s, a, g, K, codes, 0.75, e / 2.0, rng)
    return np.maximum(q3 - q1, 0.0)


# --------------------------------------------------------------------------- Algorithm 4 (+5)


def alg4_rank(K: np.ndarray, eps_run: float) -> np.ndarray:
    """Algorithm 4 step 2 for |.| loss (L = 1) on the grid 0..K (R = K beta / 2, B = 2R):
    ``r = 32 log(6 R B / (L beta**2)) / eps = 32 log(3 K**2) / eps`` (public)."""
    Kf = np.maximum(K, 1).astype(np.float64)
    return 32.0 * np.log(3.0 * Kf * Kf) / eps_run


def _shift_groups(codes: np.ndarray, offsets: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Step 5: the lowest ``k`` points move one grid step down, the points of rank >= max(n - k, k) one
    step up (the top k when they do not overlap).  Adding or removing one row changes the result in at
    most 3 elements (the row, and one old point whose group changes, counted twice), for every n."""
    sizes = np.diff(offsets)
    gid = np.repeat(np.arange(sizes.size), sizes)
    rank = np.arange(codes.size) - offsets[gid]
    kk = k[gid]
    down = rank < kk
    up = rank >= np.maximum(sizes[gid] - kk, kk)
    return codes - down.astype(np.int64) + up.astype(np.int64)


def run_monotone_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile 'monotone' (Algorithm 4 with Algorithm 5 for the p-quantile): eps-DP (pure), charged
    as the digest's 2 eps_run for Algorithm 4 as written.

    Range share 0.2 eps without lower/upper (seed 003 IQR bound + InfiniteDomainRange).  With the rest
    ``E = 2 eps_run``: (1) quantize to the nearest point of ``a + beta Z``, beta = (b - a) 2**-20;
    (2) public rank ``r = 32 log(3 K**2) / eps_run``; (3) ``l`` = PrvThreshold at rank 7r/4 (typo fixed),
    window 0 (Corollary 3.8), eps_run/4; (4) ``u`` = the same on the reflected data, eps_run/4; (5) shift
    the lowest/highest floor(3r/2) points one step out; (6) prune to [l, u] (closed); (7) InvSen at
    eps_run/2.  Privacy: (5) is 3-stable under add/remove and the pruning is a per-element filter, so
    InvSen's len moves by <= 3 and the release costs 3 eps_run/2; total eps_run/4 + eps_run/4 +
    3 eps_run/2 = 2 eps_run.  Guarantee (Thm 4.3): error <= 2e**2 R(D, 1/(4r)) + 7 beta, i.e. it competes
    with removing 4r points: needs n >> 4r (thousands of points at eps = 1).
    """
    eps = budget.epsilon
    share = 0.0 if _has_bounds(params) else RANGE_SHARE["monotone"]
    s, a, b = private_domain(batch, params, share * eps, rng, eps, "quantile")
    eps_run = (1.0 - share) * eps / 2.0
    h = _grid(b - a, (b - a) * 2.0**-MONOTONE_BITS)
    codes, K = grid_codes(s, a, b, h, nearest=True)
    r = alg4_rank(K, eps_run)
    target = 7.0 * r / 4.0
    lc = threshold_codes(codes, s.offsets, K, target, 0, eps_run / 4.0, rng)
    uc = K - threshold_codes(_reflect(codes, s.offsets, K), s.offsets, K, target, 0, eps_run / 4.0, rng)
    lc, uc = np.minimum(lc, uc), np.maximum(lc, uc)
    y = _shift_groups(codes, s.offsets, np.floor(1.5 * r).astype(np.int64))
    gid = s.group_ids
    keep = (y >= lc[gid]) & (y <= uc[gid])
    csum = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(keep, out=csum[1:])
    off = csum[s.offsets]
    pruned = (y - lc[gid])[keep]
    with stable(3, "InvSen after the shift"):
        t = invsen_quantile_codes(pruned, off, uc - lc, float(params.p), eps_run / 2.0, rng)
    return a + (lc + t) * h


# --------------------------------------------------------------------------- registration

_SRC = "seed 000 (Dick, Kulesza, Sun, Suresh), add/remove form"
METHODS = (
    Method("mean", "bounded", "pure", run_bounded_mean, "Alg 1: count + clipped sum on a range", source=_SRC),
    Method("mean", "subset", "pure", run_subset_mean, "Alg 3: subset-optimal mean (EM thresholds)", source=_SRC),
    Method("quantile", "threshold", "pure", run_threshold_quantile, "Alg 2: EM threshold, rank p n", source=_SRC),
    Method("iqr", "threshold", "pure", run_threshold_iqr, "Alg 2 twice (ranks n/4 from each end)", source=_SRC),
    Method("quantile", "monotone", "pure", run_monotone_quantile, "Alg 4+5: thresholds, prune, InvSen", source=_SRC),
)
