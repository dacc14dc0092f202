"""Issue 15, item 4: per-unit pre-aggregation.  What the rewritten SQL feeds the dp_* aggregates (exact
stand-in binding: one row per unit, whatever its number of rows), what it costs (multiplier 1), and refusals
that name the supported form."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
from conftest import exact_binding
from corpus import extended_catalog, hospital_catalog

from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.guard.catalog import Catalog, TableInfo

# hospital(): 40 patients x 3 visits, cost (i * 37) % 100, plus patient 1000 with 5 visits of cost 1 in 'D'
PATIENTS = 41


def _run(con: duckdb.DuckDBPyConnection, sql: str, catalog: Catalog | None = None) -> list[tuple]:
    return con.sql(plan(sql, catalog or hospital_catalog()).sql).fetchall()


def test_one_row_per_unit_whatever_its_row_count(exact_con: duckdb.DuckDBPyConnection) -> None:
    """dp_count(*) over the per-unit relation counts units (41), not bounded rows (40 x 3 + 3)."""
    sql = "SELECT dp_count(*, epsilon := 1) FROM (SELECT patient_id, sum(cost) AS t FROM visits GROUP BY patient_id)"
    assert _run(exact_con, sql) == [(PATIENTS,)]
    assert plan(sql, hospital_catalog()).mechanisms[0]["multiplier"] == 1
    raw = "SELECT dp_count(*, epsilon := 1) FROM visits"
    assert _run(exact_con, raw) == [(123,)] and plan(raw, hospital_catalog()).cost == 3


def test_per_unit_values_are_the_units_aggregates(exact_con: duckdb.DuckDBPyConnection) -> None:
    total = exact_con.sql("SELECT sum(cost) FROM visits").fetchall()[0][0]
    got = _run(exact_con, "SELECT dp_sum(t, epsilon := 1) AS s FROM (SELECT patient_id, sum(cost) AS t "
                          "FROM visits GROUP BY patient_id)")
    assert got == [(pytest.approx(total),)]  # every row of every unit is in its unit's total: nothing clipped
    n = _run(exact_con, "SELECT dp_sum(n, epsilon := 1) FROM (SELECT patient_id, count(*) AS n FROM visits "
                        "GROUP BY patient_id) WHERE n > 3")
    assert n == [(5,)]  # patient 1000 alone has more than 3 visits: all 5 counted
    big = exact_con.sql("SELECT count(*) FROM (SELECT patient_id FROM visits GROUP BY patient_id "
                        "HAVING max(cost) > 90)").fetchall()[0][0]
    for having in ("max(cost) > 90", "m > 90"):
        assert _run(exact_con, "SELECT dp_count(*, epsilon := 1) FROM (SELECT patient_id, max(cost) AS m "
                               f"FROM visits GROUP BY patient_id HAVING {having})") == [(big,)]


def test_min_or_max_of_a_declared_key_keeps_its_keys(exact_con: duckdb.DuckDBPyConnection) -> None:
    """Each patient's largest clinic; patient 1000's 'D' is outside the declared keys and dropped."""
    sql = ("SELECT home, dp_count(*, epsilon := 0.1) AS n FROM (SELECT patient_id, max(clinic) AS home FROM visits "
           "GROUP BY patient_id) GROUP BY home ORDER BY home")
    assert _run(exact_con, sql) == [("A", 0), ("B", 0), ("C", 40)]
    assert plan(sql, hospital_catalog()).cost == Decimal("0.1")


def test_null_units_are_dropped(exact_con: duckdb.DuckDBPyConnection) -> None:
    exact_con.execute("INSERT INTO visits SELECT NULL, 'A', 5.0, 'x' FROM range(7)")
    assert _run(exact_con, "SELECT dp_count(*, epsilon := 1) FROM (SELECT patient_id, count(*) AS n FROM visits "
                           "GROUP BY patient_id)") == [(PATIENTS,)]


def test_sum_and_avg_cannot_overflow_into_an_error() -> None:
    """A HUGEINT or DECIMAL(38) sum raises in DuckDB on overflow (one person's oracle); per unit it is DOUBLE."""
    t = TableInfo("t", "protected", {"uid": "INTEGER", "h": "HUGEINT", "d": "DECIMAL(38,0)", "i": "INTEGER"},
                  privacy_unit="uid")
    con = duckdb.connect()
    exact_binding(con)
    con.execute("CREATE TABLE t AS SELECT 1 AS uid, 170141183460469231731687303715884105727::HUGEINT AS h, "
                "99999999999999999999999999999999999999::DECIMAL(38,0) AS d, 2147483647 AS i FROM range(2)")
    with pytest.raises(duckdb.OutOfRangeException):
        con.sql("SELECT sum(h) FROM t GROUP BY uid").fetchall()
    for agg in ("sum(h)", "avg(h)", "sum(d)", "avg(d)", "sum(i * i * i)"):
        [(v,)] = con.sql(plan(f"SELECT dp_sum(x, epsilon := 1) FROM (SELECT uid, {agg} AS x FROM t GROUP BY uid)",
                              Catalog({"t": t})).sql).fetchall()
        assert v is None or v > 1e9
    con.close()


@pytest.mark.parametrize("sql", [
    "SELECT dp_mean(t, epsilon := 1) FROM (SELECT clinic, sum(cost) AS t FROM visits GROUP BY clinic)",
    "SELECT dp_mean(t, epsilon := 1) FROM (SELECT sum(cost) AS t FROM visits) q",
    "SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id % 10 AS b, sum(cost) AS t FROM visits GROUP BY 1)",
    "SELECT dp_count(*, epsilon := 1) FROM (SELECT clinic FROM visits GROUP BY clinic HAVING max(cost) > 1)",
])
def test_a_pre_aggregation_not_by_the_unit_names_the_per_unit_form(sql: str) -> None:
    with pytest.raises(PrivacyError) as e:
        plan(sql, hospital_catalog())
    assert e.value.code in ("DPSQL-E021", "DPSQL-E022", "DPSQL-E050")
    assert "per privacy unit" in e.value.message and "GROUP BY uid" in e.value.message


def test_grouping_by_the_unit_and_another_column_names_min_or_max() -> None:
    with pytest.raises(PrivacyError) as e:
        plan("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, clinic, sum(cost) AS t FROM visits "
             "GROUP BY patient_id, clinic)", hospital_catalog())
    assert e.value.code == "DPSQL-E021" and "min(col) or max(col)" in e.value.message


def test_other_aggregates_per_unit_name_the_allowed_ones() -> None:
    with pytest.raises(PrivacyError) as e:
        plan("SELECT dp_mean(t, epsilon := 1) FROM (SELECT patient_id, stddev(cost) AS t FROM visits "
             "GROUP BY patient_id)", hospital_catalog())
    assert e.value.code == "DPSQL-E021" and "count, sum, avg, min and max" in e.value.message


def test_same_unit_tables_may_be_joined_on_the_unit_inside(exact_con: duckdb.DuckDBPyConnection) -> None:
    """diag has k = 2, g = 2, but the per-unit relation is one row per unit: cost 1 x eps."""
    sql = ("SELECT dp_sum(n, epsilon := 0.5) FROM (SELECT v.patient_id, count(*) AS n FROM visits v "
           "JOIN diag d ON v.patient_id = d.patient_id GROUP BY v.patient_id)")
    assert plan(sql, extended_catalog()).cost == Decimal("0.5")
    assert _run(exact_con, sql, extended_catalog()) == [(40 * 3 * 5,)]
