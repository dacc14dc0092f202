"""The adversarial privacy matrix (issue 11): every registered method against neighbours at the extremes.

Each cell runs a method on D and on D plus one row (a row at +-1e300, +-inf, 2**1000, the largest BIGINT,
the smallest HUGEINT, a subnormal; all rows equal plus one far away; two far clusters; the empty group
against one row) and holds the empirical epsilon lower bound (``dpsql.testing.empirical_epsilon``) against
the method's claim.  Every pair runs at epsilon = 1; the floor and the ceiling of the accepted epsilon run
on the pairs most likely to break a float computation.  ``benchmarks/privacy_matrix.py`` runs the full
matrix with more runs and writes the table for the issue note.
"""

import zlib

import pytest

from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.testing import EDGE_PAIRS, EXTREME_NEIGHBOURS, matrix_cell, matrix_methods, matrix_params

RUNS = 300
METHODS = matrix_methods()


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


@pytest.mark.parametrize("pair", list(EXTREME_NEIGHBOURS))
@pytest.mark.parametrize(("aggregate", "method"), METHODS)
def test_extreme_neighbours_at_epsilon_one(aggregate, method, pair):
    params = matrix_params(aggregate, method, 1.0)
    eps, claim, note = matrix_cell(aggregate, method, params, pair, RUNS, _seed(aggregate, method, pair))
    assert eps <= claim, (eps, claim, note)


@pytest.mark.parametrize("epsilon", [MIN_EPSILON, MAX_EPSILON])
@pytest.mark.parametrize("pair", EDGE_PAIRS)
@pytest.mark.parametrize(("aggregate", "method"), METHODS)
def test_extreme_neighbours_at_the_floor_and_ceiling(aggregate, method, pair, epsilon):
    params = matrix_params(aggregate, method, epsilon)
    eps, claim, note = matrix_cell(aggregate, method, params, pair, RUNS, _seed(aggregate, method, pair, epsilon))
    assert eps <= claim, (eps, claim, note)


def test_the_matrix_covers_every_registered_method():
    from dpsql.core.registry import AGGREGATES, methods

    assert len(METHODS) == sum(len(methods(a)) for a in AGGREGATES) >= 29


@pytest.mark.parametrize(("aggregate", "method"), METHODS)
def test_widest_bounds_run_or_are_refused_up_front(aggregate, method):
    """Bounds at +-1e301 (inside the accepted +-2**1000): the method runs, or validate refuses the call
    (so the guard answers E060 before any charge); it never fails after the parameters were accepted.
    The clipped and bounded variances used to square ``upper - lower`` into an OverflowError."""
    from dpsql.core import Batch, ParameterError, run
    from dpsql.core.registry import get_method, validate
    from dpsql.noise import Rng

    params = matrix_params(aggregate, method, 1.0, bounds=(-1e301, 1e301))
    try:
        validate(aggregate, get_method(aggregate, method), params)  # what privacy_cost, the guard and the binding run
    except ParameterError:
        assert get_method(aggregate, method).check is not None
        return
    out = run(aggregate, Batch.from_lists([[1.0, 2.0, 3.0] * 50, []]), params, method=method, rng=Rng.seeded(3))
    assert out.shape == (2,)
