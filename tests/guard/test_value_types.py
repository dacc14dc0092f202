"""dpsql.guard.value_types: the zero-row probes of dp_* values that explain a bind failure (issue 14)."""

from __future__ import annotations

import duckdb
import pytest

from dpsql.guard.catalog import Catalog, TableInfo
from dpsql.guard.value_types import numeric, type_error, value_probes

T = TableInfo("t", "protected", {"uid": "INTEGER", "x": "DOUBLE", "s": "VARCHAR"}, privacy_unit="uid")
CATALOG = Catalog({"t": T})


def _probes(sql: str, catalog: Catalog = CATALOG) -> list[tuple[str, str, str]]:
    return [(p.function, p.text, p.sql) for p in value_probes(sql, catalog)]


def test_one_probe_per_numeric_value_in_text_order() -> None:
    sql = ("SELECT dp_count(s, epsilon := 1), dp_count_star(epsilon := 1), dp_mean(x || 'a', epsilon := 1) "
           "FILTER (WHERE x > 0), dp_quantile(s, 0.5, epsilon := 1) FROM t WHERE x > 1 GROUP BY s HAVING 1 = 1 "
           "ORDER BY 1 LIMIT 3")
    assert _probes(sql) == [
        ("dp_mean", "x || 'a'", "SELECT x || 'a' FROM t LIMIT 0"),
        ("dp_quantile", "s", "SELECT s FROM t LIMIT 0"),
    ]


def test_a_probe_keeps_the_ctes_in_scope_only() -> None:
    sql = ("WITH a AS (SELECT uid, s FROM t), b AS (SELECT dp_mean(s, epsilon := 1) AS m FROM a), "
           "c AS (SELECT 1 AS one) SELECT dp_sum(v, epsilon := 1) FROM (SELECT s AS v FROM a) q, b")
    assert _probes(sql) == [
        ("dp_mean", "s", "WITH a AS (SELECT uid, s FROM t) SELECT s FROM a LIMIT 0"),
        ("dp_sum", "v", "WITH a AS (SELECT uid, s FROM t), b AS (SELECT DP_MEAN(s, epsilon := 1) AS m FROM a), "
                        "c AS (SELECT 1 AS one) SELECT v FROM (SELECT s AS v FROM a) AS q, b LIMIT 0"),
    ]


def test_the_value_is_named_as_written() -> None:
    sql = ("SELECT dp_mean(CAST(x AS VARCHAR), epsilon := 1), dp_sum(x::text, epsilon := 1), dp_var(x::text, "
           "epsilon := 1), dp_iqr(strftime(d, '%Y, %m'), epsilon := 1), dp_median(upper(\n  s), epsilon := 1) FROM t")
    assert [p.text for p in value_probes(sql, CATALOG)] == [
        "CAST(x AS VARCHAR)", "x::text", "x::text", "strftime(d, '%Y, %m')", "upper( s)"]
    assert [p.sql for p in value_probes(sql, CATALOG)][:2] == ["SELECT CAST(x AS TEXT) FROM t LIMIT 0"] * 2


def test_plain_aggregates_are_probed_with_the_owners_opt_in() -> None:
    assert _probes("SELECT avg(s) FROM t") == []
    opted = Catalog({"t": T}, plain_aggregate_epsilon="0.1")
    assert _probes("SELECT avg(s) FROM t", opted) == [("dp_mean", "s", "SELECT s FROM t LIMIT 0")]


def test_probes_bind_to_the_values_types() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (uid INTEGER, x DOUBLE, s VARCHAR, d DATE)")
    sql = ("SELECT dp_mean(x, epsilon := 1), dp_mean(d + 1, epsilon := 1), dp_var(x > 0, epsilon := 1), "
           "dp_sum(NULL, epsilon := 1), dp_sum(CAST(x AS DECIMAL(9, 2)), epsilon := 1) FROM t")
    types = [str(con.sql(p.sql).types[0]) for p in value_probes(sql, CATALOG)]
    assert types == ["DOUBLE", "DATE", "BOOLEAN", '"NULL"', "DECIMAL(9,2)"]
    assert [numeric(t) for t in types] == [True, False, False, True, True]


@pytest.mark.parametrize("sql", ["", "SELECT (", "SELECT 1"])
def test_nothing_to_probe(sql: str) -> None:
    assert value_probes(sql, CATALOG) == []


def test_the_message_is_the_guards() -> None:
    assert str(type_error("dp_mean", "name", "VARCHAR")) == (
        "DPSQL-E060: dp_mean: its value must be numeric; name is VARCHAR (convert it, e.g. TRY_CAST(name AS "
        "DOUBLE), or count it with dp_count)")
