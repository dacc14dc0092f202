"""What BI tools ask by default (issue 19): zero-row probes, public-key pick-lists, the plain-aggregate opt-in."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import duckdb
import pytest
import sqlglot
from corpus import PICK_LISTS, PLAIN, PROBES, VISITS, extended_catalog, hospital_catalog
from sqlglot import exp

from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.guard.catalog import Catalog


def _tables(sql: str) -> list[str]:
    return [t.name for t in sqlglot.parse_one(sql, read="duckdb").find_all(exp.Table)]


@pytest.mark.parametrize("sql", PROBES)
def test_probes_are_schema_only_free_and_bind(sql: str, exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan(sql, hospital_catalog(cap=1))  # the cap refuses dp_mean(..., epsilon := 5) outside a probe
    assert p.schema_only and p.cost == 0 and p.delta == 0 and p.mechanisms == []
    rel = exact_con.sql(p.sql)  # binds (the session binds it too, and never runs it)
    assert rel.columns and (not p.output_columns or list(rel.columns) == p.output_columns)


def test_a_probe_reports_the_columns_and_types_of_the_query_it_wraps(exact_con: duckdb.DuckDBPyConnection) -> None:
    inner = "SELECT clinic, dp_count(*, epsilon := 0.1), dp_mean_ci(cost, epsilon := 0.1) AS m FROM visits GROUP BY 1"
    real = plan(inner, hospital_catalog())
    probe = plan(f"SELECT * FROM ({inner}) AS q LIMIT 0", hospital_catalog())
    wrapped = plan(f"SELECT * FROM ({inner}) AS q", hospital_catalog())
    assert probe.schema_only and not real.schema_only
    real_rel, probe_rel = exact_con.sql(real.sql), exact_con.sql(probe.sql)
    assert probe_rel.types == real_rel.types
    assert list(probe_rel.columns) == wrapped.output_columns  # the names a session gives the real answer
    bare = plan(inner + " LIMIT 0", hospital_catalog())
    assert bare.output_columns == real.output_columns == ["clinic", "dp_count(*, epsilon := 0.1)", "m"]


@pytest.mark.parametrize(("sql", "rows"), PICK_LISTS)
def test_pick_lists_are_the_declared_domain(sql: str, rows: list, exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan(sql, extended_catalog())
    assert p.cost == 0 and p.mechanisms == [] and not p.schema_only
    assert _tables(p.sql) == []  # the protected table is gone: only the declared keys are read
    assert exact_con.sql(p.sql).fetchall() == rows


def test_a_declared_key_without_rows_appears_and_an_undeclared_value_does_not(
        exact_con: duckdb.DuckDBPyConnection) -> None:
    visits = dataclasses.replace(VISITS, public_keys={"clinic": ("A", "B", "C", "Z")})
    cat = Catalog({"visits": visits})
    p = plan("SELECT DISTINCT clinic FROM visits ORDER BY clinic", cat)
    assert exact_con.sql(p.sql).fetchall() == [("A",), ("B",), ("C",), ("Z",)]  # the data hold 'D', no 'Z'


def test_a_pick_list_on_the_privacy_unit_is_refused() -> None:
    visits = dataclasses.replace(VISITS, public_keys={"patient_id": (1, 2)})
    with pytest.raises(PrivacyError) as e:
        plan("SELECT DISTINCT patient_id FROM visits", Catalog({"visits": visits}))
    assert e.value.code == "DPSQL-E050"


def opted_in() -> Catalog:
    return dataclasses.replace(hospital_catalog(), plain_aggregate_epsilon="0.1")


@pytest.mark.parametrize(("sql", "dp_sql"), PLAIN)
def test_opt_in_rewrites_plain_aggregates_and_costs_the_rewritten_text(
        sql: str, dp_sql: str, exact_con: duckdb.DuckDBPyConnection) -> None:
    p, q = plan(sql, opted_in()), plan(dp_sql, hospital_catalog())
    assert p.cost == q.cost and p.mechanisms == q.mechanisms
    assert p.output_columns == q.output_columns
    assert exact_con.sql(p.sql).columns == exact_con.sql(q.sql).columns


def test_under_the_opt_in_a_probe_has_the_rewritten_types(exact_con: duckdb.DuckDBPyConnection) -> None:
    chart = "SELECT clinic, COUNT(*) AS count, AVG(cost) FROM visits GROUP BY clinic"
    real, probe = plan(chart, opted_in()), plan(f"SELECT * FROM ({chart}) AS q LIMIT 0", opted_in())
    assert probe.schema_only and probe.cost == 0 and real.cost == Decimal("0.6")
    assert exact_con.sql(probe.sql).types == exact_con.sql(real.sql).types


def test_opt_in_unaliased_items_keep_their_written_names() -> None:
    p = plan("SELECT clinic, COUNT(*), avg(cost) FROM visits GROUP BY clinic", opted_in())
    assert p.output_columns == ["clinic", "count(*)", "avg(cost)"]
    assert p.cost == Decimal("0.6")  # 2 calls x 0.1 x 3 rows per patient
    assert [m["function"] for m in p.mechanisms] == ["dp_count_star", "dp_mean"]


@pytest.mark.parametrize(("sql", "code"), [
    ("SELECT count(DISTINCT note) FROM visits", "DPSQL-E021"),
    ("SELECT max(cost) FROM visits", "DPSQL-E021"),
    ("SELECT note, count(*) FROM visits GROUP BY note", "DPSQL-E030"),
    ("SELECT count(*) OVER () FROM visits", "DPSQL-E050"),
    ("SELECT count(*) FILTER (WHERE cost > 1) FROM visits", "DPSQL-E012"),
    ("SELECT avg(cost) FROM visits WHERE cost > (SELECT avg(cost) FROM visits)", "DPSQL-E051"),
])
def test_opt_in_leaves_everything_else_refused(sql: str, code: str) -> None:
    with pytest.raises(PrivacyError) as e:
        plan(sql, opted_in())
    assert e.value.code == code


@pytest.mark.parametrize(("sql", "alternative"), [
    ("SELECT avg(cost) FROM visits", "use dp_mean(cost, epsilon := ...)"),
    ("SELECT count(*) FROM visits", "use dp_count(*, epsilon := ...)"),
    ("SELECT clinic, sum(cost) FROM visits GROUP BY clinic", "use dp_sum(cost, epsilon := ...)"),
    ("SELECT count(note) FROM visits", "use dp_count(note, epsilon := ...)"),
    ("SELECT median(cost) FROM visits", "use dp_median(cost, epsilon := ...)"),
    ("SELECT stddev(cost) FROM visits", "use dp_stddev(cost, epsilon := ...)"),
    ("SELECT min(cost) FROM visits", "dp_quantile(cost, 0.05, epsilon := ...)"),
])
def test_without_the_opt_in_the_refusal_names_the_dp_alternative(sql: str, alternative: str) -> None:
    with pytest.raises(PrivacyError) as e:
        plan(sql, hospital_catalog())
    assert e.value.code == "DPSQL-E021" and alternative in e.value.message
    if "min" not in sql and "median" not in sql and "stddev" not in sql:
        assert "dpsql admin plain-aggregates" in e.value.message


def test_the_pick_list_refusal_says_what_a_pick_list_needs() -> None:
    with pytest.raises(PrivacyError) as e:
        plan("SELECT DISTINCT clinic FROM visits WHERE cost > 50", hospital_catalog())
    assert e.value.code == "DPSQL-E050" and "declared public keys" in e.value.message
