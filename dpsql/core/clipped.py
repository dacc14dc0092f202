"""The plain clipped baseline: the peers' approach (OpenDP, diffprivlib, Google DP), with user bounds.

Every method here is ``method := 'clipped'`` and needs ``lower :=`` and ``upper :=``.  Each row is clamped
to ``[lower, upper]`` (a fixed per-row map, so privacy never depends on the bounds being right: bad
bounds only cost accuracy), then

* sum, mean, var: discrete Laplace on fixed-point sums (:func:`~dpsql.core.primitives.release_sum`) and
  on the count, with add/remove sensitivities;
* quantile, iqr: the exponential mechanism on the public grid of ``[lower, upper]``
  (:func:`~dpsql.core.universal.private_quantile_in`).

``count`` is the textbook ``'laplace'`` method of :mod:`.universal` (no bounds are involved).
Neighbours add or remove one row; n is never public, so every division uses a noisy count.
"""

from __future__ import annotations

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .batch import Batch
from .primitives import noisy_count, pow2_floor, release_sum
from .registry import Method, Params, register
from .universal import B_MIN, private_quantile_in

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


def run_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Clipped sum: ``sum(clip(x, lower, upper)) + DLap``.  Cost eps (pure).

    Add/remove sensitivity: the added or removed row contributes ``clip(x)``, at most
    ``max(|lower|, |upper|)`` in absolute value (centring does not help a sum under add/remove, since the
    centre would be multiplied by the private n).  Fixed-point release, so the output set is a grid.
    """
    lo, hi = _bounds(params)
    b = _clamped(batch, lo, hi)
    sens = np.full(b.groups, max(abs(lo), abs(hi)))
    return release_sum(b.values, b.offsets, sens, budget.epsilon, rng)


def run_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Clipped mean: centred noisy sum / noisy count.  Cost eps (pure) = sum eps/2 + count eps/2.

    The centred terms ``clip(x) - c`` with ``c = (lower + upper)/2`` lie in ``[-h, h]``, ``h = (upper -
    lower)/2``: sensitivity h under add/remove; the count has sensitivity 1.  The mean
    ``c + S / max(n~, 1)`` clamped to ``[lower, upper]`` is post-processing; NULL when the noisy count
    is below 1 (a private decision).
    """
    lo, hi = _bounds(params)
    eps = budget.epsilon
    b = _clamped(batch, lo, hi)
    c = lo / 2.0 + hi / 2.0
    h = hi / 2.0 - lo / 2.0
    s = release_sum(b.values - c, b.offsets, np.full(b.groups, h), SPLIT_MEAN["sum"] * eps, rng)
    n = noisy_count(b, SPLIT_MEAN["count"] * eps, rng)
    mean = np.clip(c + s / np.maximum(n, 1.0), lo, hi)
    return np.where(n >= 1.0, mean, np.nan)


def run_var(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """Clipped variance from three noisy sums.  Cost eps (pure) = count + sum + sum of squares, eps/3 each.

    With centred terms ``y = clip(x) - c`` (``|y| <= h``): ``S = sum y`` has sensitivity h, ``Q = sum y**2``
    sensitivity h**2, the count 1 (add/remove).  ``var = Q/n - (S/n)**2`` (population variance of the
    clamped data), clamped to ``[0, h**2]``; NULL when the noisy count is below 2 (a private decision).
    """
    lo, hi = _bounds(params)
    eps = budget.epsilon
    b = _clamped(batch, lo, hi)
    c = lo / 2.0 + hi / 2.0
    h = hi / 2.0 - lo / 2.0
    y = b.values - c
    S = release_sum(y, b.offsets, np.full(b.groups, h), SPLIT_VAR["sum"] * eps, rng)
    Q = release_sum(y * y, b.offsets, np.full(b.groups, h * h), SPLIT_VAR["sumsq"] * eps, rng)
    n = noisy_count(b, SPLIT_VAR["count"] * eps, rng)
    nn = np.maximum(n, 1.0)
    var = np.clip(Q / nn - (S / nn) ** 2, 0.0, h * h)
    return np.where(n >= 2.0, var, np.nan)


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
for _agg, _fn, _summary in (
    ("sum", run_sum, "clamp to [lower, upper], discrete Laplace on the sum"),
    ("mean", run_mean, "clamp, centred noisy sum / noisy count"),
    ("var", run_var, "clamp, noisy count + sum + sum of squares"),
    ("quantile", run_quantile, "exponential mechanism on the grid of [lower, upper]"),
    ("iqr", run_iqr, "two exponential mechanisms on the grid of [lower, upper]"),
):
    register(Method(_agg, "clipped", "pure", _fn, _summary, requires_bounds=True, source=_SRC))
