"""Summary plans (issue 17), trusted mode: a dp call on a value of a non-numeric type goes to the macros, which
refuse it by its type (DPSQL-E060) before reading a row.  Before, the passes' ``CAST(value AS DOUBLE)`` failed or
not on the values (a VARCHAR row that does not parse, its text quoted in DuckDB's message) or released a number."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql import plans

CALLS = ["dp_mean(v, epsilon := 1.0)", "dp_sum(v, epsilon := 1.0)", "dp_median(v, epsilon := 1.0)",
         "dp_iqr(v, epsilon := 1.0)", "dp_var(v, epsilon := 1.0)", "dp_quantile(v, 0.9, epsilon := 1.0)"]


def _con(value: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"threads": 1})
    dpsql.install(con)
    con.execute(f"CREATE TABLE t AS SELECT i % 3 AS g, {value} AS v FROM range(200) r(i)")
    return con


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("value", [
    "CASE WHEN i = 5 THEN 'secret-abc' ELSE (i * 1.5)::VARCHAR END",  # one row does not parse
    "(i * 1.5)::VARCHAR",  # every row parses: still refused, by its type
    "i % 2 = 0",
    "DATE '2020-01-01' + i::INTEGER",
])
def test_non_numeric_value_is_refused_by_its_type(value: str, call: str) -> None:
    con = _con(value)
    sql = f"SELECT g, {call} AS r FROM t GROUP BY g"
    assert plans.compile_query(sql) is not None
    with pytest.raises(duckdb.Error, match="DPSQL-E060") as e:
        plans.run(con, sql)
    assert "secret" not in str(e.value)


@pytest.mark.parametrize("typ", ["TINYINT", "UBIGINT", "HUGEINT", "UHUGEINT", "DECIMAL(18, 3)", "FLOAT", "DOUBLE",
                                 "BIGNUM"])
def test_numeric_values_take_the_plans(typ: str, monkeypatch: pytest.MonkeyPatch) -> None:
    con = _con(f"CAST(i % 100 AS {typ})")
    sql = "SELECT g, dp_mean(v, epsilon := 1.0) AS m, dp_median(v + 1, epsilon := 1.0) AS q FROM t GROUP BY g"
    plan = plans.compile_query(sql)
    assert plans._numeric_values(con, plan)
    seen = []
    monkeypatch.setattr(plans, "_released_count", lambda s, c, r, f=plans._released_count: seen.append(c) or f(s, c, r))
    assert plans.run(con, sql).num_rows == 3
    assert len(seen) == 2  # the plans' released counts: not the macros


def test_null_literal_value_takes_the_plans() -> None:
    con = _con("NULL")
    assert plans._numeric_values(con, plans.compile_query("SELECT dp_mean(v, epsilon := 1.0) FROM t"))
