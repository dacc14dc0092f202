"""Trimmed mean with smooth sensitivity (Bun & Steinke 2019, seed 001), re-derived for add/remove.

"The digest" below is the seed's design notes (``seeds/digests/001-smooth-sensitivity.md``): external material, not
in this repository; docs/methods.md (seed 001) summarises the method.  The release is

    trim_m(x) + (S(x) / s) * Z

with ``S`` a t-smooth upper bound on the local sensitivity of the trimmed mean of data clamped to
[a, b], ``Z`` one of the paper's noise shapes and ``(s, t, shape)`` calibrated so that the result is
``1/2 eps^2``-CDP (= rho-zCDP with rho = eps^2/2: LLN, ULN, arsinh-normal) or pure eps-DP (Student's t).

Add/remove re-derivation (the paper's Prop. 11 is for replace-one with a public n).  m is a public
number (computed from a noisy count), so n varies between neighbours.  Define, for a multiset x of size
n in [a, b] and w = n - 2m, f(x) = mean of the order statistics x_(m+1..n-m) when w >= 1 and
f(x) = (a + b)/2 otherwise; write P(i) = x_(i), with P(i) = a for i <= 0 and P(i) = b for i > n.

* Adding a value inserts exactly one element u in [P(m), P(n-m+1)] into the window (whatever the
  value); removing a row deletes one element of the window.  So |f(x') - f(x)| <= L(x) :=
  (P(n-m+1) - P(m)) / (w - 1) for w >= 2 (the removal divides by w - 1), and b - a otherwise.
* Let M_d(x) = max_{l=0..d} P(n-m+1+d-l) - P(m-l).  M_d(x) is exactly the largest spread
  P'(n'-m+1) - P'(m) over x' = x plus d added values; removals only shrink that spread.  So every y
  at distance <= k (d additions, r removals, d + r <= k) has L(y) <= B_k(x) := max_{d+r<=k}
  min(b - a, M_d / (w - 1 + d - r)) (b - a when the denominator is < 1).
* B_k(x) <= B_{k+1}(y) for neighbours: adding a row maps the pair (d, r) to (d, r + 1) (M_d grows
  since x is a subset, w - 1 + d - r is unchanged); removing a row maps it to (d + 1, r)
  (M_{d+1}(x - v) >= M_d(x) because x + D = (x - v) + {v} + D).  Hence (NRS07, Lemma 2.3)
  S = max_k e^{-kt} B_k is a t-smooth upper bound for add/remove neighbours.
* Closed form.  For fixed d, e^{-(d+r)t} / (w - 1 + d - r) is log-convex in r, so only r = 0 and the
  end where the window empties matter; the latter terms are all <= e^{-(w-2)t}(b - a), itself
  t-smooth (w moves by one).  With pairs i = m - l, j = n - m + 1 + q (d = l + q):

      S(x) = max( max_{0<=l,q<=m} e^{-(l+q)t} (P(j) - P(i)) / (w - 1 + l + q),  e^{-(w-2)t} (b - a) )

  for w >= 2, and S = b - a for w <= 1.  Compared with replace-one, the denominator shrinks by up to
  one (removals), and the floor is e^{-(w-2)t}(b-a) (the window can empty) besides e^{-2mt}(b-a)/(n-1).
* Computation: F(l, q) = log(P(j) - P(i)) - t(l + q) - log(w - 1 + l + q) is submodular in (l, q)
  (the log-difference term because P is sorted, the last term because -log is concave in l + q), and
  -inf only on a down-set (ties), so the row argmax is non-increasing in l: divide and conquer in
  O(m log m), vectorised across groups level by level (:func:`_dc_max`).

Floating point.  Values are clamped to [a, b] and coded on the power-of-two grid
``gamma = pow2_floor((b - a)/2) 2**-35`` (integers |k| <= 2**36, a fixed monotone per-row map); the
window sum is exact in int64 (split in high and low parts); S is computed exactly from integer
differences.  The release is ``primitives.snap`` on a grid of RELEASE_CODES codes with S inflated to
``S (1 + 2**-30) + 2 RELEASE_CODES``: rounding f to the grid moves it by at most half a grid step and
the float division adds < 2**-14 codes, so the rounded value has local sensitivity <= S + 2 grid,
and S + const is still t-smooth; the output is post-processing (rounding) of the ideal continuous
mechanism on the rounded value, so its support is the grid whatever the data.  This also keeps S > 0
(the digest's underflow leak cannot occur).  The continuous noise shapes are sampled in :mod:`dpsql.noise`
(tail-exact exponentials; normals by Box-Muller with R = sqrt(2E)).

Parameters (never hard-coded).  The paper numerically optimises t per (n, eps, m) and sweeps m on the
true data distribution; we minimise the same objective, trimming variance + E[S^2] Var[Z]/s^2, on a
public planning model: N(0, sigma_hat^2) order statistics with sigma_hat = min(2 x bucket, (b-a)/4)
(bucket = the private IQR-type bound of ``iqr_lower_bound``), n = the conservative noisy count, and the
width b - a (:func:`plan`).  s and the shape come from (eps, t) in closed form (LLN: the cubic
5 eps sigma^3 - 5 t sigma^2 - t = 0; ULN: sigma = max(sqrt 2, sigma_u); arsinh: Prop. 5 with sigma = 1;
Student's t: :func:`student_calibrate`).

Range.  With lower and upper given, [a, b] = [lower, upper] (the data are clamped to it).  Otherwise
[a, b] is seed 003's InfiniteDomainRange (on a Poisson subsample, bucket from ``iqr_lower_bound``, as
in ``mean_range``), intersected with a single given bound.  Error depends on b - a only through
log(b - a) (the floor terms), so loose bounds are cheap; running the private range as well and
intersecting (RANGE_WITH_BOUNDS) was measured worse (benchmarks/results/paper_seed001.md).

Budget: SPLIT_ZCDP (shares of rho) and SPLIT_PURE (shares of eps): noisy count, bucket, range (its
share goes to the main release when both bounds are given), main release.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..noise import (
    Rng,
    arsinh_normal,
    discrete_gaussian,
    discrete_laplace,
    laplace_log_normal,
    student_t3,
    uniform_log_normal,
)
from .accounting import Privacy
from .batch import Batch
from .helpers import amplified, bounded, intersect, subsample
from .primitives import pow2_floor, snap
from .ranges import infinite_range, iqr_lower_bound
from .registry import Method, Params
from .spending import charge_pure, charge_zcdp, subsampled

__all__ = [
    "NoiseFamily",
    "FAMILIES",
    "lln_calibrate",
    "uln_calibrate",
    "arsinh_calibrate",
    "student_calibrate",
    "log_smooth_sensitivity",
    "log_smooth_sensitivity_replace",
    "plan",
    "trimmed_release",
    "release_parts",
    "prepare",
    "SPLIT_ZCDP",
    "SPLIT_PURE",
]

#: budget shares of rho (zCDP methods; a pure eps_i step costs eps_i^2/2, so sqrt(share) of the CDP eps)
SPLIT_ZCDP = {"count": 0.05, "bucket": 0.05, "range": 0.20, "main": 0.70}
#: budget shares of eps (pure method: linear shares leave less to the auxiliary steps, so they get more)
SPLIT_PURE = {"count": 0.05, "bucket": 0.10, "range": 0.30, "main": 0.55}
#: planning scale: sigma_hat = min(BUCKET_SCALE x bucket, width / SCALE_DIV).  For Gaussian data the
#: bucket is in (sigma/12, sigma/3]; over-estimating sigma under-trims (the floor term then dominates)
#: and costs more than under-estimating, so we hedge low (2, not 4; measured on the benchmark panel)
SCALE_DIV = 4.0
BUCKET_SCALE = 2.0
#: run the private range even when lower/upper are given (and intersect).  False (default, measured
#: better in benchmarks/results/paper_seed001.md): with both bounds, use them alone and give the
#: range's share to the main step.
RANGE_WITH_BOUNDS = False
STUDENT_DF = 3  # the paper's degrees of freedom
CODE_SHIFT = 35  # data codes: gamma = pow2_floor(half width) * 2**-35, |code| <= 2**36
RELEASE_CODES = 16.0  # release grid, in codes (2**-31 of the half width)
TINY = 2.0**-1000

# --------------------------------------------------------------------------- noise families


def _bcast(eps: np.ndarray | float, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    e, tt = np.broadcast_arrays(np.asarray(eps, dtype=np.float64), np.asarray(t, dtype=np.float64))
    return e.astype(np.float64), tt.astype(np.float64)


def lln_calibrate(eps: np.ndarray | float, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Laplace log-normal (Prop. 3): 1/2 eps^2-CDP for eps = t/sigma + e^{3 sigma^2/2} s.

    sigma is the positive root of 5 eps sigma^3 - 5 t sigma^2 - t = 0 (minimises the variance
    2 e^{2 sigma^2}/s^2; bracketed in [t/eps, t/eps + (t/(5 eps))^{1/3}], bisection), then
    s = e^{-3 sigma^2/2}(eps - t/sigma).  Returns (s, sigma, V = Var[Z]/s^2).
    """
    e, t = _bcast(eps, t)
    lo = t / e
    hi = lo + np.cbrt(t / (5.0 * e))
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        g = 5.0 * e * mid**3 - 5.0 * t * mid**2 - t
        neg = g < 0
        lo = np.where(neg, mid, lo)
        hi = np.where(neg, hi, mid)
    sigma = hi
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.exp(-1.5 * sigma**2) * (e - t / sigma)
        v = 2.0 * np.exp(2.0 * sigma**2) / s**2
    ok = (s > 0) & np.isfinite(v) & (t > 0)
    return np.where(ok, s, 0.0), sigma, np.where(ok, v, np.inf)


def uln_calibrate(eps: np.ndarray | float, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uniform log-normal (Prop. 4, sigma >= sqrt 2): eps = t/sigma + e^{3 sigma^2/2} sqrt(2/(pi sigma^2)) s.

    sigma = max(sqrt 2, sigma_u), sigma_u = (5t + sqrt(25 t^2 + 20 eps^2))/(10 eps) the unconstrained
    minimiser of the variance (e^{2 sigma^2}/3)/s^2.  Infeasible (V = inf) when t >= sigma eps.
    """
    e, t = _bcast(eps, t)
    sig = np.maximum(math.sqrt(2.0), (5.0 * t + np.sqrt(25.0 * t * t + 20.0 * e * e)) / (10.0 * e))
    diff = e - t / sig
    s = diff * np.exp(-1.5 * sig**2) / np.sqrt(2.0 / (math.pi * sig**2))
    ok = (diff > 0) & (t > 0)
    with np.errstate(divide="ignore"):
        v = np.where(ok, np.exp(2.0 * sig**2) / 3.0 / np.where(ok, s, 1.0) ** 2, np.inf)
    return np.where(ok, s, 0.0), sig, v


def arsinh_calibrate(eps: np.ndarray | float, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arsinh-normal Z = sinh(Y) (Prop. 5: sigma = 1 only, s, t in (0, 1)): eps = 2 sqrt(t) + 1.2 s.

    s = (eps - 2 sqrt t)/1.2, capped just below 1 (a smaller s is more private).  Var[Z] = (e^2 - 1)/2.
    """
    e, t = _bcast(eps, t)
    s = np.minimum((e - 2.0 * np.sqrt(t)) / 1.2, 1.0 - 2.0**-20)
    ok = (s > 0) & (t > 0) & (t < 1)
    v = np.where(ok, (math.e**2 - 1.0) / 2.0 / np.where(ok, s, 1.0) ** 2, np.inf)
    return np.where(ok, s, 0.0), np.ones_like(s), v


def student_calibrate(
    eps: np.ndarray | float, t: np.ndarray | float, d: int = STUDENT_DF
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Student's t with d dof: pure eps-DP for eps = s (d+1)/(2 sqrt d) + d t (derivation in the digest).

    Proof sketch: the output densities on neighbours differ by a shift of at most s (in noise units)
    and a dilation by e^lambda, |lambda| <= t.  |d/dz ln p(z)| = (d+1)|z|/(d + z^2) <= (d+1)/(2 sqrt d)
    bounds the shift's log-ratio; ln(e^{-lambda} p(e^{-lambda} z)/p(z)) lies in [-d|lambda|, d|lambda|]
    because (1 + z^2 e^{-2 lambda}/d)/(1 + z^2/d) lies between 1 and e^{-2 lambda}.  Var[Z] = d/(d-2).
    """
    e, t = _bcast(eps, t)
    s = 2.0 * math.sqrt(d) * (e - d * t) / (d + 1.0)
    ok = (s > 0) & (t > 0)
    v = np.where(ok, (d / (d - 2.0)) / np.where(ok, s, 1.0) ** 2, np.inf)
    return np.where(ok, s, 0.0), np.full_like(s, float(d)), v


@dataclass(frozen=True)
class NoiseFamily:
    """A noise shape with its calibration ``(eps, t) -> (s, shape, V = Var[Z]/s^2)`` and sampler."""

    name: str
    notion: str  # 'zcdp' (eps is the CDP eps, rho = eps^2/2) or 'pure'
    calibrate: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]
    sample: Callable[[np.ndarray, Rng], np.ndarray]


FAMILIES = {
    "lln": NoiseFamily("lln", "zcdp", lln_calibrate, laplace_log_normal),
    "uln": NoiseFamily("uln", "zcdp", uln_calibrate, uniform_log_normal),
    "arsinh": NoiseFamily("arsinh", "zcdp", arsinh_calibrate, lambda shape, rng: arsinh_normal(shape.size, rng)),
    "t": NoiseFamily("t", "pure", student_calibrate, lambda shape, rng: student_t3(shape.size, rng)),
}

# --------------------------------------------------------------------------- smooth sensitivity


def _dc_max(nrows: np.ndarray, ncols: np.ndarray, F: Callable) -> np.ndarray:
    """max over rows l < nrows[k], cols q < ncols[k] of F(k, l, q), for every task k at once.

    Requires the row argmax to be non-increasing in l (F submodular where finite, -inf on a down-set).
    Divide and conquer, level by level: each level evaluates the middle row of every open row interval
    over its column interval; rows above (smaller l) keep columns >= the argmax, rows below <= it.
    An all -inf middle row gives no information: its argmax is taken as the last column.
    """
    K = nrows.size
    best = np.full(K, -np.inf)
    live = (nrows > 0) & (ncols > 0)
    tk = np.flatnonzero(live)
    r_lo = np.zeros(tk.size, dtype=np.int64)
    r_hi = nrows[tk].astype(np.int64) - 1
    c_lo = np.zeros(tk.size, dtype=np.int64)
    c_hi = ncols[tk].astype(np.int64) - 1
    while tk.size:
        mid = (r_lo + r_hi) // 2
        ln = c_hi - c_lo + 1
        starts = np.zeros(tk.size + 1, dtype=np.int64)
        np.cumsum(ln, out=starts[1:])
        rep = np.repeat(np.arange(tk.size), ln)
        q = c_lo[rep] + (np.arange(starts[-1]) - starts[rep])
        vals = F(tk[rep], mid[rep], q)
        segmax = np.maximum.reduceat(vals, starts[:-1])
        hit = np.flatnonzero(vals == segmax[rep])
        first = hit[np.searchsorted(hit, starts[:-1])]
        qs = np.where(np.isneginf(segmax), c_hi, q[first])
        np.maximum.at(best, tk, segmax)
        n_tk = np.concatenate([tk, tk])
        n_rlo = np.concatenate([r_lo, mid + 1])
        n_rhi = np.concatenate([mid - 1, r_hi])
        n_clo = np.concatenate([qs, c_lo])
        n_chi = np.concatenate([c_hi, qs])
        keep = n_rlo <= n_rhi
        tk, r_lo, r_hi, c_lo, c_hi = n_tk[keep], n_rlo[keep], n_rhi[keep], n_clo[keep], n_chi[keep]
    return best


def _pad_accessor(v: np.ndarray, off: np.ndarray, a: np.ndarray, b: np.ndarray, src: np.ndarray) -> Callable:
    n = np.diff(off)

    def P(g: np.ndarray, i: np.ndarray) -> np.ndarray:
        d = src[g]
        ng = n[d]
        idx = off[d] + np.clip(i, 1, np.maximum(ng, 1)) - 1
        val = v[np.clip(idx, 0, max(v.size - 1, 0))] if v.size else np.zeros(idx.size)
        return np.where(i <= 0, a[g], np.where(i > ng, b[g], val))

    return P


def _prep(v, off, m, t, a, b, src):
    G = np.asarray(m).size
    src = np.arange(G) if src is None else np.asarray(src, dtype=np.int64)
    m = np.broadcast_to(np.asarray(m, dtype=np.int64), (G,))
    t = np.broadcast_to(np.asarray(t, dtype=np.float64), (G,))
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), (G,))
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), (G,))
    n = np.diff(np.asarray(off, dtype=np.int64))[src]
    return G, src, m, t, a, b, n


def log_smooth_sensitivity(
    v: np.ndarray,
    off: np.ndarray,
    m: np.ndarray | int,
    t: np.ndarray | float,
    a: np.ndarray | float,
    b: np.ndarray | float,
    src: np.ndarray | None = None,
) -> np.ndarray:
    """log of the add/remove t-smooth sensitivity bound S of the trimmed mean (module docstring).

    ``v`` holds each data group's values sorted and clamped to [a, b]; group g uses data group
    ``src[g]`` (default g) with trimming m[g], smoothing t[g] and bounds a[g], b[g].  -inf when S = 0
    (a == b).
    """
    G, src, m, t, a, b, n = _prep(v, off, m, t, a, b, src)
    w = n - 2 * m
    with np.errstate(divide="ignore"):
        logw = np.log(b - a)
    out = logw.copy()
    act = np.flatnonzero(w >= 2)
    if act.size:
        P = _pad_accessor(v, np.asarray(off, dtype=np.int64), a, b, src)

        def F(k: np.ndarray, l: np.ndarray, q: np.ndarray) -> np.ndarray:
            g = act[k]
            lo = P(g, m[g] - l)
            hi = P(g, n[g] - m[g] + 1 + q)
            with np.errstate(divide="ignore"):
                return np.log(hi - lo) - t[g] * (l + q) - np.log((w[g] - 1 + l + q).astype(np.float64))

        best = _dc_max(m[act] + 1, m[act] + 1, F)
        out[act] = np.maximum(best, logw[act] - (w[act] - 2) * t[act])
    return out


def log_smooth_sensitivity_replace(
    v: np.ndarray,
    off: np.ndarray,
    m: np.ndarray | int,
    t: np.ndarray | float,
    a: np.ndarray | float,
    b: np.ndarray | float,
    src: np.ndarray | None = None,
) -> np.ndarray:
    """log S^t of the paper's Prop. 11 (replace-one neighbours, n fixed; needs n > 2m).

    Used only to reproduce the paper's experiments (benchmarks/paper_seed001.py) and in tests.
    Pairs i = m+1-l, j = n-m+q, l, q in 0..m+1, excluding (0, 0); weight e^{-(l+q-1)t}/(n-2m).
    """
    G, src, m, t, a, b, n = _prep(v, off, m, t, a, b, src)
    w = n - 2 * m
    out = np.full(G, np.nan)
    act = np.flatnonzero(w >= 1)
    if act.size:
        P = _pad_accessor(v, np.asarray(off, dtype=np.int64), a, b, src)

        def F(k: np.ndarray, l: np.ndarray, q: np.ndarray) -> np.ndarray:
            g = act[k]
            lo = P(g, m[g] + 1 - l)
            hi = P(g, n[g] - m[g] + q)
            with np.errstate(divide="ignore"):
                val = np.log(hi - lo) - t[g] * (l + q - 1)
            return np.where((l == 0) & (q == 0), -np.inf, val)

        best = _dc_max(m[act] + 2, m[act] + 2, F)
        out[act] = best - np.log(w[act].astype(np.float64))
    return out


# --------------------------------------------------------------------------- planning


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Upper-tail normal quantiles and the asymptotic trimmed-mean variance factor (public constants).

    Returns (log p, z) with p = P[N > z], and (alpha, T(alpha)) with
    T = (int_{-q}^{q} x^2 phi + 2 alpha q^2)/(1 - 2 alpha)^2, q = Phi^{-1}(1 - alpha) (digest §11.3).
    """
    z = np.linspace(0.0, 37.5, 30001)
    erfc = np.frompyfunc(math.erfc, 1, 1)
    p = (0.5 * erfc(z / math.sqrt(2.0))).astype(np.float64)
    ok = p > 0
    logp, zz = np.log(p[ok])[::-1], z[ok][::-1]  # increasing log p
    zt = z[(z >= 0.1) & (z <= 6.0)]
    al = (0.5 * erfc(zt / math.sqrt(2.0))).astype(np.float64)
    phi = np.exp(-0.5 * zt * zt) / math.sqrt(2.0 * math.pi)
    T = ((1.0 - 2.0 * al) - 2.0 * zt * phi + 2.0 * al * zt * zt) / (1.0 - 2.0 * al) ** 2
    alpha = np.concatenate([[0.0], al[::-1], [0.5]])
    Tv = np.concatenate([[1.0], T[::-1], [math.pi / 2.0]])
    return logp, zz, alpha, Tv


def _upper_q(p: np.ndarray) -> np.ndarray:
    """Phi^{-1}(1 - p) for p in (0, 1/2] (table interpolation in log p)."""
    logp, zz, _, _ = _tables()
    return np.interp(np.log(np.clip(p, 1e-300, 0.5)), logp, zz)


def _trim_factor(alpha: np.ndarray) -> np.ndarray:
    _, _, al, T = _tables()
    return np.interp(alpha, al, T)


_ALPHAS = np.concatenate([[0.0], np.geomspace(1e-4, 0.499, 40)])
_TAUS = np.geomspace(1e-3, 1.0, 32)
_DFRAC = np.array([0.0, 1 / 256, 1 / 128, 1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0])


def plan(
    n_hat: np.ndarray, sigma_hat: np.ndarray, width: np.ndarray, eps: float, family: NoiseFamily, chunk: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Trimming m and smoothing t per group from public quantities only (post-processing).

    Minimises, over m = floor(alpha n_hat) (alpha on a fixed grid, m <= (n_hat - 3)/2) and
    t = eps tau (tau on a fixed log grid), the paper's objective

        sigma_hat^2 T(m/n_hat)/n_hat + V(eps, t) S_plan(m, t)^2

    where T is the asymptotic trimmed-mean variance factor for Gaussian data and S_plan is the
    add/remove smooth sensitivity bound evaluated on N(0, sigma_hat^2) order statistics with the
    padding pairs taken at the worst location in [a, b] (pair spread b - a).
    """
    n0 = np.maximum(np.asarray(n_hat, dtype=np.float64), 1.0)
    W0 = np.maximum(np.asarray(width, dtype=np.float64), TINY)
    # the objective scales with W^2: plan in units of the width (sigma_hat / W in [TINY, 1])
    rel0 = np.clip(np.asarray(sigma_hat, dtype=np.float64) / W0, TINY, 1.0)
    # groups with the same public inputs share one plan
    keys, inv = np.unique(np.stack([n0, rel0], axis=1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    n, sig = keys[:, 0], keys[:, 1]
    W = np.ones_like(n)
    G = n.size
    t_grid = eps * _TAUS
    _, _, V = family.calibrate(eps, t_grid)
    m_out = np.zeros(G, dtype=np.int64)
    t_out = np.full(G, t_grid[0])
    feasible = np.isfinite(V)
    if not feasible.any():
        return m_out[inv], t_out[inv]
    t_grid, V = t_grid[feasible], V[feasible]
    for c0 in range(0, G, chunk):
        sl = slice(c0, min(G, c0 + chunk))
        nn, ww, ss = n[sl, None], W[sl, None], sig[sl, None]
        mmax = np.maximum(np.floor((nn - 3.0) / 2.0), 0.0)
        m = np.minimum(np.floor(_ALPHAS[None, :] * nn), mmax)  # (g, A)
        w = nn - 2.0 * m
        trim = ss**2 * _trim_factor(m / nn) / nn
        # data pairs: (Q(m) + Q(m - d)) sigma / (w - 1 + d), d in [0, m - 1]
        d = np.floor(_DFRAC[None, None, :] * np.maximum(m - 1.0, 0.0)[..., None])  # (g, A, D)
        qm = _upper_q(np.maximum(m, 1.0) / (nn + 1.0))[..., None]
        qd = _upper_q(np.maximum(m[..., None] - d, 1.0) / (nn[..., None] + 1.0))
        den = np.maximum(w[..., None] - 1.0 + d, 1.0)
        with np.errstate(divide="ignore"):
            data = np.log(np.minimum(ss[..., None] * (qm + qd), ww[..., None])) - np.log(den)
        data = np.where((m >= 1)[..., None], data, -np.inf)
        tt = t_grid[None, None, :]
        ld = np.max(data[:, :, None, :] - d[:, :, None, :] * tt[..., None], axis=3)  # (g, A, T)
        lw = np.log(ww)[..., None]
        pad = lw - m[..., None] * tt - np.log(np.maximum(w - 1.0 + m, 1.0))[..., None]
        flo = lw - (w[..., None] - 2.0) * tt
        logS = np.minimum(np.maximum(np.maximum(ld, pad), flo), lw)
        logS = np.where((w < 2)[..., None], lw, logS)
        J = trim[..., None] + V[None, None, :] * np.exp(2.0 * logS)
        flat = J.reshape(J.shape[0], -1).argmin(axis=1)
        ia, it = np.divmod(flat, t_grid.size)
        m_out[sl] = m[np.arange(J.shape[0]), ia].astype(np.int64)
        t_out[sl] = t_grid[it]
    return m_out[inv], t_out[inv]


# --------------------------------------------------------------------------- release


@dataclass
class Parts:
    """The main step before sampling: centre c, code step gamma, trimmed mean f and noise scale (S~/s)
    in codes, and the noise shape, per group (exposed for the benchmark's exact variances)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    gamma: np.ndarray
    f: np.ndarray
    scale: np.ndarray
    shape: np.ndarray


def release_parts(
    s: Batch, a: np.ndarray, b: np.ndarray, m: np.ndarray, t: np.ndarray, eps: float, family: NoiseFamily
) -> Parts:
    """Deterministic part of :func:`trimmed_release` (codes, exact window sums, smooth sensitivity)."""
    G = s.groups
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), (G,))
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), (G,))
    h = b / 2.0 - a / 2.0
    c = a / 2.0 + b / 2.0
    gamma = pow2_floor(np.maximum(h, TINY)) * 2.0**-CODE_SHIFT
    kmax = np.ceil(h / gamma)
    gid = s.group_ids
    x = np.clip(s.values, a[gid], b[gid])
    codes_f = np.clip(np.rint((x - c[gid]) / gamma[gid]), -kmax[gid], kmax[gid])
    codes = codes_f.astype(np.int64)
    n = s.sizes
    m = np.broadcast_to(np.asarray(m, dtype=np.int64), (G,))
    t = np.broadcast_to(np.asarray(t, dtype=np.float64), (G,))
    w = n - 2 * m
    # exact window sums: codes = hi * 2**20 + lo
    hi = codes >> 20
    lo = codes - (hi << 20)
    chi = np.zeros(codes.size + 1, dtype=np.int64)
    clo = np.zeros(codes.size + 1, dtype=np.int64)
    np.cumsum(hi, out=chi[1:])
    np.cumsum(lo, out=clo[1:])
    st = s.offsets[:-1] + np.clip(m, 0, n)
    en = np.maximum(s.offsets[:-1] + np.clip(n - m, 0, n), st)
    ksum = (chi[en] - chi[st]).astype(np.float64) * 2.0**20 + (clo[en] - clo[st]).astype(np.float64)
    f = np.where(w >= 1, ksum / np.maximum(w, 1), 0.0)
    logS = log_smooth_sensitivity(codes_f, s.offsets, m, t, -kmax, kmax)
    S = np.exp(logS) * (1.0 + 2.0**-30) + 2.0 * RELEASE_CODES
    sc, shape, _ = family.calibrate(eps, t)
    with np.errstate(divide="ignore"):
        scale = S / sc
    return Parts(a, b, c, gamma, f, scale, np.asarray(shape, dtype=np.float64))


def trimmed_release(
    s: Batch,
    a: np.ndarray,
    b: np.ndarray,
    m: np.ndarray,
    t: np.ndarray,
    eps: float,
    family: NoiseFamily,
    rng: Rng,
) -> np.ndarray:
    """The main step: trim_m of the data clamped to [a, b] + (S/s) Z, snapped, clamped to [a, b].

    ``s`` is sorted; a, b, m, t are public per group.  Privacy: 1/2 eps^2-CDP (zCDP families) or
    eps-DP (Student's t) for add/remove neighbours (module docstring).
    """
    p = release_parts(s, a, b, m, t, eps, family)
    if family.notion == "pure":
        charge_pure(eps, f"smooth-sensitivity release ({family.name})")
    else:
        charge_zcdp(eps * eps / 2.0, f"smooth-sensitivity release ({family.name}, 1/2 eps^2-CDP)")
    z = family.sample(p.shape, rng)
    with np.errstate(over="ignore", invalid="ignore"):
        out_codes = snap(p.f, p.scale * z, np.full(s.groups, RELEASE_CODES))
        out = p.c + p.gamma * out_codes
    out = np.where(np.isnan(out), p.c, out)
    return np.clip(out, p.a, p.b)


# --------------------------------------------------------------------------- methods


@dataclass
class Prepared:
    """Everything public that the main step needs (released by the count, scale and range steps)."""

    s: Batch
    n_hat: np.ndarray
    a: np.ndarray
    b: np.ndarray
    m: np.ndarray
    t: np.ndarray
    eps_main: float


def prepare(batch: Batch, budget: Privacy, params: Params, rng: Rng, family: NoiseFamily) -> Prepared:
    """Noisy count, IQR-type bucket, range [a, b] (user bounds, else private), then :func:`plan`.

    Costs (SPLIT_ZCDP / SPLIT_PURE; for zCDP a pure eps_i step costs eps_i^2/2):
    count: discrete Gaussian (zCDP) or discrete Laplace (pure), sensitivity 1 under add/remove;
    bucket: :func:`~dpsql.core.ranges.iqr_lower_bound` (pure, counts over random pairs);
    range (only without both bounds, or with RANGE_WITH_BOUNDS): InfiniteDomainRange on a Poisson
    subsample with that bucket, as in :func:`~dpsql.core.ranges.mean_range` (pure, amplified),
    intersected with a single given bound.  With both bounds the range's share goes to the main step.
    The plan uses the conservative count n_hat - 2 sd(count noise), so that the window rarely empties,
    and the scale min(BUCKET_SCALE bucket, width / SCALE_DIV) (for Gaussian data the 3/16-quantile of
    |X - X'| is 0.335 sigma and the bucket is a power of two within a factor 4 below it).
    """
    pure = family.notion == "pure"
    total = budget.epsilon if pure else budget.rho
    sp = SPLIT_PURE if pure else SPLIT_ZCDP

    def eps_of(share: float) -> float:  # a pure eps_i step costs eps_i^2/2 zCDP
        return share * total if pure else math.sqrt(2.0 * share * total)

    s = bounded(batch, params)
    s.presort()  # sorted while the count noise and the matching of the bucket are drawn
    G = s.groups
    if pure:
        lap = 1.0 / eps_of(sp["count"])
        charge_pure(1.0 / lap, "count")  # sensitivity 1, discrete Laplace of scale lap
        n_hat = s.sizes + discrete_laplace(lap, rng, G)
        sd = math.sqrt(2.0) * lap
    else:
        sd = 1.0 / math.sqrt(2.0 * sp["count"] * total)
        charge_zcdp(1.0 / (2.0 * sd * sd), "count (discrete Gaussian)")  # sensitivity 1, sigma sd
        n_hat = s.sizes + discrete_gaussian(sd, rng, G)
    n_hat = n_hat.astype(np.float64)
    # the bucket sets the range's resolution (as in mean_range); a finer one would weaken the median's
    # exponential mechanism (more candidates), a coarser one widens the range
    bucket = iqr_lower_bound(s, eps_of(sp["bucket"]), rng)
    s = s.sorted()
    if params.lower is not None and params.upper is not None and not RANGE_WITH_BOUNDS:
        # user bounds only: the range's share goes to the main step
        a, b = np.full(G, float(params.lower)), np.full(G, float(params.upper))
        eps_main = eps_of(sp["main"] + sp["range"])
        width = 2.0 * np.minimum(b / 2.0 - a / 2.0, 2.0**1019)
        scale = BUCKET_SCALE * bucket
    else:
        eta = min(1.0, eps_of(1.0))
        with subsampled(eta, "range"):
            sub = subsample(s, eta, rng)
            l, r = infinite_range(sub, bucket, amplified(eps_of(sp["range"]), eta), rng, params.beta)
        a, b = intersect(l, r, params)
        eps_main = eps_of(sp["main"])
        width = 2.0 * np.minimum(b / 2.0 - a / 2.0, 2.0**1019)
        scale = np.minimum(BUCKET_SCALE * bucket, width / SCALE_DIV)
    m, t = plan(n_hat - 2.0 * sd, scale, width, eps_main, family)
    return Prepared(s, n_hat, a, b, m, t, eps_main)


def _make_run(family: NoiseFamily) -> Callable[[Batch, Privacy, Params, Rng], np.ndarray]:
    def run(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
        p = prepare(batch, budget, params, rng, family)
        out = trimmed_release(p.s, p.a, p.b, p.m, p.t, p.eps_main, family, rng)
        return np.where(p.n_hat >= 1.0, out, np.nan)

    run.__doc__ = (
        f"dp_mean, trimmed mean + smooth sensitivity with {family.name.upper()} noise (seed 001), add/remove.\n\n"
        + (
            "Cost eps (pure) = count 0.05 + bucket 0.1 + range 0.3 + main 0.55 of eps (SPLIT_PURE)."
            if family.notion == "pure"
            else "Cost rho (zCDP) = count 0.05 + bucket 0.05 + range 0.2 + main 0.7 of rho (SPLIT_ZCDP)."
        )
        + "  With lower and upper, the range's share goes to the main step.  NULL when the noisy count < 1."
    )
    return run


_SRC = "seed 001 (Bun & Steinke), add/remove form"
METHODS = (
    Method(
        "mean",
        "trimmed_lln",
        "zcdp",
        _make_run(FAMILIES["lln"]),
        "trimmed mean + smooth sensitivity, Laplace log-normal noise",
        source=_SRC,
    ),
    Method(
        "mean",
        "trimmed_t",
        "pure",
        _make_run(FAMILIES["t"]),
        "trimmed mean + smooth sensitivity, Student's t (3 dof) noise",
        source=_SRC,
    ),
    Method(
        "mean",
        "trimmed_uln",
        "zcdp",
        _make_run(FAMILIES["uln"]),
        "trimmed mean + smooth sensitivity, uniform log-normal noise",
        source=_SRC,
    ),
    Method(
        "mean",
        "trimmed_arsinh",
        "zcdp",
        _make_run(FAMILIES["arsinh"]),
        "trimmed mean + smooth sensitivity, arsinh-normal noise",
        source=_SRC,
    ),
)
