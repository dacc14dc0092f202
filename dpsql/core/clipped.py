"""The plain clipped baseline: the peers' approach (OpenDP, diffprivlib, Google DP), with user bounds.

Every method here is ``method := 'clipped'`` and needs ``lower :=`` and ``upper :=``.  Each row is clamped
to ``[lower, upper]`` (a fixed per-row map, so privacy never depends on the bounds being right: bad
bounds only cost accuracy), then

* sum, mean, var: discrete Laplace on fixed-point sums (:func:`~dpsql.core.primitives.release_sum`) and
  on the count, with add/remove sensitivities;
* quantile, iqr: the exponential mechanism on the public grid of ``[lower, upper]``
  (:func:`~dpsql.core.ranges.private_quantile_in`).

``count`` is the textbook ``'laplace'`` method of :mod:`.universal` (no bounds are involved).
Neighbours add or remove one row; n is never public, so every division uses a noisy count.
"""

from __future__ import annotations

import math

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .batch import Batch
from .helpers import B_MIN
from .primitives import fixed_point_sum, noisy_count_of, pow2_floor, release_fixed_sum
from .ranges import private_quantile_in
from .registry import Method, ParameterError, Params

__all__ = ["run_sum", "run_mean", "run_var", "run_quantile", "run_iqr", "SPLIT_MEAN", "SPLIT_VAR", "GRID_BITS"]

#: budget shares (sum to 1)
SPLIT_MEAN = {"count": 0.5, "sum": 0.5}
SPLIT_VAR = {"count": 1.0 / 3.0, "sum": 1.0 / 3.0, "sumsq": 1.0 / 3.0}
#: quantile grid: ``[lower, upper]`` cut into about 2**GRID_BITS cells (power-of-two cell width)
GRID_BITS = 20


def _bounds(params: Params) -> tuple[float, float]:
    return float(params.lower), float(params.upper)


def _clamped(batch: Batch, lo: float, hi: float) -> Batch:
    return Batch(np.clip(batch.values, lo, hi), batch.offsets)


def _centre(lo: float, hi: float) -> tuple[float, float]:
    """Centre and half-width of ``[lo, hi]`` (the same float64 operations as the native SQL path)."""
    return lo / 2.0 + hi / 2.0, hi / 2.0 - lo / 2.0


def sensitivities(agg: str, params: Params) -> tuple[float, float | None]:
    """Per-row bounds of the fixed-point terms of :func:`clipped_stats` (``s1``, ``s2``) for ``agg``."""
    lo, hi = _bounds(params)
    c, h = _centre(lo, hi)
    out = (max(abs(lo), abs(hi)), None) if agg == "sum" else (h, None) if agg == "mean" else (h, h * h)
    if not all(math.isfinite(v) for v in out if v is not None):  # a parameter error, never data-dependent
        raise ParameterError(f"dp_{agg}: lower and upper are too far apart for method 'clipped'")
    return out


def clipped_stats(agg: str, batch: Batch, params: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The data part of the clipped sum, mean and variance: per group the row count ``n`` and exact integer
    fixed-point sums (:func:`~dpsql.core.primitives.fixed_point_sum`) of ``clip(x)`` (sum), ``y = clip(x) -
    c`` (mean, var) and ``y**2`` (var).  The native SQL path (``sql/macros.sql``) computes the same numbers
    in DuckDB with the same float64 operations, and :func:`finish` adds the noise."""
    lo, hi = _bounds(params)
    b = _clamped(batch, lo, hi)
    s1, s2 = sensitivities(agg, params)
    if agg == "sum":
        return b.sizes, fixed_point_sum(b.values, b.offsets, s1), None
    c, _ = _centre(lo, hi)
    y = b.values - c
    k1 = fixed_point_sum(y, b.offsets, s1)
    return b.sizes, k1, (fixed_point_sum(y * y, b.offsets, s2) if agg == "var" else None)


def finish(agg: str, n: np.ndarray, k1: np.ndarray, k2: np.ndarray | None, budget: Privacy, params: Params,
           rng: Rng) -> np.ndarray:
    """Noise and post-processing of the clipped sum, mean and variance from :func:`clipped_stats` (the
    privacy argument is in :func:`run_sum`, :func:`run_mean`, :func:`run_var`)."""
    lo, hi = _bounds(params)
    eps = budget.epsilon
    s1, s2 = sensitivities(agg, params)
    G = np.asarray(n).size
    if agg == "sum":
        return release_fixed_sum(k1, np.full(G, s1), eps, rng)
    c, h = _centre(lo, hi)
    if agg == "mean":
        s = release_fixed_sum(k1, np.full(G, s1), SPLIT_MEAN["sum"] * eps, rng)
        nn = noisy_count_of(n, SPLIT_MEAN["count"] * eps, rng)
        mean = np.clip(c + s / np.maximum(nn, 1.0), lo, hi)
        return np.where(nn >= 1.0, mean, np.nan)
    S = release_fixed_sum(k1, np.full(G, s1), SPLIT_VAR["sum"] * eps, rng)
    Q = release_fixed_sum(k2, np.full(G, s2), SPLIT_VAR["sumsq"] * eps, rng)
    nn = noisy_count_of(n, SPLIT_VAR["count"] * eps, rng)
    m = np.maximum(nn, 1.0)
    # in units of h and h**2, so that no intermediate overflows (h * h is finite: checked up front)
    var = h * h * np.clip(Q / (h * h) / m - (S / h / m) ** 2, 0.0, 1.0) if h > 0 else np.zeros(G)
    return np.where(nn >= 2.0, var, np.nan)


def run_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Clipped sum: ``sum(clip(x, lower, upper)) + DLap``.  Cost eps (pure).

    Add/remove sensitivity: the added or removed row contributes ``clip(x)``, at most
    ``max(|lower|, |upper|)`` in absolute value (centring does not help a sum under add/remove, since the
    centre would be multiplied by the private n).  Fixed-point release, so the output set is a grid.
    """
    return finish("sum", *clipped_stats("sum", batch, params), budget, params, rng)


def run_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Clipped mean: centred noisy sum / noisy count.  Cost eps (pure) = sum eps/2 + count eps/2.

    The centred terms ``clip(x) - c`` with ``c = (lower + upper)/2`` lie in ``[-h, h]``, ``h = (upper -
    lower)/2``: sensitivity h under add/remove; the count has sensitivity 1.  The mean
    ``c + S / max(n~, 1)`` clamped to ``[lower, upper]`` is post-processing; NULL when the noisy count
    is below 1 (a private decision).
    """
    return finish("mean", *clipped_stats("mean", batch, params), budget, params, rng)


def run_var(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Clipped variance from three noisy sums.  Cost eps (pure) = count + sum + sum of squares, eps/3 each.

    With centred terms ``y = clip(x) - c`` (``|y| <= h``): ``S = sum y`` has sensitivity h, ``Q = sum y**2``
    sensitivity h**2, the count 1 (add/remove).  ``var = Q/n - (S/n)**2`` (population variance of the
    clamped data), clamped to ``[0, h**2]``; NULL when the noisy count is below 2 (a private decision).
    """
    return finish("var", *clipped_stats("var", batch, params), budget, params, rng)


def _grid(lo: float, hi: float) -> float:
    """Power-of-two cell width giving about 2**GRID_BITS cells on [lo, hi] (public)."""
    return float(pow2_floor(np.float64(max(hi - lo, B_MIN))) * 2.0**-GRID_BITS)


def _quantile(batch: Batch, params: Params, p: float, eps: float, rng: Rng) -> np.ndarray:
    lo, hi = _bounds(params)
    s = _clamped(batch, lo, hi).sorted()
    G = s.groups
    l, r = np.full(G, lo), np.full(G, hi)
    b = np.full(G, _grid(lo, hi))
    return private_quantile_in(s, l, r, b, p, eps, rng, params.beta)


def run_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Exponential mechanism for rank ``p n`` on the grid of ``[lower, upper]``.  Cost eps (pure).

    Score = distance in ranks from the target (sensitivity 1 under add/remove, see
    :func:`~dpsql.core.primitives.quantile_em`); the domain is public.  Never NULL: an empty group gets a
    point drawn uniformly from the grid.
    """
    return _quantile(batch, params, float(params.p), budget.epsilon, rng)


def run_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Q3 - Q1 from two exponential mechanisms on the grid of ``[lower, upper]``.  Cost eps (pure),
    eps/2 each (basic composition); clamped at 0."""
    eps = budget.epsilon
    q1 = _quantile(batch, params, 0.25, eps / 2.0, rng)
    q3 = _quantile(batch, params, 0.75, eps / 2.0, rng)
    return np.maximum(q3 - q1, 0.0)


_SRC = "baseline: clamp to user bounds + Laplace / exponential mechanism"
METHODS = tuple(
    Method(agg, "clipped", "pure", fn, summary, requires_bounds=True, source=_SRC,
           check=None if agg in ("quantile", "iqr") else
           lambda p, a=agg: None if p.lower is None or p.upper is None else sensitivities(a, p))
    for agg, fn, summary in (
        ("sum", run_sum, "clamp to [lower, upper], discrete Laplace on the sum"),
        ("mean", run_mean, "clamp, centred noisy sum / noisy count"),
        ("var", run_var, "clamp, noisy count + sum + sum of squares"),
        ("quantile", run_quantile, "exponential mechanism on the grid of [lower, upper]"),
        ("iqr", run_iqr, "two exponential mechanisms on the grid of [lower, upper]"),
    )
)
