"""Summary plans for dp_var / dp_stddev (issue 17): the statistical privacy test of the compiled route.

Each case runs ``dpsql.plans.run`` on RUNS groups holding D and on RUNS groups holding a neighbour D' (D plus one
row) and holds the empirical epsilon lower bound (:func:`dpsql.testing.empirical_epsilon`) against the claim
(epsilon, pure).  Every group takes the summary passes (tests/plans/conftest.py: SMALL_ROWS 0): the top-k edges,
the exact anchor and the fsum core sums (dpsql.plans.var).  Neighbours: the adversarial matrix's
(:data:`dpsql.testing.EXTREME_NEIGHBOURS`: +-1e300, +-inf, 2**1000, the largest BIGINT and smallest HUGEINT as
DOUBLE, a subnormal, one far outlier, all equal plus one far, two far clusters, empty vs one row) at epsilon 1 for
dp_var and dp_stddev, the edge pairs at the smallest and the largest accepted epsilon, the integer extremes in
BIGINT / HUGEINT columns (cast by the plan), and doubled values (ties at the core's edges).  An empty group is a
group of one NULL row (n = 0: dp_var still releases a grid point).  The hybrid route (``plans.SMALL_ROWS`` 41: a
40-row D and its 41-row neighbour are read as rows or take the passes by their released count): the extreme pairs
at the smallest, unit and largest epsilon, the rows' bounds in chunks on threads.  The default's top class
(dpsql.core.moments, ``VAR_TOP`` lowered to 0) through the passes and the hybrid route.
"""

from __future__ import annotations

import zlib

import pytest
from plan_privacy import EXTRA, releases

from dpsql import plans
from dpsql.core import moments as core_moments
from dpsql.core import summary_var
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.testing import EDGE_PAIRS, EXTREME_NEIGHBOURS, empirical_epsilon


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


def _releases(d: list, sqltype: str, eps: float, seed: int, fn: str) -> list:
    vals = releases(d, sqltype, seed, f"{fn}(x, epsilon := {eps!r})")
    assert None not in vals
    return vals


def _eps(sqltype: str, d: list, d2: list, eps: float, seed: int, fn: str = "dp_var") -> float:
    return empirical_epsilon(_releases(d, sqltype, eps, seed, fn), _releases(d2, sqltype, eps, seed + 1, fn))


@pytest.mark.parametrize("fn", ["dp_var", "dp_stddev"])
@pytest.mark.parametrize("pair", list(EXTREME_NEIGHBOURS))
def test_extreme_neighbours_at_epsilon_one(pair: str, fn: str) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, 1.0, _seed(pair, fn), fn) <= 1.0


@pytest.mark.parametrize("epsilon", [MIN_EPSILON, MAX_EPSILON])
@pytest.mark.parametrize("pair", EDGE_PAIRS)
def test_extreme_neighbours_at_the_floor_and_ceiling(pair: str, epsilon: float) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon)) <= epsilon


@pytest.mark.parametrize("case", list(EXTRA))
def test_integer_columns_and_doubled_values(case: str) -> None:
    sqltype, d, d2 = EXTRA[case]
    assert _eps(sqltype, d, d2, 1.0, _seed(case)) <= 1.0


HYBRID_PAIRS = ("empty_vs_one", "one_at_+1e300", "one_at_-inf", "bigint_max", "hugeint_min", "subnormal",
                "far_outlier_1e15", "equal_plus_far", "two_far_clusters")


@pytest.mark.parametrize("epsilon", [1.0, MIN_EPSILON, MAX_EPSILON])
@pytest.mark.parametrize("pair", HYBRID_PAIRS)
def test_extreme_neighbours_on_the_hybrid_route(pair: str, epsilon: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plans, "SMALL_ROWS", 41.0)
    monkeypatch.setattr(summary_var, "ROWS_CHUNK", 1000.0)  # the rows' bounds in chunks of ~25 groups, on threads
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon, "hybrid")) <= epsilon


@pytest.mark.parametrize(("pair", "epsilon"), [(p, 4.0) for p in EXTREME_NEIGHBOURS] +
                         [(p, e) for p in EDGE_PAIRS for e in (MIN_EPSILON, MAX_EPSILON)])
def test_top_class_through_the_plans(pair: str, epsilon: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """dp_var's default top class (dpsql.core.moments; ``VAR_TOP`` 0: every group takes it): the mean and the mean
    of the squares through the passes, the squares built in SQL from the released c (NULL rows, +-inf, +-1e300 and
    the integer extremes among the values)."""
    monkeypatch.setattr(core_moments, "VAR_TOP", 0.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon, "top")) <= epsilon


@pytest.mark.parametrize("pair", ["empty_vs_one", "one_at_-inf", "equal_plus_far", "two_far_clusters"])
def test_top_class_on_the_hybrid_route(pair: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_moments, "VAR_TOP", 0.0)
    monkeypatch.setattr(plans, "SMALL_ROWS", 41.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, 4.0, _seed(pair, "top hybrid")) <= 4.0
