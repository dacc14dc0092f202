"""Trusted mode over a source that draws (issue 17 review): each pass of the summary plans evaluates the source
again, so a query whose text draws (``random()``, a UUID, a sample, an unknown function) is materialized once
(:func:`dpsql.plans.volatile`, :func:`dpsql.plans.run`'s default), and every pass sees the same rows."""

from __future__ import annotations

import contextlib

import duckdb
import pytest

import dpsql
from dpsql import plans
from dpsql.noise import Rng


@pytest.mark.parametrize("sql,expected", [
    ("SELECT dp_mean(x, epsilon := 1) FROM t", False),
    ("SELECT g, DP_MEDIAN(x, epsilon := 1) AS m FROM t WHERE x > 0 GROUP BY g", False),
    ("SELECT dp_var(x, epsilon := 1), dp_stddev(x, epsilon := 1) FROM t", False),
    ("SELECT dp_mean(x, epsilon := 1) FROM t WHERE random() < 0.5", True),
    ("SELECT dp_median(x + random(), epsilon := 1) FROM t", True),
    ("SELECT dp_mean(x, epsilon := 1) FROM t USING SAMPLE 10%", True),
    ("SELECT dp_mean(x, epsilon := 1) FROM (SELECT * FROM t ORDER BY random() LIMIT 5) s", True),
    ("SELECT dp_mean(x, epsilon := 1) FROM t WHERE gen_random_uuid() IS NOT NULL", True),
    ("SELECT dp_mean(x, epsilon := 1) FROM t WHERE my_udf(x) > 0", True),
])
def test_volatile_reads_the_text(sql: str, expected: bool) -> None:
    assert plans.volatile(sql) is expected


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    c = dpsql.install(duckdb.connect())
    c.execute("CREATE TABLE t AS SELECT (i % 3)::INTEGER AS g, ((i * 7919) % 1000)::DOUBLE AS x "
              "FROM range(200000) r(i)")
    yield c
    c.close()


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    entered: list[int] = []
    real = plans.materialized

    @contextlib.contextmanager
    def counting(c, plan):  # noqa: ANN001, ANN202
        entered.append(1)
        with real(c, plan) as local:
            yield local

    monkeypatch.setattr(plans, "materialized", counting)
    return entered


@pytest.mark.parametrize("agg", ["dp_mean", "dp_median", "dp_var", "dp_iqr"])
def test_a_drawing_source_is_read_once(con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch,
                                       agg: str) -> None:
    entered = _spy(monkeypatch)
    sql = f"SELECT g, {agg}(x, epsilon := 1.0) AS v FROM t WHERE random() < 0.5 GROUP BY g"
    assert plans.compile_query(sql) is not None
    for seed in range(3):  # without the materialization the passes saw other rows: "row count changed" errors
        out = plans.run(con, sql, Rng.seeded(seed))
        assert out.num_rows == 3
    assert len(entered) == 3
    assert not con.sql("SELECT * FROM duckdb_tables() WHERE table_name LIKE '_dpsql_plan_src%'").fetchall()


def test_a_fixed_source_is_not_copied(con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch) -> None:
    entered = _spy(monkeypatch)
    plans.run(con, "SELECT g, dp_mean(x, epsilon := 1.0) FROM t GROUP BY g", Rng.seeded(0))
    assert not entered
    plans.run(con, "SELECT g, dp_mean(x, epsilon := 1.0) FROM t GROUP BY g", Rng.seeded(0), materialize=True)
    assert len(entered) == 1
