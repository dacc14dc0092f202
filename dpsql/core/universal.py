"""Universal (bound-free) estimators of Dong & Yi (seed 003), re-derived for add/remove neighbours.

Read ``shared/seeds/digests/003-universal-estimators.md`` with this file.  The paper assumes
replace-one neighbours and a public n; dpsql's neighbours add or remove one row, so:

* every SVT query is written so that n is not needed: the radius search counts the points *outside*
  ``[c - x, c + x]`` (sensitivity 1, monotone), and the IQR-bound search counts
  ``16 #{Y <= x} - 3 |G|`` over the pair gaps (sensitivity 16 in these units, i.e. 1 in counts);
* pairs are a uniformly random maximal matching (random permutation, consecutive pairs).  Coupling the
  matchings of D and D + {x}: x is unmatched, or its partner y is left unmatched / re-paired with the
  leftover z.  So the multiset of gaps loses one and gains at most one element: any count of gaps
  moves by at most 1 (mixture over matchings of eps-DP mechanisms is eps-DP);
* the subsample is Poisson (each row kept with public rate eta), whose amplification under add/remove
  is ``ln(1 + eta (e^eps - 1))`` (the paper's sampling without replacement needs a public n);
* where the paper divides by n (mean, variance) we release a noisy count with a declared share of eps;
* the quantile grid is ``IQR_lb * 2**-20`` instead of ``IQR_lb / n`` (a data-independent relative
  resolution; the value error it adds is at most one grid step);
* grids are coarsened so every exponential-mechanism domain spans at most 2**50 integer codes
  (post-processing of released radii; keeps the sampling exact).

Budget splits are module constants (``SPLIT_*``); they were chosen by the accuracy benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .batch import Batch
from .intervals import count_interval
from .primitives import (
    MAX_SPAN,
    GridCodes,
    ceil_log2,
    em_target,
    noisy_count,
    per_row,
    pow2_floor,
    rank_em,
    release_sum,
    seg_count_le,
    seg_count_lt,
    svt_scan,
)
from .registry import Method, Params, register

B_MIN = 2.0**-1000  # data-independent floor on every bucket size (digest pitfall 2)
B_MAX = 2.0**1000
K_UP = 1102  # upward IQR-bound scan reaches 2**1100 > any gap (values are clamped to +-2**1000)
K_DOWN = 1000  # downward scan stops at 2**-1000 = B_MIN
K_RADIUS = 2010  # 2**(K-2) * B_MIN > 2**1002

SPLIT_MEAN = {"count": 0.1, "bound": 0.1, "range": 0.4, "sum": 0.4}
SPLIT_VAR = {"count": 0.1, "bound": 0.1, "radius": 0.4, "sum": 0.4}
SPLIT_SUM = {"bound": 0.1, "range": 0.3, "sum": 0.6}
SPLIT_QUANTILE = {"bound": 0.2, "range": 0.4, "em": 0.4}
SPLIT_IQR = {"bound": 0.2, "range": 0.3, "em": 0.25}  # em twice


# --------------------------------------------------------------------------- helpers


def _bounded(batch: Batch, params: Params) -> Batch:
    """Clamp values to public [lower, upper] when given (a fixed per-row map)."""
    if params.lower is None and params.upper is None:
        return batch
    lo = -np.inf if params.lower is None else params.lower
    hi = np.inf if params.upper is None else params.upper
    return Batch(np.clip(batch.values, lo, hi), batch.offsets)


def _intersect(l: np.ndarray, r: np.ndarray, params: Params) -> tuple[np.ndarray, np.ndarray]:
    """Intersect released ranges with public bounds (post-processing; never widens)."""
    if params.lower is not None:
        l = np.maximum(l, params.lower)
        r = np.maximum(r, params.lower)
    if params.upper is not None:
        l = np.minimum(l, params.upper)
        r = np.minimum(r, params.upper)
    return l, r


def _rows(per_group: np.ndarray, batch: Batch) -> np.ndarray | np.float64:
    """:func:`~dpsql.core.primitives.per_row` over a batch's groups."""
    return per_row(per_group, batch.offsets)


def _sorted_batch(values: np.ndarray, gid: np.ndarray, groups: int) -> Batch:
    """Values with group ids (any order) as a sorted Batch: stable grouping, then per-group sort."""
    order = _group_order(gid, groups)
    sizes = np.bincount(gid, minlength=groups)
    offsets = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return Batch(values[order], offsets).sorted()


def _group_order(gid: np.ndarray, groups: int) -> np.ndarray:
    """A stable permutation that groups rows by group id (radix sort for < 2**16 groups)."""
    if groups == 1 or gid.size < 2 or not np.any(gid[1:] < gid[:-1]):
        return np.arange(gid.size)  # already grouped (e.g. the pairs of random_pairs)
    key = gid.astype(np.uint16) if groups < 2**16 else gid
    return np.argsort(key, kind="stable")


def random_pairs(batch: Batch, rng: Rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A uniformly random maximal matching inside each group: returns the two values and the group of
    each pair (an odd group leaves one random row unmatched).

    Every group's rows are put in uniformly random order (:meth:`~dpsql.noise.Rng.shuffle_segments`) and
    consecutive rows of that order are paired, so the matching is uniform over the maximal matchings."""
    w = rng.shuffle_segments(batch.values, batch.offsets)
    if batch.groups == 1:
        k = w.size // 2
        return w[0 : 2 * k : 2], w[1 : 2 * k : 2], np.zeros(k, dtype=np.int64)
    half = batch.sizes // 2
    pg = np.repeat(np.arange(batch.groups, dtype=np.int64), half)
    start = np.zeros(batch.groups + 1, dtype=np.int64)
    np.cumsum(half, out=start[1:])
    first = batch.offsets[pg] + 2 * (np.arange(pg.size, dtype=np.int64) - start[pg])
    return w[first], w[first + 1], pg


# --------------------------------------------------------------------------- building blocks


_CL_LO, _CL_HI = -(K_DOWN - 2) - 2, K_UP - 2 + 1  # exponents the IQR-bound scans ask about, with a margin


def _gap_exponent_counts(
    y: np.ndarray, pg: np.ndarray, groups: int
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``count_le(g, k)``: #{pair gaps y of group g[i] with y <= 2**k[j]} as a matrix [i, j], for integer
    k in ``(_CL_LO, _CL_HI)`` (every exponent the scans of :func:`iqr_lower_bound` query).

    y <= 2**k  <=>  ceil_log2(y) <= k, so the counts are a cumulative histogram of the integer exponents
    (clamped into [_CL_LO, _CL_HI], which changes no count inside the queried range): a dense table for up
    to ~2000 groups, otherwise one sorted array of (group, exponent) keys.  No float sort."""
    width = _CL_HI - _CL_LO + 1
    e = np.clip(ceil_log2(y), _CL_LO, _CL_HI) - _CL_LO
    if groups * width <= 2**22:
        cdf = np.cumsum(np.bincount(pg * width + e, minlength=groups * width).reshape(groups, width), axis=1)

        def table(g: np.ndarray, k: np.ndarray) -> np.ndarray:
            return cdf[g[:, None], (k - _CL_LO)[None, :]]

        return table
    keys = np.sort(pg * width + e)
    first = np.searchsorted(keys, np.arange(groups, dtype=np.int64) * width)

    def search(g: np.ndarray, k: np.ndarray) -> np.ndarray:
        q = (g * width)[:, None] + (k - _CL_LO)[None, :]
        return np.searchsorted(keys, q, side="right") - first[g][:, None]

    return search


def iqr_lower_bound(
    batch: Batch, epsilon: float, rng: Rng, pairs: tuple | None = None
) -> np.ndarray:
    """EstimateIQRLowerBound (seed 003 Alg. 7), add/remove form.  Returns a power of two per group.

    Cost: eps-DP (pure): an upward SVT at eps/2 over x = 2**0, 2**1, ... and, adaptively only when it
    stops at once, a downward SVT at eps/2 over x = 2**0, 2**-1, ...  Each query is
    ``16 #{Y <= x} - 3 |G|`` over the random pair gaps Y, compared with 0 (the paper's
    ``Count >= 3n'/16`` without n).  Proof sketch: under the matching coupling one gap leaves and at
    most one joins, changing the query by -13, +3, or their difference with +13/-3: at most 16; SVT with
    sensitivity 16 is eps/2-DP; two adaptive SVTs compose to eps.  Output floored at ``B_MIN``.
    """
    G = batch.groups
    a, b, pg = pairs if pairs is not None else random_pairs(batch, rng)
    count_le = _gap_exponent_counts(np.abs(a - b), pg, G)
    npairs = np.bincount(pg, minlength=G)

    def up(active: np.ndarray, ks: np.ndarray) -> np.ndarray:
        c = count_le(active, ks - 1)  # x_i = 2**(i-1)
        return 16 * c - 3 * npairs[active][:, None]

    def down(active: np.ndarray, ks: np.ndarray) -> np.ndarray:
        c = count_le(active, -(ks - 1))  # x_j = 2**-(j-1)
        return 3 * npairs[active][:, None] - 16 * c

    i = svt_scan(up, G, 0, 16, epsilon / 2.0, rng, K_UP)
    with np.errstate(over="ignore"):
        out = np.ldexp(1.0, (i - 2).astype(np.int64))
    need = np.flatnonzero(i <= 1)
    if need.size:
        j = svt_scan(lambda act, ks: down(need[act], ks), need.size, 0, 16, epsilon / 2.0, rng, K_DOWN)
        out[need] = np.ldexp(1.0, -j.astype(np.int64))
    return np.clip(out, B_MIN, B_MAX)


def _step(b: np.ndarray, k: np.ndarray, fine: bool) -> np.ndarray:
    """``b 2**k`` or, fine, ``b 2**(k/2)`` (odd k: times sqrt 2, rounded once)."""
    k = np.asarray(k, dtype=np.int64)
    if not fine:
        return np.ldexp(b, k)
    x = np.ldexp(b, k // 2)
    return np.where(k % 2 == 1, x * np.sqrt(2.0), x)


def radius(
    batch: Batch, center: np.ndarray, b: np.ndarray, epsilon: float, rng: Rng, beta: float,
    outside: float | None = None, monotone: bool = False, fine: bool = False,
) -> np.ndarray:
    """InfiniteDomainRadius (seed 003 Alg. 3) around ``center`` with bucket ``b`` (powers of two).

    Scans x_1 = 0, x_i = 2**(i-2) b and stops at the first i where (noisily) at most ``outside``
    points (default the paper's ``(6/eps) ln(2/beta)``) lie outside ``[center - x_i, center + x_i]``.
    Cost: eps-DP (pure): one SVT over the queries ``-#outside``, each of sensitivity 1 under add/remove
    (a row is outside or not), threshold public.  n is never used.  The queries are monotone (adding a
    row moves every ``-#outside`` by 0 or -1), so ``monotone=True`` may use the halved query noise of
    :func:`~dpsql.core.primitives.svt_scan`.  ``fine=True`` scans ``x_i = 2**((i-2)/2) b`` (steps of
    sqrt 2, twice the queries: the SVT's cost does not depend on their number), so the released radius
    overshoots the needed one by at most sqrt 2 instead of 2.
    """
    s = batch.sorted()
    G = s.groups
    comp = None if G == 1 else s.composite()
    if outside is None:
        outside = 6.0 / epsilon * math.log(2.0 / beta)
    thr = -int(math.ceil(outside))
    n = s.sizes

    def q(active: np.ndarray, ks: np.ndarray) -> np.ndarray:
        g = np.repeat(active, ks.size)
        kk = np.tile(ks, active.size)
        with np.errstate(over="ignore"):
            x = np.where(kk == 1, 0.0, _step(b[g], kk - 2, fine))
        c = center[g]
        with np.errstate(invalid="ignore", over="ignore"):
            below = seg_count_lt(s, g, c - x, comp)
            upto = seg_count_le(s, g, c + x, comp)
        outside = below + (n[g] - upto)
        return -outside.reshape(active.size, ks.size)

    i = svt_scan(q, G, thr, 1, epsilon, rng, 2 * K_RADIUS if fine else K_RADIUS, monotone=monotone)
    with np.errstate(over="ignore"):
        r = np.where(i == 1, 0.0, _step(b, i - 2, fine))
    return np.minimum(r, 2.0**1002)


def _grid_for(width: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A power-of-two grid >= b such that ``width / grid <= MAX_SPAN``."""
    need = pow2_floor(np.maximum(width, B_MIN) / MAX_SPAN) * 2.0
    return np.maximum(b, need)


def private_quantile_in(
    s: Batch, l: np.ndarray, r: np.ndarray, b: np.ndarray, p: float, epsilon: float, rng: Rng, beta: float
) -> np.ndarray:
    """FiniteDomainQuantile (seed 003 Alg. 2) on the grid of ``[l, r]``: eps-DP (pure).

    Values are clipped to [l, r] and coded ``floor((x - l) / grid)`` (a fixed per-row map given the
    released l, r, b); the exponential mechanism of :func:`~dpsql.core.primitives.quantile_em` (sampled
    exactly by ``rank_em``) picks a code with the rank target ``p n`` clamped by ``(2/eps) ln(|X| / beta)``
    (the paper's clamp, with the real n: its target moves by at most one rank per added row, so the score
    keeps sensitivity 1).
    """
    grid = _grid_for(r - l, b)
    span = np.floor((r - l) / grid).astype(np.int64)
    # codes floor((x - l) / grid) clipped to [0, span] (the same as coding x clipped to [l, r]), computed
    # lazily: the sampler reads only the codes near the target
    codes = GridCodes(s.values, s.offsets, l, grid, span)
    margin = 2.0 / epsilon * np.log((span + 1.0) / beta)
    target = em_target(p, s.sizes, margin)
    # codes are sorted within groups because the map is monotone; rank_em samples the law of
    # quantile_em (window 0) while reading only the codes near the target
    k = rank_em(codes, s.offsets, span, target, 0, epsilon, rng)
    return l + k * grid


def infinite_range(
    batch: Batch, b: np.ndarray, epsilon: float, rng: Rng, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """InfiniteDomainRange (seed 003 Alg. 4): eps-DP (pure) = radius eps/8 + median eps/8 + radius 3eps/4.

    The median is taken on the grid of [-r1, r1] (bucket b, coarsened to span <= 2**50 codes); the
    second radius is centred on it.  n is never used (see :func:`radius`, :func:`private_quantile_in`).
    """
    s = batch.sorted()
    G = s.groups
    zero = np.zeros(G)
    r1 = radius(s, zero, b, epsilon / 8.0, rng, beta / 3.0)
    xc = private_quantile_in(s, -r1, r1, b, 0.5, epsilon / 8.0, rng, beta / 3.0)
    r2 = radius(s, xc, b, 3.0 * epsilon / 4.0, rng, beta / 3.0)
    return xc - r2, xc + r2


def _amplified(epsilon: float, eta: float) -> float:
    """The eps_sub whose Poisson(eta)-subsampled run costs exactly ``epsilon`` under add/remove."""
    if eta >= 1.0:
        return epsilon
    return math.log1p(math.expm1(epsilon) / eta)


def _subsample(batch: Batch, eta: float, rng: Rng) -> Batch:
    """Poisson subsample (each row kept independently with public rate eta), sorted.  The rows are
    exchangeable, so drawing the coins before sorting (only the kept rows are sorted) has the same law."""
    if eta >= 1.0:
        return batch.sorted()
    keep = rng.bernoulli(eta, batch.values.size)
    csum = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(keep, out=csum[1:])
    return Batch(batch.values[keep], csum[batch.offsets]).sorted()


def mean_range(
    batch: Batch, eps_bound: float, eps_range: float, rng: Rng, beta: float, total_eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """The clipping range of EstimateMean (seed 003 Alg. 8, lines 1-4), add/remove form.

    Cost: eps_bound + eps_range (pure).  IQR bound b on all rows (eps_bound); range with bucket b on a
    Poisson subsample of rate eta = min(1, total_eps) (the paper's m = eps n), run at
    ``ln(1 + (e^eps_range - 1)/eta)`` so that its amplified cost is exactly eps_range.
    """
    eta = min(1.0, total_eps)
    if eta >= 1.0:
        batch.presort()  # the range reads every row, sorted: sort while the matching is drawn
    b = iqr_lower_bound(batch, eps_bound, rng)
    sub = _subsample(batch, eta, rng)
    return infinite_range(sub, b, _amplified(eps_range, eta), rng, beta)


# --------------------------------------------------------------------------- aggregates


def run_count(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_count: n + DLap(1/eps), clamped at 0.  Cost eps (pure): a count has sensitivity 1 under
    add/remove; the clamp is post-processing."""
    return np.maximum(noisy_count(batch, budget.epsilon, rng), 0.0)


def interval_count(batch: Batch, budget: Privacy, params: Params, rng: Rng
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_count_ci: :func:`run_count` and :func:`~dpsql.core.intervals.count_interval` (exact coverage of the
    discrete Laplace; post-processing, cost eps)."""
    v = run_count(batch, budget, params, rng)
    return (v, *count_interval(v, budget.epsilon, params.level))


def run_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_sum, bound-free: clipping range from :func:`mean_range`, then a clipped sum.

    Cost eps (pure) = bound 0.1 + range 0.3 + sum 0.6 (SPLIT_SUM).  The sum of values clipped to the
    released [l, r] moves by at most max(|l|, |r|) when one row is added or removed.
    """
    eps = budget.epsilon
    s = _bounded(batch, params)  # any row order: the sum is exact on its fixed-point grid
    l, r = mean_range(s, SPLIT_SUM["bound"] * eps, SPLIT_SUM["range"] * eps, rng, params.beta, eps)
    l, r = _intersect(l, r, params)
    x = np.clip(s.values, _rows(l, s), _rows(r, s))
    sens = np.maximum(np.abs(l), np.abs(r))
    return release_sum(x, s.offsets, sens, SPLIT_SUM["sum"] * eps, rng)


def run_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean, universal (seed 003 EstimateMean, add/remove form).  NULL when the noisy count < 1.

    Cost eps (pure) = count 0.1 + IQR bound 0.1 + range 0.4 (amplified) + centred clipped sum 0.4.
    The centred sum of ``clip(x, l, r) - (l + r)/2`` moves by at most (r - l)/2 per added or removed
    row; the mean is ``(l + r)/2 + sum / count`` (post-processing), clamped into [l, r].
    """
    eps = budget.epsilon
    sp = SPLIT_MEAN
    s = _bounded(batch, params)  # any row order: the sum is exact on its fixed-point grid
    l, r = mean_range(s, sp["bound"] * eps, sp["range"] * eps, rng, params.beta, eps)
    l, r = _intersect(l, r, params)
    c = l / 2.0 + r / 2.0
    half = r / 2.0 - l / 2.0
    x = np.clip(s.values, _rows(l, s), _rows(r, s)) - _rows(c, s)
    total = release_sum(x, s.offsets, half, sp["sum"] * eps, rng)
    n = noisy_count(s, sp["count"] * eps, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.clip(c + total / np.maximum(n, 1.0), l, r)
    return np.where(n >= 1.0, mean, np.nan)


def run_var(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_var, universal (seed 003 EstimateVariance, add/remove form, with the digest's noise fix).

    Pairs (X, X') of a random matching give Z = (X - X')**2 with E[Z] = 2 sigma**2.  Cost eps (pure) =
    IQR bound 0.1 (bucket b**2 for Z) + radius R of Z on a Poisson subsample of the pairs 0.4
    (amplified) + clipped sum of min(Z, R) 0.4 (sensitivity R: one pair leaves, at most one joins) +
    noisy row count 0.1.  var = sum / count (sum of Z over n/2 pairs estimates n sigma**2), clamped
    at 0; NULL when the noisy count < 2.  The paper's printed Laplace scale 8R/(eps n) would cost
    9eps/8; here the sum's noise is calibrated to its own sensitivity, so the total is eps.
    """
    eps = budget.epsilon
    sp = SPLIT_VAR
    s = _bounded(batch, params)  # pairs and counts only: no sort
    G = s.groups
    pairs = random_pairs(s, rng)
    b0 = iqr_lower_bound(s, sp["bound"] * eps, rng, pairs)
    with np.errstate(over="ignore", under="ignore"):
        bz = np.clip(b0 * b0, B_MIN, B_MAX)
    a, b, pg = pairs
    with np.errstate(over="ignore"):
        z = np.minimum((a - b) ** 2, 2.0**1020)
    zb = _sorted_batch(z, pg, G)
    eta = min(1.0, eps)
    sub = _subsample(zb, eta, rng)
    R = radius(sub, np.zeros(G), bz, _amplified(sp["radius"] * eps, eta), rng, params.beta)
    if params.lower is not None and params.upper is not None:
        with np.errstate(over="ignore"):  # inf when the square overflows: then no cap
            R = np.minimum(R, np.square(np.float64(params.upper - params.lower)))
    zc = np.minimum(zb.values, _rows(R, zb))
    total = release_sum(zc, zb.offsets, R, sp["sum"] * eps, rng)
    n = noisy_count(s, sp["count"] * eps, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.maximum(total / np.maximum(n, 1.0), 0.0)
    return np.where(n >= 2.0, var, np.nan)


def _quantile_grid(
    batch: Batch, params: Params, rng: Rng, eps_bound: float, eps_range: float, beta: float
) -> tuple[Batch, np.ndarray, np.ndarray, np.ndarray]:
    """Shared first steps of the quantile and IQR estimators: the sorted (bounded) batch, the grid
    ``IQR_lb * 2**-20`` (eps_bound) and the private range intersected with public bounds (eps_range)."""
    s = _bounded(batch, params)
    s.presort()  # sorted while the matching of the IQR bound is drawn
    b = np.maximum(iqr_lower_bound(s, eps_bound, rng) * 2.0**-20, B_MIN)
    s = s.sorted()
    l, r = infinite_range(s, b, eps_range, rng, beta)
    l, r = _intersect(l, r, params)
    return s, b, l, r


def run_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile, universal (seed 003: EstimateIQRLowerBound + InfiniteDomainQuantile).

    Cost eps (pure) = IQR bound 0.2 + range 0.4 + exponential mechanism 0.4 (SPLIT_QUANTILE); grid
    ``IQR_lb * 2**-20``.  Never NULL: an empty group still gets a released grid point.
    """
    eps = budget.epsilon
    sp = SPLIT_QUANTILE
    s, b, l, r = _quantile_grid(batch, params, rng, sp["bound"] * eps, sp["range"] * eps, params.beta / 2.0)
    return private_quantile_in(s, l, r, b, float(params.p), sp["em"] * eps, rng, params.beta / 2.0)


def run_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_iqr (seed 003 EstimateIQR with one shared range: a documented deviation).

    Cost eps (pure) = IQR bound 0.2 + range 0.3 + two exponential mechanisms 0.25 each.  Clamped >= 0.
    """
    eps = budget.epsilon
    sp = SPLIT_IQR
    s, b, l, r = _quantile_grid(batch, params, rng, sp["bound"] * eps, sp["range"] * eps, params.beta / 3.0)
    q1 = private_quantile_in(s, l, r, b, 0.25, sp["em"] * eps, rng, params.beta / 3.0)
    q3 = private_quantile_in(s, l, r, b, 0.75, sp["em"] * eps, rng, params.beta / 3.0)
    return np.maximum(q3 - q1, 0.0)


_SRC = "seed 003 (Dong & Yi), add/remove form"
register(Method("count", "laplace", "pure", run_count, "count + discrete Laplace(1/eps)", source="textbook",
                interval=interval_count))
register(Method("sum", "universal", "pure", run_sum, "bound-free clipped sum (private range)", source=_SRC))
register(Method("mean", "universal", "pure", run_mean, "EstimateMean: IQR bound, subsampled range", source=_SRC))
register(Method("var", "universal", "pure", run_var, "EstimateVariance over random pairs", source=_SRC))
register(Method("quantile", "universal", "pure", run_quantile, "IQR bound + InfiniteDomainQuantile", source=_SRC))
register(Method("iqr", "universal", "pure", run_iqr, "EstimateIQR with a shared range", source=_SRC))

