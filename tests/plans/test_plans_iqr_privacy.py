"""Summary plans (issue 17): the statistical privacy test of the compiled dp_iqr (core.summary.iqr).

As tests/plans/test_plans_privacy.py: ``dpsql.plans.run`` on RUNS groups holding D and on RUNS groups holding a
neighbour D' (D plus one row), the empirical epsilon lower bound (:func:`dpsql.testing.empirical_epsilon`) held
against the claim (epsilon, pure).  The IQR is NULL below ``n_hat eps = 60`` and routes wide from ``n_hat eps / 4
= 100``, so on the matrix's 40/41-row groups: epsilon 3 runs the near route (rows pass: one floor, one centre, two
quartiles), 10 splits the groups between the near and the wide route by their released count, the largest
accepted epsilon runs the wide route (the summary passes: one matching, two bucket passes per quartile, one tail
pass); epsilon 1 and the smallest answer mostly NULL (the count's noise decides).  Neighbours: every pair of the
adversarial matrix (:data:`dpsql.testing.EXTREME_NEIGHBOURS`: +-1e300, +-inf, 2**1000, the BIGINT/HUGEINT extremes
as DOUBLE, a subnormal, one far outlier, all equal plus one far, two far clusters, empty vs one row) at epsilon 3
and at the largest, the edge pairs at the smallest, 1 and 10, the integer extremes in BIGINT / HUGEINT columns and
doubled values (the data on which a matching that keeps chosen rows adjacent would swing the gap histogram); the
floor on a Poisson subsample (FLOOR_KEEP 8); the hybrid route (SMALL_ROWS 41: D read as rows, D' by its released
count either way)."""

from __future__ import annotations

import zlib

import pytest
from plan_privacy import EXTRA, releases

from dpsql import plans
from dpsql.core import scalefree, summary
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.testing import EDGE_PAIRS, EXTREME_NEIGHBOURS, empirical_epsilon


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(("iqr", *parts)).encode())


def _releases(d: list, sqltype: str, eps: float, seed: int) -> list:
    return releases(d, sqltype, seed, f"dp_iqr(x, epsilon := {eps!r})")


def _eps(sqltype: str, d: list, d2: list, eps: float, seed: int) -> float:
    a = [float("nan") if v is None else v for v in _releases(d, sqltype, eps, seed)]
    b = [float("nan") if v is None else v for v in _releases(d2, sqltype, eps, seed + 1)]
    return empirical_epsilon(a, b)


@pytest.mark.parametrize("epsilon", [3.0, MAX_EPSILON])
@pytest.mark.parametrize("pair", list(EXTREME_NEIGHBOURS))
def test_iqr_extreme_neighbours(pair: str, epsilon: float) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon)) <= epsilon


@pytest.mark.parametrize("epsilon", [MIN_EPSILON, 1.0, 10.0])
@pytest.mark.parametrize("pair", EDGE_PAIRS)
def test_iqr_edge_pairs(pair: str, epsilon: float) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon)) <= epsilon


@pytest.mark.parametrize("epsilon", [3.0, MAX_EPSILON])
@pytest.mark.parametrize("case", list(EXTRA))
def test_iqr_integer_columns_and_doubled_values(case: str, epsilon: float) -> None:
    sqltype, d, d2 = EXTRA[case]
    assert _eps(sqltype, d, d2, epsilon, _seed(case, epsilon)) <= epsilon


SAMPLED_PAIRS = ("one_at_+1e300", "one_at_-inf", "hugeint_min", "far_outlier_1e15", "two_far_clusters")


@pytest.mark.parametrize("epsilon", [3.0, 10.0, MAX_EPSILON])
@pytest.mark.parametrize("pair", SAMPLED_PAIRS)
def test_iqr_extreme_neighbours_with_the_floor_subsampled(pair: str, epsilon: float,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """FLOOR_KEEP 8: the 40-row groups' floor on a Poisson subsample (rate below 1 wherever the amplified epsilon
    stays below EPS_SUB_MAX; at the largest epsilon rate 1)."""
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 8.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon, "sampled")) <= epsilon


HYBRID_PAIRS = ("empty_vs_one", "one_at_+1e300", "one_at_-inf", "bigint_max", "subnormal", "far_outlier_1e15",
                "equal_plus_far", "two_far_clusters")


@pytest.mark.parametrize("floor", ["floor_whole", "floor_sampled"])
@pytest.mark.parametrize("epsilon", [10.0, MAX_EPSILON])
@pytest.mark.parametrize("pair", HYBRID_PAIRS)
def test_iqr_extreme_neighbours_on_the_hybrid_route(pair: str, epsilon: float, floor: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """SMALL_ROWS 41, the rows in chunks (ROWS_CHUNK 1000): at the largest epsilon D (40 rows) is read as rows and
    D' (41) by its released count either way; at 10 the near/wide split comes on top."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 41.0)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 1000.0)
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", floor == "floor_sampled")
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 8.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, epsilon, _seed(pair, epsilon, floor, "hybrid")) <= epsilon
