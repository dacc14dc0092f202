"""Allowed queries: the plan's SQL parses and runs, its rewrites do what they claim, its cost is exact."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
import sqlglot
from conftest import exact_binding, hospital
from corpus import ALLOWED, extended_catalog, hospital_catalog

from dpsql.errors import PrivacyError
from dpsql.guard import plan


@pytest.mark.parametrize(("sql", "cost"), ALLOWED)
def test_allowed_cost_is_exact(sql: str, cost: str) -> None:
    p = plan(sql, hospital_catalog())
    assert p.cost == Decimal(cost)
    assert p.delta == 0
    assert p.cost == p.cost.quantize(Decimal("1e-18"))


@pytest.mark.parametrize(("sql", "cost"), ALLOWED)
def test_allowed_sql_parses_and_runs(sql: str, cost: str, exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan(sql, hospital_catalog())
    assert len(sqlglot.parse(p.sql, read="duckdb")) == 1
    assert len(exact_con.extract_statements(p.sql)) == 1
    rel = exact_con.sql(p.sql)
    assert list(rel.columns) == p.output_columns
    rel.fetchall()


def test_mechanisms_describe_each_call() -> None:
    p = plan("SELECT clinic, dp_count(*, epsilon := 0.25), dp_mean(cost, epsilon := 0.5) FROM visits "
             "GROUP BY clinic", hospital_catalog())
    assert [m["function"] for m in p.mechanisms] == ["dp_count", "dp_mean"]
    assert [m["aggregate"] for m in p.mechanisms] == ["count", "mean"]
    assert all(m["notion"] == "pure" and m["multiplier"] == 3 for m in p.mechanisms)
    assert [m["epsilon"] for m in p.mechanisms] == [0.25, 0.5]
    assert p.cost == Decimal("2.25")


def test_exact_decimal_costs_do_not_drift() -> None:
    """Ten queries of eps 0.1 on a row-level table cost exactly 1, never 1 + float error."""
    total = sum((plan("SELECT dp_mean(amount, epsilon := 0.1) FROM events", extended_catalog()).cost
                 for _ in range(10)), Decimal(0))
    assert total == Decimal(1)


def test_groups_multiply_by_rows_and_groups() -> None:
    """diag: k = 2 rows and g = 2 groups per unit; no GROUP BY pays k only."""
    cat = extended_catalog(delta=1e-6)
    assert plan("SELECT dp_count(*, epsilon := 0.5) FROM diag", cat).cost == Decimal("1")
    p = plan("SELECT code, dp_count(*, epsilon := 0.5) FROM diag GROUP BY code", cat)
    assert p.cost == Decimal("4")  # release 0.5 * 4 plus selection 0.5 * 4
    assert p.delta == Decimal("0.000001")
    assert [m.get("purpose") for m in p.mechanisms] == [None, "partition selection"]


def test_zcdp_accounting_converts_pure_eps() -> None:
    p = plan("SELECT dp_count(*, epsilon := 0.1) FROM visits", hospital_catalog(accounting="zcdp"))
    assert p.cost == Decimal("0.045")  # (0.1^2 / 2) * 3^2


def test_zcdp_cost_of_a_long_epsilon_is_rounded_up_from_the_exact_value() -> None:
    """(eps^2 / 2) k^2 of a 17-digit eps has 35 digits.  Halved at Python's default 28-digit precision it lost its
    tail and the total rounded up to ...108, below the exact cost; exactly it is charged ...109."""
    p = plan("SELECT dp_count(*, epsilon := 0.30000000000000004) FROM visits", hospital_catalog(accounting="zcdp"))
    assert p.mechanisms[0]["cost"] == "0.4050000000000001080000000000000072"
    assert p.cost == Decimal("0.405000000000000109")


def test_zcdp_method_charged_in_rho() -> None:
    sql = "SELECT dp_mean(cost, rho := 0.01, method := 'shifted_cm_gauss') FROM visits"
    p = plan(sql, hospital_catalog(accounting="zcdp"))
    assert p.cost == Decimal("0.09")  # 0.01 * 3^2
    assert p.mechanisms[0]["notion"] == "zcdp" and p.mechanisms[0]["rho"] == 0.01
    with pytest.raises(PrivacyError) as info:
        plan(sql, hospital_catalog(accounting="pure"))
    assert info.value.code == "DPSQL-E060"


def test_contribution_bounding_keeps_k_rows_per_unit(exact_con: duckdb.DuckDBPyConnection) -> None:
    """Patient 1000 has 5 rows; with k = 3 only 3 reach the aggregate (40 * 3 + 3 rows)."""
    p = plan("SELECT dp_count(*, epsilon := 1) AS n FROM visits", hospital_catalog())
    assert exact_con.sql(p.sql).fetchall() == [(123,)]


def test_bounding_after_joins(exact_con: duckdb.DuckDBPyConnection) -> None:
    """A self-join on the unit squares rows per patient (9 or 25); bounding cuts each back to 3."""
    p = plan("SELECT dp_count(*, epsilon := 1) AS n FROM visits a JOIN visits b ON a.patient_id = b.patient_id",
             hospital_catalog())
    assert exact_con.sql(p.sql).fetchall() == [(123,)]


def test_groups_per_unit_bound(exact_con: duckdb.DuckDBPyConnection) -> None:
    """With g = 1 each patient lands in one clinic only: 41 units, 3 rows each at most -> 120 + 3 rows minus
    the rows of dropped clinics; every unit keeps exactly one group."""
    p = plan("SELECT clinic, dp_count(*, epsilon := 1) AS n FROM visits GROUP BY clinic", hospital_catalog())
    rows = dict(exact_con.sql(p.sql).fetchall())
    assert sum(rows.values()) == 40  # 40 patients x 1 group x 1 row in it (each visits 3 clinics once)


def test_public_keys_include_empty_groups_and_drop_undeclared(exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan("SELECT clinic, dp_count(*, epsilon := 1) AS n FROM visits WHERE cost > 1000 GROUP BY clinic",
             hospital_catalog())
    assert sorted(exact_con.sql(p.sql).fetchall()) == [("A", 0), ("B", 0), ("C", 0)]
    p = plan("SELECT clinic, dp_count(*, epsilon := 1) AS n FROM visits GROUP BY clinic", hospital_catalog())
    assert {k for k, _ in exact_con.sql(p.sql).fetchall()} == {"A", "B", "C"}  # D is undeclared


def test_public_table_keys_come_from_the_public_table(exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan("SELECT c.name, dp_count(*, epsilon := 1) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic "
             "WHERE v.cost < 0 GROUP BY c.name", hospital_catalog())
    assert sorted(exact_con.sql(p.sql).fetchall()) == [("East", 0), ("North", 0), ("South", 0)]


def test_partition_selection_hides_rare_keys(exact_con: duckdb.DuckDBPyConnection) -> None:
    """'CANARY' notes belong to one patient: below the threshold, never released."""
    cat = hospital_catalog(delta=1e-6)
    p = plan("SELECT note, dp_count(*, epsilon := 1) AS n FROM visits GROUP BY note", cat)
    assert exact_con.sql(p.sql).fetchall() == []
    assert "CANARY" not in p.sql


def test_filter_becomes_case(exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan("SELECT dp_count(*, epsilon := 1) FILTER (WHERE clinic = 'A') AS n FROM visits", hospital_catalog())
    assert "FILTER" not in p.sql.upper()
    assert exact_con.sql(p.sql).fetchall() == [(40,)]


def test_runtime_errors_become_null(exact_con: duckdb.DuckDBPyConnection) -> None:
    """Division by zero, failed casts and overflow must not abort the query (a one-row oracle)."""
    sql = ("SELECT dp_count(x, epsilon := 1) AS n FROM (SELECT patient_id, cost / (cost - cost) AS x, "
           "note::INTEGER AS y FROM visits WHERE 1 / (patient_id - 5) > 0 OR patient_id * 2000000000 > 0) t")
    p = plan(sql, hospital_catalog())
    assert "TRY" in p.sql
    exact_con.sql(p.sql).fetchall()


def test_output_names_follow_duckdb(exact_con: duckdb.DuckDBPyConnection) -> None:
    p = plan("SELECT clinic, dp_count(*, epsilon := 1), dp_sum(cost, epsilon := 1) AS s FROM visits GROUP BY 1",
             hospital_catalog())
    assert p.output_columns == ["clinic", "dp_count(*, epsilon := 1)", "s"]
    assert list(exact_con.sql(p.sql).columns) == p.output_columns


def test_cost_and_sql_identical_on_neighbouring_databases() -> None:
    """The plan is a function of the text and the catalog: two neighbouring databases (one extra patient)
    give byte-identical SQL and cost, and running them differs only in the data."""
    results = []
    for extra in (False, True):
        con = duckdb.connect()
        hospital(con, extra_patient=extra)
        exact_binding(con)
        p = plan("SELECT clinic, dp_mean(cost, epsilon := 0.3) FROM visits GROUP BY clinic", hospital_catalog())
        con.sql(p.sql).fetchall()
        results.append((p.sql, p.cost, p.delta, p.mechanisms))
        con.close()
    assert results[0] == results[1]


def test_noisy_cte_is_materialized(exact_con: duckdb.DuckDBPyConnection) -> None:
    """A CTE referenced twice must not be evaluated (and noised) twice while charged once."""
    p = plan("WITH n AS NOT MATERIALIZED (SELECT dp_count(*, epsilon := 0.1) AS c FROM visits) "
             "SELECT a.c + b.c AS s FROM n a, n b", hospital_catalog())
    assert "AS MATERIALIZED" in p.sql and p.cost == Decimal("0.3")
    exact_con.sql(p.sql).fetchall()
