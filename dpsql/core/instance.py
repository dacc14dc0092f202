"""Instance-optimal mean estimation (Huang, Liang & Yi, NeurIPS 2021; seed 004), one-dimensional, add/remove form.

"The digest" below is the seed's design notes (``seeds/digests/004-instance-optimal-mean.md``): external material,
not in this repository; docs/methods.md (seed 004) summarises the method.  In one dimension the paper's Hadamard
rotation is a random sign flip, which commutes with the median and the symmetric clip, so it is dropped (digest
3.6).  Three mechanisms:

* **PrivQuant** (paper 3.2, Alg. 1, box reconstructed in the digest): a noisy binary search over an
  ordered integer domain.  Each step asks one noisy count and halves the interval; ``T`` steps, each
  charged ``1/T`` of the step budget (``T`` fixed from the public domain before looking at the data).
* **CM** (``clipped_rank``; paper 3.4, Theorem 2): clip ``|x|`` at a private quantile with the optimal
  clipping rank, then a noisy clipped mean.  Error ~ r(D)/n: not shift invariant.
* **Shifted-CM** (``shifted_cm``; paper 3.5, Theorem 3): a private median ``c`` first, then CM on
  ``x - c``.  Error ~ w(D)/n = (max - min)/n.

Both in the paper's Gaussian zCDP form (``*_gauss``, discrete Gaussian noise) and in a pure eps-DP
form with discrete Laplace noise in every step.

Re-derivations for add/remove neighbours (the paper is replace-one with a public n):

* *Quantile queries without n.*  A target rank ``p n`` is searched with the query
  ``Q(y) = #{x <= y} - p n = (1 - p) #{x <= y} - p #{x > y}``: adding one row moves it by ``1 - p`` or
  ``-p``, so its sensitivity is ``max(p, 1 - p)`` (1/2 for the median: half the noise of a count).
  n appears inside the query but is never released.
* *Clipping rank without n.*  The paper's rank ``n - k`` (clip ``k`` points) is the query
  ``Q(y) = k - #{x > y}`` (points *outside*; sensitivity 1), so the rank needs no n either.
* *The optimal k* (Lemma 3 redone): the clipped **sum** has sensitivity C (not 2C/n), so its noise has
  mean absolute value <= C/sqrt(2 rho_N) (Gaussian) or C/eps_N (Laplace); setting the derivative of
  ``#{|x| > C} + C * that`` to zero clips ``1/sqrt(2 rho_N)`` resp. ``1/eps_N`` points.  As the digest
  notes (3.6, 7.5), in one dimension the rank margin ``tau`` of the quantile step dominates:
  ``k = max(k_opt, tau)``, the paper's ``max{sqrt(2d/rho), tau}``.  tau is the rank-noise bound
  ``sigma sqrt(2 ln(2T/beta))`` (Gaussian, digest 7.5) or ``t ln(2T/beta)`` (Laplace), with
  ``beta = min(beta :=, BETA_RANK)`` (see BETA_RANK).
* *The denominator*: a noisy count with a declared share.  Because the sum is centred at ``c``, the
  count's error multiplies only ``mean - c`` (small after the shift).  Shifted-CM returns NULL when the
  noisy count is below ``2 tau_med`` (Theorem 3's condition n = Omega(tau)), CM when it is below 1.
* *Domain.*  Without ``lower``/``upper`` (the bound-free default) the search runs over the order-preserving
  integer codes of float64 (the IEEE-754 bit pattern, sign-folded): the domain is every double in
  ``[-2**1000, 2**1000]``, truncated to 36 mantissa bits (``T = 48`` steps; a relative resolution of
  1.5e-11, which matters only when |mean| exceeds 1e10 times the spread), which needs no range step and
  no budget for one.  With ``lower``/``upper`` the values are clamped and the median search runs over
  the paper's grid of ``2**32`` buckets of ``[lower, upper]`` (``T = 32``; Remark 1's quantisation).
  The clipping radius is searched, in both modes, over float64 codes of ``[0, 2**1001]`` truncated to
  6 mantissa bits (a relative resolution of 2**-6 on C, rounded up; ``T = 17``): the radius needs
  relative, not absolute, precision, and fewer steps mean less noise per step.

Floating-point safety.  Every released number is an integer code of a data-independent finite set
(PrivQuant's outputs), an integer plus discrete noise (count), or an integer number of power-of-two grid
steps plus discrete noise (the fixed-point clipped sum, as in :func:`~.primitives.release_sum`).  The
noisy comparisons use discrete noise against a real threshold on a grid of ``1/KG`` of the query
sensitivity, with the sensitivity inflated by one grid step for rounding (see :func:`_noisy_at_least`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..noise import Rng, discrete_gaussian, discrete_laplace
from .accounting import Privacy
from .batch import DOMAIN, Batch
from .helpers import bounded
from .primitives import noisy_count, pow2_floor, release_sum
from .registry import Method, Params
from .spending import charge_pure, charge_zcdp

__all__ = [
    "float_codes",
    "float_decode",
    "privquant",
    "cm_mean",
    "SPLIT_CM",
    "SPLIT_SCM",
    "SPLIT_CM_GAUSS",
    "SPLIT_SCM_GAUSS",
]

#: the rank margin's failure probability is min(beta, BETA_RANK): in the bound-free domain a failed
#: comparison above the data sends the radius to an astronomically large value (not a mild error), so
#: the margin is set for rare failures (beta = 1/3 gave ~2% catastrophic outputs in the pure variant)
BETA_RANK = 1e-3
#: comparisons are made on a grid of (query sensitivity) / KG
KG = 1024
#: with public bounds, PrivQuant searches 2**BOUNDED_BITS buckets of [lower, upper]
BOUNDED_BITS = 32

# budget splits (shares of eps, resp. of rho).  Gaussian: the paper's 1/4 (median) + 3/16 (radius) +
# 9/16 (noise), with 1/16 of the noise share moved to the count.  Pure: chosen by the benchmark.
SPLIT_CM_GAUSS = {"radius": 1 / 4, "count": 1 / 16, "sum": 11 / 16}
SPLIT_SCM_GAUSS = {"median": 1 / 4, "radius": 3 / 16, "count": 1 / 16, "sum": 1 / 2}
SPLIT_CM = {"radius": 0.4, "count": 0.1, "sum": 0.5}
SPLIT_SCM = {"median": 0.2, "radius": 0.4, "count": 0.05, "sum": 0.35}

#: the clipping radius is searched with this many mantissa bits (relative resolution 2**-6: the radius
#: only sets the clip and the noise scale, so 1.6% is plenty); T = 17 steps instead of 63
RADIUS_BITS = 6
_RSHIFT = 52 - RADIUS_BITS
#: centres and quantiles are searched with this many mantissa bits (relative resolution 2**-36, about
#: 1.5e-11 of |value|; fine unless |mean| / spread exceeds ~1e10); T = 48 steps instead of 64
VALUE_BITS = 36
_VSHIFT = 52 - VALUE_BITS

_SIGN = np.uint64(1 << 63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


# --------------------------------------------------------------------------- integer codes


def float_codes(x: np.ndarray) -> np.ndarray:
    """Order-preserving uint64 codes of float64 values (x < y  <=>  code(x) < code(y); -0.0 == 0.0)."""
    bits = (np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)
    neg = (bits & _SIGN) != 0
    return np.where(neg, bits ^ _ALL, bits | _SIGN)


def float_decode(codes: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_codes`."""
    c = np.asarray(codes, dtype=np.uint64)
    pos = (c & _SIGN) != 0
    return np.where(pos, c ^ _SIGN, c ^ _ALL).view(np.float64)


@dataclass(frozen=True)
class _Noise:
    """The noise of one PrivQuant run: ``notion`` 'pure' (eps) or 'zcdp' (rho) for the whole search."""

    notion: str
    budget: float

    def rank_scale(self, T: int, s: float) -> float:
        """Scale of the noise of each comparison in query units: Laplace t, or Gaussian sigma."""
        s = s * (1.0 + 1.0 / KG)
        if self.notion == "pure":
            return s * T / self.budget
        return s * math.sqrt(T / (2.0 * self.budget))

    def tau(self, T: int, s: float, beta: float) -> float:
        """Rank error bound: all T comparisons are within tau of the truth with probability >= 1 - beta."""
        t = self.rank_scale(T, s)
        if T == 0:
            return 0.0
        if self.notion == "pure":
            return t * math.log(2.0 * T / beta)
        return t * math.sqrt(2.0 * math.log(2.0 * T / beta))


def _noisy_at_least(q: np.ndarray, s: float, T: int, noise: _Noise, rng: Rng) -> np.ndarray:
    """The bits ``[q + Z >= 0]`` for queries ``q`` of sensitivity ``s``, each (budget / T)-private.

    ``q`` is real (e.g. ``#{x <= y} - n/2``).  With ``h = s / KG``, the bit is ``[Z' >= -q / h]`` for an
    integer ``Z'`` = discrete Laplace of scale ``(KG + 1) T / eps`` (pure) or discrete Gaussian of sigma
    ``(KG + 1) sqrt(T / (2 rho))`` (zCDP); ``[Z' >= a] = [Z' >= ceil(a)]`` and ``ceil(-q / h)`` moves by
    at most KG integers when a row is added or removed (``|dq| <= s``), plus one for float rounding.
    So each bit is post-processing of an integer query with sensitivity KG + 1 plus matching discrete
    noise: (eps/T)-DP, resp. (rho/T)-zCDP.
    """
    h = s / KG
    n = q.size
    if noise.notion == "pure":
        charge_pure(noise.budget / T, "PrivQuant comparison")
        z = discrete_laplace((KG + 1.0) * T / noise.budget, rng, n)
    else:
        charge_zcdp(noise.budget / T, "PrivQuant comparison (discrete Gaussian)")
        z = discrete_gaussian((KG + 1.0) * math.sqrt(T / (2.0 * noise.budget)), rng, n)
    return z.astype(np.float64) >= -(q / h)


def _seg_count_le(codes: np.ndarray, offsets: np.ndarray, t: np.ndarray) -> np.ndarray:
    """#{code <= t[g]} in every group g (codes sorted within groups): a vectorised bisection."""
    lo = offsets[:-1].copy()
    hi = offsets[1:].copy()
    start = offsets[:-1]
    act = np.flatnonzero(lo < hi)
    while act.size:
        mid = (lo[act] + hi[act]) // 2
        le = codes[mid] <= t[act]
        lo[act[le]] = mid[le] + 1
        hi[act[~le]] = mid[~le]
        act = act[lo[act] < hi[act]]
    return lo - start


def privquant(
    codes: np.ndarray,
    offsets: np.ndarray,
    lo: int,
    hi: int,
    target: np.ndarray | None,
    p: float,
    k: float,
    s: float,
    noise: _Noise,
    rng: Rng,
) -> np.ndarray:
    """PrivQuant (seed 004 Alg. 1) on every group at once, over the integer domain ``[lo, hi]`` (uint64).

    ``codes`` (uint64) are sorted within groups and lie in ``[lo, hi]``.  Searches the smallest ``y``
    with (noisily) ``Q(y) = #{x <= y} - p n + k >= 0`` -- or ``#{x <= y} - target[g]`` when ``target`` is
    given (its rank target must move by a value in ``[0, 1]`` when a row is added, ``s = 1``).  The caller
    states the sensitivity ``s`` of Q (``max(p, 1 - p)`` for ``p n - k``; 1 for ``n - k``, i.e. ``p = 1``).

    Cost: ``noise.budget`` (eps, pure; or rho, zCDP): ``T = bit_length(hi - lo)`` adaptive comparisons,
    each (budget/T)-private (:func:`_noisy_at_least`), fixed T.  Returns uint64 codes.
    """
    G = offsets.size - 1
    T = (int(hi) - int(lo)).bit_length()
    left = np.full(G, lo, dtype=np.uint64)
    right = np.full(G, hi, dtype=np.uint64)
    n = np.diff(offsets).astype(np.float64)
    for _ in range(T):
        mid = left + (right - left) // np.uint64(2)
        c = _seg_count_le(codes, offsets, mid).astype(np.float64)
        q = c - target if target is not None else c - p * n + k
        go_left = _noisy_at_least(q, s, T, noise, rng)
        open_ = left < right
        right = np.where(open_ & go_left, mid, right)
        left = np.where(open_ & ~go_left, mid + np.uint64(1), left)
    return left


# --------------------------------------------------------------------------- domains


@dataclass(frozen=True)
class _Domain:
    """Public integer coding of values: float64 codes (bound-free) or a grid of [lower, upper]."""

    lower: float | None = None
    alpha: float = 0.0

    @classmethod
    def of(cls, params: Params) -> _Domain:
        if params.lower is None or params.upper is None:
            return cls()
        width = max(params.upper - params.lower, 2.0**-1000)
        alpha = float(pow2_floor(np.array(width))) * 2.0 ** (1 - BOUNDED_BITS)  # width/alpha <= 2**BITS
        return cls(float(params.lower), alpha)

    @property
    def bounded(self) -> bool:
        return self.lower is not None

    # values (centres, quantiles)
    def value_range(self) -> tuple[int, int]:
        if self.bounded:
            return 0, 2**BOUNDED_BITS - 1
        return int(float_codes(np.array(-DOMAIN))) >> _VSHIFT, int(float_codes(np.array(DOMAIN))) >> _VSHIFT

    def encode_value(self, x: np.ndarray) -> np.ndarray:
        if self.bounded:
            k = np.floor((x - self.lower) / self.alpha)
            return np.clip(k, 0, 2**BOUNDED_BITS - 1).astype(np.uint64)
        return float_codes(x) >> np.uint64(_VSHIFT)

    def decode_value(self, c: np.ndarray) -> np.ndarray:
        """The middle of the code's bucket."""
        if self.bounded:
            return self.lower + (c.astype(np.float64) + 0.5) * self.alpha
        return float_decode((c.astype(np.uint64) << np.uint64(_VSHIFT)) | np.uint64(1 << (_VSHIFT - 1)))

    # non-negative distances (radii): float64 codes truncated to RADIUS_BITS mantissa bits, in both modes
    @staticmethod
    def radius_range() -> tuple[int, int]:
        return 0, int(float_codes(np.array(2.0 * DOMAIN)) - _SIGN) >> _RSHIFT

    @staticmethod
    def encode_radius(d: np.ndarray) -> np.ndarray:
        return (float_codes(np.minimum(d, 2.0 * DOMAIN)) - _SIGN) >> np.uint64(_RSHIFT)

    @staticmethod
    def decode_radius(c: np.ndarray) -> np.ndarray:
        """The largest double whose code is <= c: codes <= c decode to distances <= the returned radius."""
        top = ((c.astype(np.uint64) + np.uint64(1)) << np.uint64(_RSHIFT)) - np.uint64(1)
        return float_decode(top + _SIGN)


def _sorted_codes(values: np.ndarray, gid: np.ndarray, offsets: np.ndarray, enc) -> np.ndarray:
    """Codes of ``values`` sorted within groups (offsets unchanged)."""
    codes = enc(values)
    if codes.size == 0:
        return codes
    return codes[np.lexsort((codes, gid))]


# --------------------------------------------------------------------------- mechanisms


def _release_sum_gauss(values: np.ndarray, offsets: np.ndarray, sensitivity: np.ndarray, rho: float, rng: Rng):
    """Per-group sum of ``values`` (``|v| <= sensitivity[g]``) + discrete Gaussian on a fixed-point grid.

    Grid ``gamma = 2**(floor(log2 sens) - 20)``; each value rounds to an integer ``k`` with
    ``|k| <= sens/gamma + 1/2``, so the exact int64 sum moves by at most ``D = ceil(sens/gamma + 1/2)``
    steps when a row is added or removed; noise ``N_Z(0, D**2 / (2 rho))``: rho-zCDP.  Output on the grid.
    """
    G = offsets.size - 1
    sens = np.broadcast_to(np.maximum(np.asarray(sensitivity, dtype=np.float64), 2.0**-1000), (G,))
    gamma = pow2_floor(sens) * 2.0**-20
    gid = np.repeat(np.arange(G), np.diff(offsets))
    v = np.clip(values, -sens[gid], sens[gid])
    k = np.rint(v / gamma[gid]).astype(np.int64)
    csum = np.zeros(k.size + 1, dtype=np.int64)
    np.cumsum(k, out=csum[1:])
    sums = csum[offsets[1:]] - csum[offsets[:-1]]
    steps = np.ceil(sens / gamma + 0.5)
    charge_zcdp(rho, "sum (discrete Gaussian)")
    noise = discrete_gaussian(steps / math.sqrt(2.0 * rho), rng)
    return (sums + noise).astype(np.float64) * gamma


def _count(batch: Batch, notion: str, budget: float, rng: Rng) -> np.ndarray:
    """n + discrete Laplace(1/eps) or + N_Z(0, 1/(2 rho)): sensitivity 1 under add/remove."""
    if notion == "pure":
        return noisy_count(batch, budget, rng)
    charge_zcdp(budget, "count (discrete Gaussian)")
    return (batch.sizes + discrete_gaussian(1.0 / math.sqrt(2.0 * budget), rng, batch.groups)).astype(np.float64)


def _sum(x: np.ndarray, offsets: np.ndarray, C: np.ndarray, notion: str, budget: float, rng: Rng) -> np.ndarray:
    if notion == "pure":
        return release_sum(x, offsets, C, budget, rng)
    return _release_sum_gauss(x, offsets, C, budget, rng)


def _k_opt(notion: str, budget_sum: float) -> float:
    """Clip count minimising Lemma 3's bound for a sum of sensitivity C (add/remove; module docstring)."""
    return 1.0 / budget_sum if notion == "pure" else 1.0 / math.sqrt(2.0 * budget_sum)


def private_median(s: Batch, dom: _Domain, noise: _Noise, rng: Rng) -> np.ndarray:
    """PrivQuant median of each group (query ``#{x <= y} - n/2``, sensitivity 1/2)."""
    lo, hi = dom.value_range()
    codes = dom.encode_value(s.values)  # monotone map: still sorted within groups
    c = privquant(codes, s.offsets, lo, hi, None, 0.5, 0.0, 0.5, noise, rng)
    return dom.decode_value(c)


def clip_radius(
    s: Batch, center: np.ndarray, dom: _Domain, noise: _Noise, k_opt: float, beta: float, rng: Rng
) -> np.ndarray:
    """PrivQuant for the clipping radius around ``center``: the smallest C with (noisily)
    ``#{|x - center| > C} <= k``, ``k = max(k_opt, tau)`` (query ``#{d <= y} - n + k``, sensitivity 1)."""
    lo, hi = dom.radius_range()
    T = (hi - lo).bit_length()
    k = max(k_opt, noise.tau(T, 1.0, min(beta, BETA_RANK)))
    gid = s.group_ids
    d = np.abs(s.values - center[gid])
    codes = _sorted_codes(d, gid, s.offsets, dom.encode_radius)
    c = privquant(codes, s.offsets, lo, hi, None, 1.0, k, 1.0, noise, rng)
    return dom.decode_radius(c)


def cm_mean(batch: Batch, params: Params, notion: str, budget: float, split: dict, rng: Rng) -> np.ndarray:
    """CM (``split`` without 'median': centre 0) or Shifted-CM (with 'median'), pure or zCDP.

    Cost ``budget`` = sum of the split's shares: median (PrivQuant), radius (PrivQuant on the per-row
    distances ``|x - c|``, a fixed map given the released c), count (sensitivity 1) and the centred
    clipped sum ``sum clip(x - c, -C, C)`` (sensitivity C: one row adds or removes one term).  Adaptive
    sequential composition; everything after is post-processing:
    ``mean = c + sum / max(count, 1)``, clamped into ``[c - C, c + C]`` (where the clipped mean lies) and
    into ``[lower, upper]`` when given.  NULL when the noisy count is below 1 (CM), resp. below
    ``2 tau_med`` (Shifted-CM: the paper's condition n = Omega(tau) of Theorem 3, with the median's rank
    margin at ``beta :=``; below it the private median is not reliably inside the data, and a centre far
    outside would give astronomically large errors).  Post-processing of the released count.
    """
    s = bounded(batch, params).sorted()
    G = s.groups
    dom = _Domain.of(params)
    n_min = 1.0
    if "median" in split:
        med_noise = _Noise(notion, split["median"] * budget)
        c = private_median(s, dom, med_noise, rng)
        lo, hi = dom.value_range()
        n_min = max(1.0, 2.0 * med_noise.tau((hi - lo).bit_length(), 0.5, params.beta))
    else:
        c = np.zeros(G)
    b_sum = split["sum"] * budget
    C = clip_radius(s, c, dom, _Noise(notion, split["radius"] * budget), _k_opt(notion, b_sum), params.beta, rng)
    C = np.minimum(C, 2.0 * DOMAIN)
    gid = s.group_ids
    x = np.clip(s.values - c[gid], -C[gid], C[gid])
    total = _sum(x, s.offsets, C, notion, b_sum, rng)
    n = _count(s, notion, split["count"] * budget, rng)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean = c + np.clip(total / np.maximum(n, 1.0), -C, C)
    if params.lower is not None:
        mean = np.maximum(mean, params.lower)
    if params.upper is not None:
        mean = np.minimum(mean, params.upper)
    return np.where(n >= n_min, mean, np.nan)


def _quantile(batch: Batch, params: Params, notion: str, budget: float, rng: Rng) -> np.ndarray:
    """PrivQuant as dp_quantile.  For p = 1/2 the query is ``#{x <= y} - n/2`` (sensitivity 1/2); else the
    rank target ``p n`` is clamped into ``[tau, n - tau]`` (as :func:`~.primitives.em_target`: it moves
    by a value in [0, 1] per added row, so the query has sensitivity 1), which keeps extreme p inside
    the data instead of wandering below the minimum."""
    s = bounded(batch, params).sorted()
    dom = _Domain.of(params)
    lo, hi = dom.value_range()
    T = (hi - lo).bit_length()
    noise = _Noise(notion, budget)
    codes = dom.encode_value(s.values)
    p = float(params.p)
    if p == 0.5:
        c = privquant(codes, s.offsets, lo, hi, None, 0.5, 0.0, 0.5, noise, rng)
    else:
        n = s.sizes.astype(np.float64)
        margin = noise.tau(T, 1.0, min(params.beta, BETA_RANK))
        target = np.clip(p * n, np.minimum(margin, n / 2.0), np.maximum(n - margin, n / 2.0))
        c = privquant(codes, s.offsets, lo, hi, target, p, 0.0, 1.0, noise, rng)
    out = dom.decode_value(c)
    if params.upper is not None:
        out = np.minimum(out, params.upper)
    return out


# --------------------------------------------------------------------------- registry


def run_clipped_rank(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean 'clipped_rank' (CM, Theorem 2, pure eps-DP with discrete Laplace noise).

    Cost eps = radius 0.4 (PrivQuant on |x|, Laplace, T = 17) + count 0.1 + clipped sum 0.5.
    C is the point with (noisily) k = max(1/eps_sum, tau) points of |x| above it.  Not shift invariant.
    """
    return cm_mean(batch, params, "pure", budget.epsilon, SPLIT_CM, rng)


def run_clipped_rank_gauss(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean 'clipped_rank_gauss' (CM, Theorem 2, rho-zCDP): radius rho/4 (the paper's), count
    rho/16, clipped sum 11 rho/16 (discrete Gaussian)."""
    return cm_mean(batch, params, "zcdp", budget.rho, SPLIT_CM_GAUSS, rng)


def run_shifted_cm(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean 'shifted_cm' (Shifted-CM, Theorem 3, pure eps-DP with discrete Laplace noise).

    Cost eps = median 0.2 + radius 0.4 + count 0.05 + centred clipped sum 0.35.  Error ~ (max - min)/n.
    """
    return cm_mean(batch, params, "pure", budget.epsilon, SPLIT_SCM, rng)


def run_shifted_cm_gauss(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean 'shifted_cm_gauss' (Shifted-CM, Theorem 3, rho-zCDP): median rho/4, radius 3rho/16 (the
    paper's), count rho/16, centred clipped sum rho/2 (the paper's 9rho/16 minus the count)."""
    return cm_mean(batch, params, "zcdp", budget.rho, SPLIT_SCM_GAUSS, rng)


def run_privquant(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile 'privquant': noisy binary search, pure eps-DP (T Laplace comparisons of eps/T)."""
    return _quantile(batch, params, "pure", budget.epsilon, rng)


def run_privquant_gauss(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile 'privquant_gauss': noisy binary search, rho-zCDP (T Gaussian comparisons of rho/T)."""
    return _quantile(batch, params, "zcdp", budget.rho, rng)


_SRC = "seed 004 (Huang, Liang & Yi), add/remove form"
METHODS = (
    Method("mean", "clipped_rank", "pure", run_clipped_rank,
           "CM: clip |x| at a PrivQuant radius with the optimal rank; Laplace", source=_SRC + ", Thm 2"),
    Method("mean", "clipped_rank_gauss", "zcdp", run_clipped_rank_gauss,
           "CM: clip |x| at a PrivQuant radius with the optimal rank; Gaussian", source=_SRC + ", Thm 2"),
    Method("mean", "shifted_cm", "pure", run_shifted_cm,
           "Shifted-CM: private median, then CM around it; Laplace", source=_SRC + ", Thm 3"),
    Method("mean", "shifted_cm_gauss", "zcdp", run_shifted_cm_gauss,
           "Shifted-CM: private median, then CM around it; Gaussian", source=_SRC + ", Thm 3"),
    Method("quantile", "privquant", "pure", run_privquant,
           "PrivQuant noisy binary search over float64 codes; Laplace", source=_SRC + ", Alg 1"),
    Method("quantile", "privquant_gauss", "zcdp", run_privquant_gauss,
           "PrivQuant noisy binary search over float64 codes; Gaussian", source=_SRC + ", Alg 1"),
)
