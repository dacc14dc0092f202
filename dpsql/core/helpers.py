"""Shared helpers of the estimator families: a room of their own (issue 16; they used to live in
:mod:`.universal`, which five sibling families imported for them).

Fixed per-row maps and post-processing of released values (clamping to public bounds, intersecting a released
range with them, the data-independent bucket floor), and Poisson subsampling with the epsilon whose subsampled
run costs a given epsilon under add/remove (:func:`amplified`).  Nothing here releases anything.
"""

from __future__ import annotations

import math

import numpy as np

from ..noise import Rng
from .batch import Batch
from .registry import Params

__all__ = ["B_MIN", "B_MAX", "bounded", "intersect", "amplified", "subsample"]

B_MIN = 2.0**-1000  # data-independent floor on every bucket size (digest pitfall 2)
B_MAX = 2.0**1000


def bounded(batch: Batch, params: Params) -> Batch:
    """Clamp values to public [lower, upper] when given (a fixed per-row map)."""
    if params.lower is None and params.upper is None:
        return batch
    lo = -np.inf if params.lower is None else params.lower
    hi = np.inf if params.upper is None else params.upper
    return Batch(np.clip(batch.values, lo, hi), batch.offsets)


def intersect(l: np.ndarray, r: np.ndarray, params: Params) -> tuple[np.ndarray, np.ndarray]:
    """Intersect released ranges with public bounds (post-processing; never widens)."""
    if params.lower is not None:
        l = np.maximum(l, params.lower)
        r = np.maximum(r, params.lower)
    if params.upper is not None:
        l = np.minimum(l, params.upper)
        r = np.minimum(r, params.upper)
    return l, r


def amplified(epsilon: float, eta: float) -> float:
    """The eps_sub whose Poisson(eta)-subsampled run costs exactly ``epsilon`` under add/remove."""
    if eta >= 1.0:
        return epsilon
    return math.log1p(math.expm1(epsilon) / eta)


def subsample(batch: Batch, eta: float, rng: Rng) -> Batch:
    """Poisson subsample (each row kept independently with public rate eta), sorted.  The rows are
    exchangeable, so drawing the coins before sorting (only the kept rows are sorted) has the same law."""
    if eta >= 1.0:
        return batch.sorted()
    keep = rng.bernoulli(eta, batch.values.size)
    csum = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(keep, out=csum[1:])
    return Batch(batch.values[keep], csum[batch.offsets]).sorted()
