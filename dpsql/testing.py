"""Statistical privacy testing: an empirical lower bound on epsilon from neighbouring datasets.

Run a mechanism many times on D and on a neighbour D' (seeded :class:`~dpsql.noise.Rng`, so tests are
deterministic), bin the outputs into events (NaN/NULL is its own event), and for every event E compute
a one-sided Clopper-Pearson lower bound on P[M(D) in E] and upper bound on P[M(D') in E].  Then

    eps_lb = max over events, both directions, of ln(lower(P_D(E)) / upper(P_D'(E)))

is, with probability at least 1 - alpha, a lower bound on the true privacy loss (Bonferroni over all
events and both directions).  A test asserts ``eps_lb <= claimed``: a correct mechanism fails it with
probability at most ``alpha``; with fixed seeds the outcome is fixed.  Typical catches: a NULL or
exception only for empty groups (eps_lb = inf), noise calibrated to the wrong sensitivity, a budget
split that adds up to more than claimed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["empirical_epsilon", "outputs", "clopper_pearson", "random_ladder"]


def clopper_pearson(k: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided (lower, upper) Clopper-Pearson bounds at level alpha for k successes out of n."""
    from scipy.stats import beta as beta_dist

    k = np.asarray(k, dtype=np.float64)
    lower = np.where(k > 0, beta_dist.ppf(alpha, k, n - k + 1), 0.0)
    upper = np.where(k < n, beta_dist.ppf(1 - alpha, k + 1, n - k), 1.0)
    return lower, upper


def _events(a: np.ndarray, b: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts per event: NaN, -inf, +inf, then ``bins`` quantile bins of the pooled finite outputs, plus the
    cumulative (tail) events, which catch shifts that single bins spread thin."""
    fa, fb = a[np.isfinite(a)], b[np.isfinite(b)]
    pooled = np.concatenate([fa, fb])
    if pooled.size:
        edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)[1:-1]))
    else:
        edges = np.zeros(0)

    def counts(x: np.ndarray, fx: np.ndarray) -> np.ndarray:
        # NULL, -inf and +inf are separate events (an interval's "no finite bound" is an output too)
        nan = np.array([np.count_nonzero(np.isnan(x)), np.count_nonzero(x == -np.inf), np.count_nonzero(x == np.inf)])
        # exact values (point masses) matter for discrete outputs: right-closed bins
        idx = np.searchsorted(edges, fx, side="left")
        per_bin = np.bincount(idx, minlength=edges.size + 1)
        cum = np.cumsum(per_bin)[:-1]
        tail = fx.size - cum
        return np.concatenate([nan, per_bin, cum, tail])

    return counts(a, fa), counts(b, fb)


def empirical_epsilon(a: np.ndarray, b: np.ndarray, bins: int = 20, alpha: float = 0.05) -> float:
    """Empirical lower bound on eps from outputs ``a`` (on D) and ``b`` (on D'), equal sizes."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    ca, cb = _events(a, b, bins)
    m = 2 * ca.size  # events x directions, Bonferroni
    la, ua = clopper_pearson(ca, a.size, alpha / (2 * m))
    lb, ub = clopper_pearson(cb, b.size, alpha / (2 * m))
    with np.errstate(divide="ignore"):
        r1 = np.where(la > 0, np.log(la) - np.log(np.maximum(ub, 1e-300)), -np.inf)
        r2 = np.where(lb > 0, np.log(lb) - np.log(np.maximum(ua, 1e-300)), -np.inf)
    best = float(max(r1.max(initial=-np.inf), r2.max(initial=-np.inf)))
    return max(best, 0.0) if math.isfinite(best) or best > 0 else 0.0


def outputs(mechanism: Callable[[int], np.ndarray], runs: int) -> np.ndarray:
    """Collect ``runs`` outputs; ``mechanism(k)`` returns a batch of k outputs (vectorised over groups:
    put the same dataset in k groups to get k independent runs in one call)."""
    return np.asarray(mechanism(runs), dtype=np.float64)


# --------------------------------------------------------------------------- the adversarial matrix (issue 11)

_BASE = [float(v) for v in np.random.default_rng(20261125).normal(5.0, 2.0, 40)]

#: Neighbouring datasets (D, D + one row) at the extremes of what a column can hold.  Integer extremes are
#: given as the DOUBLE the binding converts them to (BIGINT and HUGEINT maxima round to the nearest DOUBLE).
EXTREME_NEIGHBOURS: dict[str, tuple[list[float], list[float]]] = {
    "empty_vs_one": ([], [1.0]),
    "one_at_+1e300": (_BASE, _BASE + [1e300]),
    "one_at_-1e300": (_BASE, _BASE + [-1e300]),
    "one_at_+inf": (_BASE, _BASE + [math.inf]),
    "one_at_-inf": (_BASE, _BASE + [-math.inf]),
    "one_at_2^1000": (_BASE, _BASE + [2.0**1000]),
    "bigint_max": (_BASE, _BASE + [float(2**63 - 1)]),
    "hugeint_min": (_BASE, _BASE + [float(-(2**127))]),
    "subnormal": (_BASE, _BASE + [5e-324]),
    "far_outlier_1e15": (_BASE, _BASE + [1e15]),
    "equal_plus_far": ([3.0] * 40, [3.0] * 40 + [1e300]),
    "two_far_clusters": ([-1e200] * 20 + [1e200] * 20, [-1e200] * 20 + [1e200] * 21),
}

#: the fast subset run in CI at the epsilon floor and ceiling (every pair runs at epsilon = 1)
EDGE_PAIRS = ("empty_vs_one", "one_at_+inf", "equal_plus_far")
ZCDP_DELTA = 1e-3  # a rho-zCDP claim is tested as its (eps, delta) conversion at this delta


def matrix_params(aggregate: str, method: str, epsilon: float, p: float = 0.5, bounds: tuple | None = None):
    """Parameters for one matrix cell: the budget as ``epsilon`` (pure) or ``rho = epsilon**2 / 2`` clamped
    into the accepted range (zCDP); bounds (0, 10) where the method needs them."""
    from .core.registry import MAX_RHO, MIN_RHO, Params, get_method

    m = get_method(aggregate, method)
    if bounds is None and m.requires_bounds:
        bounds = (0.0, 10.0)
    lower, upper = bounds if bounds is not None else (None, None)
    kw: dict = {"lower": lower, "upper": upper, "p": p if aggregate == "quantile" else None}
    if m.notion == "pure":
        kw["epsilon"] = epsilon
    else:
        kw["rho"] = min(max(epsilon * epsilon / 2.0, MIN_RHO), MAX_RHO)
    return Params(**kw)


def matrix_claim(aggregate: str, method: str, params) -> float:
    """The epsilon an empirical lower bound is held against: eps (pure) or the (eps, ZCDP_DELTA) conversion."""
    from .core.registry import budget_of, get_method

    return budget_of(get_method(aggregate, method), params).as_epsilon(ZCDP_DELTA)


#: what of an interval release (value, lo, hi) a matrix cell looks at: each part and the width
INTERVAL_PARTS = {"value": lambda v, lo, hi: v, "lo": lambda v, lo, hi: lo, "hi": lambda v, lo, hi: hi,
                  "width": lambda v, lo, hi: hi - lo}


def matrix_cell(aggregate: str, method: str, params, pair: str, runs: int, seed: int,
                part: str | None = None) -> tuple[float, float, str]:
    """``(empirical eps, claim, note)`` for one method on one neighbour pair; ``runs`` releases per side.
    ``part`` (a key of :data:`INTERVAL_PARTS`): run the method with its interval (``params.level``) and look
    at that part of the release.

    ``note`` says whether either side released +-inf.  Exceptions propagate: none may depend on the data."""
    from .core import Batch, run, run_interval
    from .noise import Rng

    d, d2 = EXTREME_NEIGHBOURS[pair]
    rng = Rng.seeded(seed)
    if part is None:
        a = run(aggregate, Batch.from_lists([d] * runs), params, method=method, rng=rng)
        b = run(aggregate, Batch.from_lists([d2] * runs), params, method=method, rng=rng)
    else:
        with np.errstate(invalid="ignore"):  # inf - inf widths: NaN, an output like any other
            a, b = (INTERVAL_PARTS[part](*run_interval(aggregate, Batch.from_lists([x] * runs), params, method, rng))
                    for x in (d, d2))
    note = ""
    for name, out in (("D", a), ("D'", b)):
        if np.any(np.isinf(out)):
            note += f"inf on {name}; "
    return empirical_epsilon(a, b), matrix_claim(aggregate, method, params), note


def matrix_methods() -> list[tuple[str, str]]:
    """Every registered (aggregate, method)."""
    from .core.registry import AGGREGATES, methods

    return [(a, m) for a in AGGREGATES for m in methods(a)]


def random_ladder(r: np.random.Generator) -> Callable[[np.ndarray, float], np.ndarray]:
    """A stand-in for :func:`dpsql.core.summary.ladder` in tests: shifts per group that do not increase from pass
    to pass (0 last; 1 to 4 passes; sometimes the octave first for every group, the octave pass's own SQL), drawn
    from ``r``, not from the mechanism's generator: the releases must not depend on them."""
    from .core import summary

    def ladder(n_hat: np.ndarray, epsilon: float) -> np.ndarray:
        G, m = np.asarray(n_hat).size, int(r.integers(0, 4))
        mid = -np.sort(-r.integers(0, summary.RAW_BITS + 1, (G, m)), axis=1)
        if m and r.random() < 0.5:
            mid[:, 0] = summary.RAW_BITS
        return np.concatenate([mid, np.zeros((G, 1), dtype=np.int64)], axis=1)

    return ladder
