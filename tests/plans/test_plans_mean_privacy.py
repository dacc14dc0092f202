"""Summary plans for dp_mean / dp_sum (issue 17): the statistical privacy test of the compiled mean and sum, and
their passes' independence of the values.

Each case runs ``dpsql.plans.run`` on RUNS groups holding D and on RUNS groups holding a neighbour D' (D plus one
row) and holds the empirical epsilon lower bound (:func:`dpsql.testing.empirical_epsilon`) against the claim
(epsilon, pure).  Neighbours: the adversarial matrix's (:data:`dpsql.testing.EXTREME_NEIGHBOURS`: +-1e300, +-inf,
2**1000, the largest BIGINT and smallest HUGEINT as DOUBLE, a subnormal, one far outlier, all equal plus one far,
two far clusters, empty vs one row).  Their 40 rows take the small-count route at epsilon 1 (and NULL at the
smallest epsilon); at the largest epsilon the range route (radius histogram, cap over |x - c|, clipped sums);
padded with 400 tame rows (D and D' alike) the range route at epsilon 1 (low class).  Integer columns (BIGINT,
HUGEINT, cast by the plan) and doubled values at the largest epsilon.  The floor subsampled (FLOOR_KEEP 8) on the
range route; the hybrid (SMALL_ROWS 41: D rows or passes by its released count).  Every group takes the passes
unless SMALL_ROWS is set (tests/plans/conftest.py).
"""

from __future__ import annotations

import zlib

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from plan_privacy import EXTRA, releases
from plan_statements import run_recorded

from dpsql import plans
from dpsql.core import scalefree, summary
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.noise import Rng
from dpsql.testing import EDGE_PAIRS, EXTREME_NEIGHBOURS, empirical_epsilon

#: 400 tame rows added to D and D' alike (the range route at epsilon 1)
PAD = [float(v) for v in np.random.default_rng(0).normal(3.0, 2.0, 400)]


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode())


def _releases(d: list, sqltype: str, eps: float, seed: int, kind: str) -> list:
    return releases(d, sqltype, seed, f"dp_{kind}(x, epsilon := {eps!r})")


def _eps(sqltype: str, d: list, d2: list, eps: float, seed: int, kind: str) -> float:
    a = [float("nan") if v is None else v for v in _releases(d, sqltype, eps, seed, kind)]
    b = [float("nan") if v is None else v for v in _releases(d2, sqltype, eps, seed + 1, kind)]
    return empirical_epsilon(a, b)


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("pair", list(EXTREME_NEIGHBOURS))
def test_extreme_neighbours(pair: str, kind: str) -> None:
    """Epsilon 1 (the small-count route) and the largest epsilon (the range route's passes)."""
    d, d2 = EXTREME_NEIGHBOURS[pair]
    for eps in (1.0, MAX_EPSILON):
        assert _eps("DOUBLE", d, d2, eps, _seed(pair, kind, eps), kind) <= eps


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("pair", EDGE_PAIRS)
def test_extreme_neighbours_at_the_smallest_epsilon(pair: str, kind: str) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", d, d2, MIN_EPSILON, _seed(pair, kind), kind) <= MIN_EPSILON


PADDED_PAIRS = ("one_at_+1e300", "one_at_-inf", "bigint_max", "subnormal", "far_outlier_1e15", "two_far_clusters")


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("pair", PADDED_PAIRS)
def test_padded_extreme_neighbours_on_the_range_route(pair: str, kind: str) -> None:
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", PAD + d, PAD + d2, 1.0, _seed(pair, kind, "pad"), kind) <= 1.0


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("case", list(EXTRA))
def test_integer_columns_and_doubled_values(case: str, kind: str) -> None:
    sqltype, d, d2 = EXTRA[case]
    assert _eps(sqltype, d, d2, MAX_EPSILON, _seed(case, kind), kind) <= MAX_EPSILON


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("pair", ("one_at_+inf", "hugeint_min", "far_outlier_1e15"))
def test_floor_subsampled_on_the_range_route(pair: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 8.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    assert _eps("DOUBLE", PAD + d, PAD + d2, 1.0, _seed(pair, kind, "sampled"), kind) <= 1.0


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("pair", ("empty_vs_one", "one_at_+1e300", "far_outlier_1e15", "two_far_clusters"))
def test_hybrid_route(pair: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SMALL_ROWS 41: at epsilon 1 the 40/41-row groups split between rows and passes by their released count."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 41.0)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 1000.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    for eps in (1.0, MAX_EPSILON):
        assert _eps("DOUBLE", d, d2, eps, _seed(pair, kind, eps, "hybrid"), kind) <= eps


EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, 5e-324, 2.0**-1060, 9.3e18]


def _statements(monkeypatch: pytest.MonkeyPatch, g: np.ndarray, x: np.ndarray, sql: str) -> list[str]:
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"g": g, "x": x}))
    return run_recorded(monkeypatch, con, sql, Rng.seeded(9))[1]


@pytest.mark.parametrize("small", [0.0, 500.0])
@pytest.mark.parametrize("kind", ["mean", "sum"])
def test_passes_do_not_depend_on_the_values(kind: str, small: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same group sizes and generator give the same statements, whatever the values (tame, or +-1e300,
    +-inf, huge integers, subnormals and a far outlier), at every route class (sizes at epsilon 1: few, mid,
    low, high), the floor subsampled, all passes or the hybrid's split."""
    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 64.0)
    sizes = (30, 260, 480, 520, 3000)
    g = np.repeat(np.arange(len(sizes)), sizes)
    r = np.random.default_rng(9)
    tame = r.normal(0, 1, g.size)
    wild = r.choice(EXTREME, g.size)
    wild[5] = 1e15
    sql = f"SELECT g, dp_{kind}(x, epsilon := 1.0) AS m FROM t GROUP BY g"
    runs = [_statements(monkeypatch, g, x, sql) for x in (tame, wild)]
    assert runs[0] == runs[1]
    assert any("count_if(_bad)" in q for q in runs[0]) and any("AS BIGINT) AS s FROM" in q for q in runs[0])
