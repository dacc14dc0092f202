"""dp_count's route from row counts (issue 16): the binding passes DuckDB's per-group count() to the core's
registered ``count`` method (``Method.counts`` / ``counts_interval``); the binding adds no noise of its own.

The release's law is the one the binding used to draw itself (same draws for the same seed), and the empirical
epsilon of neighbouring counts n, n + 1 stays within the claim at the extremes of the count (0, 2**31, 2**53,
2**62) and of the accepted epsilon (``MIN_EPSILON``, 1, ``MAX_EPSILON``)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from dpsql.core.accounting import pure
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON, Params, get_method
from dpsql.noise import Rng, discrete_laplace
from dpsql.testing import INTERVAL_PARTS, empirical_epsilon

RUNS = 300
COUNTS = (0, 1, 40, 2**31, 2**53 - 1, 2**62)
LAPLACE = get_method("count", "laplace")


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


@pytest.mark.parametrize("epsilon", [MIN_EPSILON, 0.5, 1.0, MAX_EPSILON])
def test_same_draws_as_the_binding_drew_before(epsilon: float) -> None:
    """``max(0, n + DLap(1/eps))`` as float64, one draw per group: the binding's former formula, seed for seed."""
    counts = np.array([0, 1, 2, 5, 40, 1000, 2**31, 2**53 - 1, 2**62], dtype=np.int64)
    got = LAPLACE.counts(counts, pure(epsilon), Params(epsilon=epsilon), Rng.seeded(11))
    old = np.maximum(counts + discrete_laplace(1.0 / epsilon, Rng.seeded(11), counts.size), 0).astype(np.float64)
    assert got.dtype == np.float64 and np.array_equal(got, old)
    value, lo, hi = LAPLACE.counts_interval(counts, pure(epsilon), Params(epsilon=epsilon, level=0.9), Rng.seeded(11))
    assert np.array_equal(value, old) and np.all(lo <= value) and np.all(value <= hi)


def test_rows_and_counts_routes_agree() -> None:
    """``run`` on a batch is the counts route on its group sizes (same draws for the same seed)."""
    from dpsql.core import Batch

    batch = Batch.from_lists([[1.0, 2.0], [], [3.0] * 7, [float("nan"), 4.0]])  # NaN is not a row of a batch
    params = Params(epsilon=0.7)
    rows = LAPLACE.run(batch, pure(0.7), params, Rng.seeded(5))
    counts = LAPLACE.counts(np.array([2, 0, 7, 1]), pure(0.7), params, Rng.seeded(5))
    assert np.array_equal(rows, counts)


@pytest.mark.parametrize("part", [None, "lo", "hi"])
@pytest.mark.parametrize("epsilon", [MIN_EPSILON, 1.0, MAX_EPSILON])
@pytest.mark.parametrize("n", COUNTS)
def test_neighbouring_counts_within_the_claim(n: int, epsilon: float, part: str | None) -> None:
    """n rows against n + 1 rows (one unit added), ``RUNS`` releases a side; the interval's ends are
    post-processing of the same release."""
    params = Params(epsilon=epsilon, level=0.95 if part else None)
    rng = Rng.seeded(_seed(n, epsilon, part))
    sides = []
    for m in (n, n + 1):
        counts = np.full(RUNS, m, dtype=np.int64)
        if part is None:
            sides.append(LAPLACE.counts(counts, pure(epsilon), params, rng))
        else:
            sides.append(INTERVAL_PARTS[part](*LAPLACE.counts_interval(counts, pure(epsilon), params, rng)))
    a, b = sides
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    assert empirical_epsilon(a, b) <= epsilon


def test_a_sharp_count_is_detected() -> None:
    """Control: the test sees a leak.  Counts released with 10x too little noise show far more than the claim."""
    rng = Rng.seeded(3)
    a, b = (LAPLACE.counts(np.full(RUNS, m, dtype=np.int64), pure(10.0), Params(epsilon=10.0), rng) for m in (40, 41))
    assert empirical_epsilon(a, b) > 1.0


def test_counts_route_spends_what_it_declares() -> None:
    """The spending meter sees the counts route charge eps once (the groups are disjoint), as the rows route does."""
    from dpsql.core.spending import meter

    for route in (LAPLACE.counts, lambda *a: LAPLACE.counts_interval(*a)[0]):
        with meter() as m:
            route(np.array([3, 0, 5]), pure(0.4), Params(epsilon=0.4, level=0.9), Rng.seeded(1))
        assert m.spent("pure") == pytest.approx(0.4)
