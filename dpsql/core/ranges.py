"""Seed 003's private ranges (Dong & Yi), add/remove form: the building blocks several families share.

The seed's design notes (``seeds/digests/003-universal-estimators.md``) are external material, not in this
repository (docs/methods.md, seed 003, summarises them); :mod:`.universal` has the
re-derivation for add/remove neighbours (no public n, random pairs, Poisson subsampling, grids).  Here: the
random matching (:func:`random_pairs`), the IQR lower bound (:func:`iqr_lower_bound`, Alg. 7), the radius scan
(:func:`radius`, Alg. 3), the finite-domain quantile (:func:`private_quantile_in`, Alg. 2), the infinite-domain
range (:func:`infinite_range`, Alg. 4) and the mean's clipping range (:func:`mean_range`, Alg. 8 lines 1-4).
Each docstring states its cost; the families (:mod:`.universal`, :mod:`.subset`, :mod:`.smooth`,
:mod:`.asymmetric`, :mod:`.scalefree`, :mod:`.clipped`) call them with shares of their budgets.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..noise import Rng
from .batch import Batch
from .helpers import B_MAX, B_MIN, amplified, subsample
from .primitives import (
    MAX_SPAN,
    GridCodes,
    ceil_log2,
    em_target,
    pow2_floor,
    rank_em,
    seg_count_le,
    seg_count_lt,
    svt_scan,
)
from .spending import charge_pure, subsampled

__all__ = [
    "K_UP",
    "K_DOWN",
    "K_RADIUS",
    "random_pairs",
    "iqr_lower_bound",
    "iqr_lower_bound_from",
    "ZERO_GAP",
    "radius",
    "private_quantile_in",
    "infinite_range",
    "mean_range",
]

K_UP = 1102  # upward IQR-bound scan reaches 2**1100 > any gap (values are clamped to +-2**1000)
K_DOWN = 1000  # downward scan stops at 2**-1000 = B_MIN
K_RADIUS = 2010  # 2**(K-2) * B_MIN > 2**1002


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


#: A zero pair gap's weight in :func:`iqr_lower_bound`'s queries when ``ties=True`` (the paper's 13 counts it as a
#: small gap, like any gap <= x; -3 would count it as a large one).
ZERO_GAP = 1


def iqr_lower_bound(
    batch: Batch, epsilon: float, rng: Rng, pairs: tuple | None = None, ties: bool = False
) -> np.ndarray:
    """EstimateIQRLowerBound (seed 003 Alg. 7), add/remove form.  Returns a power of two per group.

    Cost: eps-DP (pure): an upward SVT at eps/2 over x = 2**0, 2**1, ... and, adaptively only when it
    stops at once, a downward SVT at eps/2 over x = 2**0, 2**-1, ...  Each query is
    ``16 #{Y <= x} - 3 |G|`` over the random pair gaps Y, compared with 0 (the paper's
    ``Count >= 3n'/16`` without n).  Proof sketch: under the matching coupling one gap leaves and at
    most one joins, changing the query by -13, +3, or their difference with +13/-3: at most 16; SVT with
    sensitivity 16 is eps/2-DP; two adaptive SVTs compose to eps.  Output floored at ``B_MIN``.

    ``ties=True`` (the scale-free floor): a zero gap adds ``ZERO_GAP`` to a query instead of 13 (the queries
    ``16 #{Y <= x} - 3 |G| - (13 - ZERO_GAP) #{Y = 0}``).  Seed 003 counts a zero gap as small at every x, so
    when more than 3/16 of the pairs are ties the downward scan never stops and the bound is ``B_MIN``, though
    the data may be a few values far apart ({-5, -2, 7}: the scale-free codes then put ~1000 octaves of tiny
    values between -2 and 7).  With weight 1 the scan stops below the smallest non-zero gaps unless zero gaps
    are more than 3/4 of the pairs (a tie block of more than 3/4 of the rows, where ``B_MIN`` is harmless: a
    quantile inside the block is the tie value, at any floor).  Same proof: every gap adds one of
    -3, ``ZERO_GAP``, 13 to a query, a range of 16 for any weight in [-3, 13], so the sensitivity stays 16.
    """
    G = batch.groups
    a, b, pg = pairs if pairs is not None else random_pairs(batch, rng)
    y = np.abs(a - b)
    zeros = np.bincount(pg[y == 0], minlength=G) if ties else None
    return iqr_lower_bound_from(_gap_exponent_counts(y, pg, G), np.bincount(pg, minlength=G), epsilon, rng, zeros)


def iqr_lower_bound_from(
    count_le: Callable[[np.ndarray, np.ndarray], np.ndarray], npairs: np.ndarray, epsilon: float, rng: Rng,
    zeros: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`iqr_lower_bound` from its data summary: ``count_le(g, k)``, #{pair gaps of group g[i] that are
    <= 2**k[j]} (a matrix), and the pairs per group ``npairs`` (a summary route computes both without the
    rows); ``zeros``: the zero gaps per group (``ties=True``; None: seed 003's queries).  The same queries,
    thresholds and draws; cost eps (pure), proof as there."""
    npairs = np.asarray(npairs, dtype=np.int64)
    G = npairs.size
    # 3 |G| + (13 - ZERO_GAP) #{Y = 0}: the query's part that does not depend on x
    base = 3 * npairs if zeros is None else 3 * npairs + (13 - ZERO_GAP) * np.asarray(zeros, dtype=np.int64)

    def up(active: np.ndarray, ks: np.ndarray) -> np.ndarray:
        c = count_le(active, ks - 1)  # x_i = 2**(i-1)
        return 16 * c - base[active][:, None]

    def down(active: np.ndarray, ks: np.ndarray) -> np.ndarray:
        c = count_le(active, -(ks - 1))  # x_j = 2**-(j-1)
        return base[active][:, None] - 16 * c

    i = svt_scan(up, G, 0, 16, epsilon / 2.0, rng, K_UP)
    with np.errstate(over="ignore"):
        out = np.ldexp(1.0, (i - 2).astype(np.int64))
    need = np.flatnonzero(i <= 1)
    if need.size:
        j = svt_scan(lambda act, ks: down(need[act], ks), need.size, 0, 16, epsilon / 2.0, rng, K_DOWN)
        out[need] = np.ldexp(1.0, -j.astype(np.int64))
    else:  # spent all the same: on a neighbouring dataset the downward scan may run
        charge_pure(epsilon / 2.0, "svt (downward scan, not needed here)")
    return np.clip(out, B_MIN, B_MAX)


def _step(b: np.ndarray, k: np.ndarray, fine: bool) -> np.ndarray:
    """``b 2**k`` or, fine, ``b 2**(k/2)`` (odd k: times sqrt 2, rounded once)."""
    k = np.asarray(k, dtype=np.int64)
    if not fine:
        return np.ldexp(b, k)
    x = np.ldexp(b, k // 2)
    return np.where(k % 2 == 1, x * np.sqrt(2.0), x)


def drift_start(b: np.ndarray, anchor: np.ndarray, fine: bool) -> np.ndarray:
    """The ladder step ``k - 2`` from which :func:`radius`'s queries drift: the first whose radius ``b 2**(k-2)``
    (``b 2**((k-2)/2)`` fine) reaches ``anchor``; 0 where the anchor is at or below ``b``.  A function of public and
    released values only."""
    with np.errstate(divide="ignore", invalid="ignore"):  # in logs: anchor / b may overflow
        steps = (np.log2(np.maximum(anchor, b)) - np.log2(b)) * (2.0 if fine else 1.0)
    return np.clip(np.ceil(steps), 0, 4 * K_RADIUS).astype(np.int64)


def drift_term(k: np.ndarray, ka: np.ndarray, drift: int) -> np.ndarray:
    """``drift j`` for ladder index k, j = its steps past the anchor's step ``ka`` (:func:`drift_start`; 0 before):
    the term :func:`radius`'s drifted queries add (broadcasts)."""
    return drift * np.maximum(k - 2 - ka, 0)


def radius(
    batch: Batch, center: np.ndarray, b: np.ndarray, epsilon: float, rng: Rng, beta: float,
    outside: float | None = None, monotone: bool = False, fine: bool = False,
    anchor: np.ndarray | None = None, drift: int = 0, steps: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """InfiniteDomainRadius (seed 003 Alg. 3) around ``center`` with bucket ``b`` (powers of two).

    Scans x_1 = 0, x_i = 2**(i-2) b and stops at the first i where (noisily) at most ``outside``
    points (default the paper's ``(6/eps) ln(2/beta)``) lie outside ``[center - x_i, center + x_i]``.
    Cost: eps-DP (pure): one SVT over the queries ``-#outside``, each of sensitivity 1 under add/remove
    (a row is outside or not), threshold public.  n is never used.  The queries are monotone (adding a
    row moves every ``-#outside`` by 0 or -1), so ``monotone=True`` may use the halved query noise of
    :func:`~dpsql.core.primitives.svt_scan`.  ``fine=True`` scans ``x_i = 2**((i-2)/2) b`` (steps of
    sqrt 2, twice the queries: the SVT's cost does not depend on their number), so the released radius
    overshoots the needed one by at most sqrt 2 instead of 2.

    ``anchor`` (per group, a released value) and ``drift`` (rows, public): every step beyond the anchor
    (:func:`drift_start`) adds ``drift`` to the query, ``-#outside + drift j`` at the j-th step past it: the
    threshold falls by ``drift`` rows per step there.  Past the data every ``-#outside`` is 0 and only noise
    stops the scan, so a large threshold draw ran it 2**20 and more past the data; with the drift it stops within
    a few steps of the anchor.  Privacy unchanged: the added term is the same on neighbouring datasets (public
    given released values), so each query keeps sensitivity 1 and its monotonicity (an AboveThreshold with
    per-query thresholds fixed in advance is the same proof).  ``steps=True`` also returns ``j`` for the released
    radius (0 before the anchor): about ``outside + drift j`` rows lie outside it.
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
        if ka is not None:
            outside = outside - drift_term(kk, ka[g], drift)
        return -outside.reshape(active.size, ks.size)

    ka = None if anchor is None or drift == 0 else drift_start(b, anchor, fine)
    i = svt_scan(q, G, thr, 1, epsilon, rng, 2 * K_RADIUS if fine else K_RADIUS, monotone=monotone)
    with np.errstate(over="ignore"):
        r = np.where(i == 1, 0.0, _step(b, i - 2, fine))
    r = np.minimum(r, 2.0**1002)
    if not steps:
        return r
    return r, (np.zeros(G, dtype=np.int64) if ka is None else drift_term(i, ka, 1))


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
    with subsampled(eta, "range"):
        sub = subsample(batch, eta, rng)
        return infinite_range(sub, b, amplified(eps_range, eta), rng, beta)
