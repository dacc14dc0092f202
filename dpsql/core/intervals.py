"""Intervals for DP releases (issue 14): post-processing of released values, no extra privacy cost.

Each default method can return its release with an interval ``[lo, hi]`` meant to cover the *exact* answer
(the statistic of the data as stored, not a population parameter) with probability ``level``.  An interval
is computed only from the method's released values (noisy counts and sums, released ranges and quantiles)
and public parameters, so it is post-processing: the ``dp_*_ci`` functions cost exactly what the plain
functions cost.  Where a method spends part of its budget on the interval (quantiles: two more exponential
mechanisms for the endpoints; dp_var_ci: a radius, tail-shell counts and a clipped sum of squares for its upper
end; dp_sum_ci: tail-shell counts), its docstring says so and the total is still the ``epsilon`` given.

What the probability covers:

* the noise the method added, exactly (the discrete Laplace laws are known), split over the noisy pieces by
  a union bound (each piece gets a share of ``1 - level``);
* how far an asymmetric-sensitivity scan runs past the answer (dp_var_ci's lower end), exactly: above the
  answer its law does not depend on the data (:func:`~dpsql.core.asymmetric.overshoot_steps`);
* the rank error of an exponential mechanism by a calibrated bound (:data:`EM_SLACK`, measured on
  ``benchmarks/intervals.py``'s panel);
* the bias of clipping by an allowance: the released range was chosen so that only about ``k`` rows lie
  outside it (the radius scan's threshold), and the allowance assumes those rows lie within one more
  range width.  No DP interval can cover the exact mean when one row may be arbitrarily far out (its
  neighbour without that row has nearly the same output law), so this is an assumption on the data,
  stated in docs/sql-reference.md ("Error bars"); the coverage table there measures it.  dp_var_ci's upper end
  (a sum of squares, where the clipped rows weigh most) allows for them only where a private tail test finds
  the tail beyond the range thinning fast (a Pareto index above 2.5 from noisy shell counts), and has no
  finite bound otherwise (:func:`~dpsql.core.asymmetric.interval_var`); dp_sum_ci's allowance is the larger of
  that and a Pareto tail's whose index the same kind of shell counts estimate (no finite bound when the index is
  at most 1, :func:`~dpsql.core.scalefree.interval_sum`).

Where an interval spends budget on a tail test, the disjoint shell counts come from :func:`tail_shells` (a noisy
count vector, charged once).

``lo = -inf`` / ``hi = +inf`` mean "no finite bound": e.g. the mean's small-count route releases a median
(a location estimate), which carries no interval for the mean.
"""

from __future__ import annotations

import math

import numpy as np

from ..noise import Rng, discrete_laplace
from .batch import Batch
from .primitives import per_row
from .spending import charge_pure

__all__ = ["dlap_quantile", "count_interval", "ratio_interval", "tail_shells", "EM_SLACK"]

#: added to ln(2 / alpha) in an endpoint's rank offset: the log of the exponential mechanism's measure
#: ratio between the ranks on the wrong side and those near the target (measured, benchmarks/intervals.py)
EM_SLACK = 2.0


def dlap_quantile(scale: np.ndarray | float, alpha: float) -> np.ndarray:
    """The least integer k with ``P(|Z| > k) <= alpha`` for Z discrete Laplace of ``scale``
    (``P(Z = j)`` proportional to ``exp(-|j| / scale)``): ``P(|Z| > k) = 2 q**(k + 1) / (1 + q)``,
    ``q = exp(-1 / scale)``.  Exact; float64 (may exceed 2**53 for huge scales, then rounded up)."""
    t = np.asarray(scale, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_q = -1.0 / np.maximum(t, 1e-300)
        # smallest k >= 0 with (k + 1) log q <= log(alpha (1 + q) / 2)
        rhs = np.log(alpha / 2.0) + np.log1p(np.exp(log_q))
        k = np.ceil(rhs / log_q - 1.0 - 1e-12)
    return np.maximum(k, 0.0)


def count_interval(value: np.ndarray, epsilon: float, level: float) -> tuple[np.ndarray, np.ndarray]:
    """dp_count's interval: the release is ``max(0, n + DLap(1/eps))``, so ``n`` lies in ``[value - k,
    value + k]`` (floored at 0) with probability >= level, k = :func:`dlap_quantile` at ``1 - level``.
    Exact (the clamp at 0 only moves the release up, where n >= 0 holds anyway)."""
    v = np.asarray(value, dtype=np.float64)
    k = dlap_quantile(1.0 / epsilon, 1.0 - level)
    return np.maximum(v - k, 0.0), v + k


def ratio_interval(s_lo: np.ndarray, s_hi: np.ndarray, n_lo: np.ndarray, n_hi: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The range of ``s / n`` over ``s`` in [s_lo, s_hi] and ``n`` in [n_lo, n_hi] (n_lo >= 1 > 0)."""
    with np.errstate(over="ignore", invalid="ignore"):
        lo = np.where(s_lo < 0, s_lo / n_lo, s_lo / n_hi)
        hi = np.where(s_hi > 0, s_hi / n_lo, s_hi / n_hi)
    return lo, hi


def tail_shells(s: Batch, d: np.ndarray, R: np.ndarray, ratios: tuple[float, ...], eps_t: float, rng: Rng,
                what: str) -> list[np.ndarray]:
    """Noisy counts of the disjoint shells ``d > R``, ``R / ratios[0] < d <= R``, ``R / ratios[1] < d <= R /
    ratios[0]``, ... per group (float64; ``d`` one distance per row, e.g. ``|x - c|`` for a released centre c,
    ``R`` one radius per group, ``ratios`` increasing).  A row lies in one shell at most, so the count vector has
    L1 sensitivity 1 under add/remove and each count's discrete Laplace of scale ``1 / eps_t`` makes the whole
    vector eps_t-DP, charged once (``what``) whatever its length.  The tail tests of dp_var_ci's upper end and
    dp_sum_ci read these."""
    G = s.groups
    starts = s.offsets[:-1]
    nz = s.sizes > 0

    def beyond(r: np.ndarray) -> np.ndarray:
        out = np.zeros(G, dtype=np.int64)
        if s.values.size:
            out[nz] = np.add.reduceat((d > per_row(r, s.offsets)).astype(np.int64), starts[nz])
        return out

    charge_pure(eps_t, what)
    exact = [beyond(R)] + [beyond(R / r) for r in ratios]
    shells = [exact[0]] + [exact[j + 1] - exact[j] for j in range(len(ratios))]
    return [(h + discrete_laplace(1.0 / eps_t, rng, G)).astype(np.float64) for h in shells]


def tail_index(noisy: list[np.ndarray], ratios: tuple[float, ...], n_hat: np.ndarray, eps_t: float, alpha: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Post-processing of :func:`tail_shells`' counts (radii ``R / ratios``): ``(a, N_hi)`` per group.  ``a =
    max_r ln(M_r / N) / ln r``, N the rows beyond R and M_r the rows beyond R / r (noisy, floored at 1), over
    the radii with ``M_r <= n_hat / 2`` (else the shell lies in the bulk, e.g. a centre off the data, and the
    ratio measures the bulk, not the tail): a point estimate of the tail's Pareto index, -inf where no radius
    qualifies.  ``N_hi``: N's upper bound, missed with probability ``alpha`` over all the shells' noise (exact
    discrete-Laplace quantiles), floored at 1.  The tail tests of dp_sum_ci and dp_var_ci read these."""
    k_t = dlap_quantile(1.0 / eps_t, alpha / len(noisy))
    N = np.maximum(noisy[0], 1.0)
    a = np.full(N.size, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j, r in enumerate(ratios):
            inner = sum(noisy[: j + 2])  # rows beyond R / r
            a = np.where(inner <= n_hat / 2.0, np.fmax(a, np.log(np.maximum(inner, 1.0) / N) / math.log(r)), a)
    return a, np.maximum(noisy[0] + k_t, 1.0)
