"""Summary plans (issue 17): the statistical privacy test of the compiled dp_median (keyed-MD5 matching).

Each case runs ``dpsql.plans.run`` on RUNS groups holding D and on RUNS groups holding a neighbour D' (D plus one
row) and holds the empirical epsilon lower bound (:func:`dpsql.testing.empirical_epsilon`) against the claim
(epsilon, pure).  Neighbours: the adversarial matrix's (:data:`dpsql.testing.EXTREME_NEIGHBOURS`: +-1e300, +-inf,
2**1000, the largest BIGINT and smallest HUGEINT as DOUBLE, a subnormal, one far outlier, all equal plus one far,
two far clusters, empty vs one row) at epsilon 1, the edge pairs at the smallest and the largest accepted
epsilon, the integer extremes in BIGINT / HUGEINT columns (cast by the plan), and doubled values (every value
twice), the data on which a matching that keeps chosen rows adjacent (a value hash, a trie order) would swing the
gap histogram by n/2 between neighbours.  An empty group is a group of one NULL row (n = 0: a NULL release).
dp_quantile at p = 0.1 and 0.9: the extreme pairs at epsilon 1 (near route) and at the largest epsilon (wide
route), one pair at the smallest.  The floor on a Poisson subsample (FLOOR_KEEP forced to 8 so that the 40-row
groups subsample): the extreme pairs at the smallest, unit and largest epsilon, the integer columns, doubled values.
The hybrid route (``plans.SMALL_ROWS`` 41: a 40-row D and its 41-row neighbour are read as rows or take the
passes by their released count, about half each way at epsilon 1, D rows and D' passes at the largest): the
extreme pairs at the smallest, unit and largest epsilon, with the floor whole and subsampled, dp_quantile at p =
0.1 and 0.9, the integer columns and doubled values.  (Elsewhere in tests/plans every group takes the passes:
tests/plans/conftest.py.)
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from plan_privacy import EXTRA, releases

from dpsql import plans
from dpsql.core import scalefree, summary
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.testing import EDGE_PAIRS, EXTREME_NEIGHBOURS, empirical_epsilon


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


def _releases(d: list, sqltype: str, eps: float, seed: int, p: float = 0.5) -> list:
    call = "dp_median(x, " if p == 0.5 else f"dp_quantile(x, {p!r}, "
    return releases(d, sqltype, seed, f"{call}epsilon := {eps!r})")


def _eps(sqltype: str, d: list, d2: list, eps: float, seed: int, p: float = 0.5) -> float:
    a = [float("nan") if v is None else v for v in _releases(d, sqltype, eps, seed, p)]
    b = [float("nan") if v is None else v for v in _releases(d2, sqltype, eps, seed + 1, p)]
    return empirical_epsilon(a, b)


@pytest.mark.parametrize("pair", list(EXTREME_NEIGHBOURS))
def test_extreme_neighbours_at_epsilon_one(pair: str) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, 1.0, _seed(pair)) <= 1.0


@pytest.mark.parametrize("epsilon", [MIN_EPSILON, MAX_EPSILON])
@pytest.mark.parametrize("pair", EDGE_PAIRS)
def test_extreme_neighbours_at_the_floor_and_ceiling(pair: str, epsilon: float) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon)) <= epsilon


@pytest.mark.parametrize("case", list(EXTRA))
def test_integer_columns_and_doubled_values(case: str) -> None:
    sqltype, d, d2 = EXTRA[case]
    assert _eps(sqltype, d, d2, 1.0, _seed(case)) <= 1.0


QUANTILE_PAIRS = ("empty_vs_one", "one_at_+inf", "one_at_-1e300", "far_outlier_1e15", "equal_plus_far",
                  "two_far_clusters")


@pytest.mark.parametrize("epsilon", [1.0, MAX_EPSILON])
@pytest.mark.parametrize("p", [0.1, 0.9])
@pytest.mark.parametrize("pair", QUANTILE_PAIRS)
def test_quantile_extreme_neighbours(pair: str, p: float, epsilon: float) -> None:
    """dp_quantile at p != 1/2: at epsilon 1 the groups (41 rows) take the near route (rows pass), at the
    largest epsilon the wide route (the summary passes)."""
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, p, epsilon), p) <= epsilon


@pytest.mark.parametrize("p", [0.1, 0.9])
def test_quantile_at_the_smallest_epsilon(p: float) -> None:
    d, d2 = EXTREME_NEIGHBOURS["one_at_+inf"]
    assert _eps("DOUBLE", d, d2, MIN_EPSILON, _seed(p, MIN_EPSILON), p) <= MIN_EPSILON


SAMPLED_PAIRS = ("one_at_+1e300", "one_at_-1e300", "one_at_+inf", "one_at_-inf", "bigint_max", "hugeint_min",
                 "far_outlier_1e15")


@pytest.fixture
def sampled_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor on a Poisson subsample with FLOOR_KEEP = 8: groups of 40 rows at rate 1/4 at epsilon 1 (the
    floor's share 0.05), at the smallest epsilon as their released count falls, at the largest rate 1 (the
    amplified epsilon would pass EPS_SUB_MAX)."""
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 8.0)
    assert scalefree.floor_rate(np.array([40.0]), 0.05)[0] == 0.25


@pytest.mark.parametrize("epsilon", [1.0, MIN_EPSILON, MAX_EPSILON])
@pytest.mark.parametrize("pair", SAMPLED_PAIRS)
def test_extreme_neighbours_with_the_floor_subsampled(pair: str, epsilon: float, sampled_floor: None) -> None:
    """The coin pass and the kept rows' matching (dpsql.plans, "Subsampled floor") on extreme neighbours."""
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon, "sampled")) <= epsilon


@pytest.mark.parametrize("case", ["bigint_max_column", "hugeint_min_column", "doubled_values"])
def test_integer_columns_with_the_floor_subsampled(case: str, sampled_floor: None) -> None:
    sqltype, d, d2 = EXTRA[case]
    assert _eps(sqltype, d, d2, 1.0, _seed(case, "sampled")) <= 1.0


HYBRID_PAIRS = ("empty_vs_one", "one_at_+1e300", "one_at_-inf", "bigint_max", "hugeint_min", "subnormal",
                "far_outlier_1e15", "equal_plus_far", "two_far_clusters")


@pytest.fixture(params=["floor_whole", "floor_sampled"])
def hybrid(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The hybrid route at SMALL_ROWS 41 (module docstring), its rows in chunks (ROWS_CHUNK 1000), the passes'
    floor on every row or (FLOOR_KEEP 8) on a Poisson subsample."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 41.0)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 1000.0)  # the rows route in chunks of ~25 groups
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", request.param == "floor_sampled")
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 8.0)
    return request.param


@pytest.mark.parametrize("epsilon", [1.0, MIN_EPSILON, MAX_EPSILON])
@pytest.mark.parametrize("pair", HYBRID_PAIRS)
def test_extreme_neighbours_on_the_hybrid_route(pair: str, epsilon: float, hybrid: str) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon, hybrid)) <= epsilon


@pytest.mark.parametrize("epsilon", [1.0, MAX_EPSILON])
@pytest.mark.parametrize("p", [0.1, 0.9])
@pytest.mark.parametrize("pair", ("one_at_+inf", "far_outlier_1e15", "two_far_clusters"))
def test_quantile_extreme_neighbours_on_the_hybrid_route(pair: str, p: float, epsilon: float, hybrid: str) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, p, epsilon, hybrid), p) <= epsilon


@pytest.mark.parametrize("case", list(EXTRA))
def test_integer_columns_on_the_hybrid_route(case: str, hybrid: str) -> None:
    sqltype, d, d2 = EXTRA[case]
    assert _eps(sqltype, d, d2, 1.0, _seed(case, hybrid)) <= 1.0
