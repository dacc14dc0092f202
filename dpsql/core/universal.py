"""Universal (bound-free) estimators of Dong & Yi (seed 003), re-derived for add/remove neighbours.

"The digest" below is the seed's design notes (``seeds/digests/003-universal-estimators.md``): external material,
not in this repository; docs/methods.md (seed 003) summarises the method.  The paper assumes replace-one neighbours
and a public n; dpsql's neighbours add or remove one row, so:

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

The building blocks (random pairs, IQR lower bound, radius scan, finite-domain quantile, ranges) live in
:mod:`.ranges`, where the other families find them too; this module holds the methods.  Budget splits are
module constants (``SPLIT_*``); they were chosen by the accuracy benchmark.
"""

from __future__ import annotations

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .batch import Batch
from .helpers import B_MAX, B_MIN, amplified, bounded, intersect, subsample
from .intervals import count_interval
from .primitives import noisy_count, noisy_count_of, per_row, release_sum
from .ranges import infinite_range, iqr_lower_bound, mean_range, private_quantile_in, radius, random_pairs
from .registry import Method, Params
from .spending import subsampled

SPLIT_MEAN = {"count": 0.1, "bound": 0.1, "range": 0.4, "sum": 0.4}
SPLIT_VAR = {"count": 0.1, "bound": 0.1, "radius": 0.4, "sum": 0.4}
SPLIT_SUM = {"bound": 0.1, "range": 0.3, "sum": 0.6}
SPLIT_QUANTILE = {"bound": 0.2, "range": 0.4, "em": 0.4}
SPLIT_IQR = {"bound": 0.2, "range": 0.3, "em": 0.25}  # em twice


# --------------------------------------------------------------------------- helpers


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


# --------------------------------------------------------------------------- aggregates


def count_of(counts: np.ndarray, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_count from the groups' row counts n (int64; the binding passes DuckDB's count()): max(0, n + Z) per group,
    Z ~ discrete Laplace, P(Z = z) proportional to exp(-eps |z|), as float64.

    Cost eps (pure).  Proof sketch, add/remove neighbours: adding or removing one row changes the count of the one
    group it belongs to by exactly 1 and no other count; for every output z, P(n + Z = z) / P(n + 1 + Z = z) =
    exp(eps (|z - n - 1| - |z - n|)) is at most e^eps either way, so each group's release is eps-DP, and the groups
    see disjoint rows (parallel composition; which groups exist is the guard's: declared keys or partition
    selection).  The clamp at 0 and the conversion to float64 are post-processing.  The noise is one draw per
    group from :func:`~dpsql.noise.discrete_laplace` (exact sampler), whatever n is.
    """
    return np.maximum(noisy_count_of(counts, budget.epsilon, rng), 0.0)


def count_interval_of(counts: np.ndarray, budget: Privacy, params: Params, rng: Rng
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_count_ci from the row counts: :func:`count_of` and :func:`~dpsql.core.intervals.count_interval` (exact
    coverage of the discrete Laplace; post-processing of the release, cost eps)."""
    v = count_of(counts, budget, params, rng)
    return (v, *count_interval(v, budget.epsilon, params.level))


def run_count(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_count over a batch: :func:`count_of` of its group sizes (NULL and NaN values are not rows of a batch).
    Cost eps (pure)."""
    return count_of(batch.sizes, budget, params, rng)


def interval_count(batch: Batch, budget: Privacy, params: Params, rng: Rng
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_count_ci over a batch: :func:`count_interval_of` of its group sizes.  Cost eps (pure)."""
    return count_interval_of(batch.sizes, budget, params, rng)


def run_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_sum, bound-free: clipping range from :func:`mean_range`, then a clipped sum.

    Cost eps (pure) = bound 0.1 + range 0.3 + sum 0.6 (SPLIT_SUM).  The sum of values clipped to the
    released [l, r] moves by at most max(|l|, |r|) when one row is added or removed.
    """
    eps = budget.epsilon
    s = bounded(batch, params)  # any row order: the sum is exact on its fixed-point grid
    l, r = mean_range(s, SPLIT_SUM["bound"] * eps, SPLIT_SUM["range"] * eps, rng, params.beta, eps)
    l, r = intersect(l, r, params)
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
    s = bounded(batch, params)  # any row order: the sum is exact on its fixed-point grid
    l, r = mean_range(s, sp["bound"] * eps, sp["range"] * eps, rng, params.beta, eps)
    l, r = intersect(l, r, params)
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
    s = bounded(batch, params)  # pairs and counts only: no sort
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
    with subsampled(eta, "radius"):
        sub = subsample(zb, eta, rng)
        R = radius(sub, np.zeros(G), bz, amplified(sp["radius"] * eps, eta), rng, params.beta)
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
    s = bounded(batch, params)
    s.presort()  # sorted while the matching of the IQR bound is drawn
    b = np.maximum(iqr_lower_bound(s, eps_bound, rng) * 2.0**-20, B_MIN)
    s = s.sorted()
    l, r = infinite_range(s, b, eps_range, rng, beta)
    l, r = intersect(l, r, params)
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
METHODS = (
    Method("count", "laplace", "pure", run_count, "count + discrete Laplace(1/eps)", source="textbook",
           interval=interval_count, counts=count_of, counts_interval=count_interval_of),
    Method("sum", "universal", "pure", run_sum, "bound-free clipped sum (private range)", source=_SRC),
    Method("mean", "universal", "pure", run_mean, "EstimateMean: IQR bound, subsampled range", source=_SRC),
    Method("var", "universal", "pure", run_var, "EstimateVariance over random pairs", source=_SRC),
    Method("quantile", "universal", "pure", run_quantile, "IQR bound + InfiniteDomainQuantile", source=_SRC),
    Method("iqr", "universal", "pure", run_iqr, "EstimateIQR with a shared range", source=_SRC),
)

