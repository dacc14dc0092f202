"""Issue 15 end to end: the SQL analysts actually write, in a guarded session on a real DuckDB file with the
real guard and binding (filters through public tables, key lists, UNION ALL of same-unit tables, per-unit
pre-aggregation).  Each of the issue's queries runs and is charged exactly its expected cost; hostile
variants are refused uncharged."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql.errors import PrivacyError

pytestmark = [
    pytest.mark.real_guard,
    pytest.mark.skipif(importlib.util.find_spec("dpsql.guard") is None, reason="needs dpsql.guard"),
]


def make_analyst_db(path: Path) -> Path:
    """people(uid, name, zip) one row per person; visits(uid, zip, cost) up to 4 per person; the same unit
    in visits_2023 and visits_2024; zip_regions public."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE people AS SELECT i AS uid, ['Ann', 'Bob', 'Cy'][i % 3 + 1] AS name, "
                "(10000 + i % 7)::VARCHAR AS zip, 20 + i % 50 AS age FROM range(60) r(i)")
    con.execute("CREATE TABLE visits AS SELECT i // 4 AS uid, (10000 + i % 7)::VARCHAR AS zip, "
                "((i * 37) % 100)::DOUBLE AS cost FROM range(240) r(i)")
    con.execute("CREATE TABLE visits_2023 AS SELECT uid, cost FROM visits WHERE uid % 2 = 0")
    con.execute("CREATE TABLE visits_2024 AS SELECT uid, cost + 1 AS cost FROM visits WHERE uid % 3 = 0")
    con.execute("CREATE TABLE zip_regions AS SELECT (10000 + i)::VARCHAR AS zip, ['NE', 'SW'][i % 2 + 1] AS region "
                "FROM range(7) r(i)")
    con.close()
    adm = dpsql.admin(path)
    adm.protect("people", privacy_unit="uid", max_rows_per_unit=1)
    adm.protect("visits", privacy_unit="uid", max_rows_per_unit=4)
    adm.protect("visits_2023", privacy_unit="uid", max_rows_per_unit=2)
    adm.protect("visits_2024", privacy_unit="uid", max_rows_per_unit=3)
    adm.public_table("zip_regions")
    adm.grant("alice", epsilon=100)
    return path


@pytest.fixture
def adb(tmp_path: Path) -> Path:
    return make_analyst_db(tmp_path / "analyst.duckdb")


def _refused(db: Path, sql: str) -> str:
    with dpsql.connect(db, analyst="alice") as s:
        with pytest.raises(PrivacyError) as err:
            s.sql(sql)
        assert s.budget().spent == 0
    return err.value.code


# item 1: filters through public tables
PUBLIC_FILTER = ("SELECT dp_count(*, epsilon := 0.1) AS n FROM visits "
                 "WHERE zip IN (SELECT zip FROM zip_regions WHERE region = 'NE')")


def test_public_filter_runs_at_the_unfiltered_cost(adb: Path) -> None:
    with dpsql.connect(adb, analyst="alice") as s:
        r = s.sql(PUBLIC_FILTER)
        assert r.charged == Decimal("0.4")  # 0.1 x max_rows_per_unit 4: the filter changes nothing
        assert len(r.rows) == 1
        for sql in ("SELECT dp_sum(cost, epsilon := 0.1) AS s FROM visits "
                    "WHERE zip NOT IN (SELECT zip FROM zip_regions WHERE region = 'NE')",
                    "SELECT dp_count(*, epsilon := 0.1) AS n FROM visits "
                    "WHERE NOT EXISTS (SELECT 1 FROM zip_regions WHERE region = 'XX')"):
            assert s.sql(sql).charged == Decimal("0.4")


@pytest.mark.parametrize("sql", [
    "SELECT dp_count(*, epsilon := 0.1) FROM visits WHERE uid IN (SELECT uid FROM people WHERE name = 'Bob')",
    "SELECT dp_count(*, epsilon := 0.1) FROM visits v WHERE EXISTS "
    "(SELECT 1 FROM zip_regions z WHERE z.zip = v.zip)",
    "SELECT dp_count(*, epsilon := 0.1) FROM visits WHERE zip IN (SELECT zip FROM people)",
])
def test_public_filter_hostile_variants_are_refused(adb: Path, sql: str) -> None:
    assert _refused(adb, sql) == "DPSQL-E051"


# item 2: analyst-supplied key lists
KEY_LIST = ("SELECT k.name, dp_count(p.uid, epsilon := 0.1) AS n FROM (VALUES ('Bob'), ('Zed')) k(name) "
            "LEFT JOIN people p ON p.name = k.name GROUP BY k.name ORDER BY k.name")


def test_key_list_releases_every_listed_key(adb: Path) -> None:
    with dpsql.connect(adb, analyst="alice") as s:
        r = s.sql(KEY_LIST)
        assert r.charged == Decimal("0.1")  # people: one row per unit
        assert [row[0] for row in r.rows] == ["Bob", "Zed"]  # 'Zed' has no rows and is released all the same
        many = ", ".join(f"('k{i}')" for i in range(5000)) + ", ('Ann')"
        r = s.sql(f"SELECT k.name, dp_count(*, epsilon := 0.1) FROM (VALUES {many}) k(name) "
                  "LEFT JOIN people p ON p.name = k.name GROUP BY k.name")
        assert len(r.rows) == 5001 and r.charged == Decimal("0.1")


@pytest.mark.parametrize(("sql", "code"), [
    ("SELECT k.name, dp_count(p.uid, epsilon := 0.1) FROM (VALUES ('Bob'), ('Bob')) k(name) "
     "LEFT JOIN people p ON p.name = k.name GROUP BY k.name", "DPSQL-E043"),
    ("SELECT k.u, dp_count(p.uid, epsilon := 0.1) FROM (VALUES (1), (2)) k(u) LEFT JOIN people p ON p.uid = k.u "
     "GROUP BY k.u", "DPSQL-E032"),
    ("SELECT k.name FROM (VALUES ('Bob')) k(name) LEFT JOIN people p ON p.name = k.name WHERE p.uid IS NOT NULL",
     "DPSQL-E020"),
    ("SELECT k.name, p.zip, dp_count(p.uid, epsilon := 0.1) FROM (VALUES ('Bob')) k(name) "
     "LEFT JOIN people p ON p.name = k.name GROUP BY k.name, p.zip", "DPSQL-E040"),
    ("SELECT k.a, dp_count(*, epsilon := 0.1) FROM (VALUES " + ",".join(f"({i})" for i in range(10001))
     + ") k(a) LEFT JOIN people p ON p.age = k.a GROUP BY k.a", "DPSQL-E010"),
])
def test_key_list_hostile_variants_are_refused(adb: Path, sql: str, code: str) -> None:
    assert _refused(adb, sql) == code


# item 3: UNION ALL of protected tables with the same unit
UNION = ("SELECT dp_sum(cost, epsilon := 0.1, lower := 0, upper := 100) AS s "
         "FROM (SELECT uid, cost FROM visits_2023 UNION ALL SELECT uid, cost FROM visits_2024)")


def test_union_all_is_bounded_per_unit_after_the_union(adb: Path) -> None:
    with dpsql.connect(adb, analyst="alice") as s:
        r = s.sql(UNION)
        assert r.charged == Decimal("0.3")  # 0.1 x the largest max_rows_per_unit (visits_2024: 3), not 2 + 3
        assert len(r.rows) == 1


@pytest.mark.parametrize(("sql", "code"), [
    ("SELECT dp_sum(cost, epsilon := 0.1) FROM (SELECT uid, cost FROM visits_2023 UNION "
     "SELECT uid, cost FROM visits_2024)", "DPSQL-E050"),
    ("SELECT dp_sum(cost, epsilon := 0.1) FROM (SELECT uid, cost FROM visits_2023 UNION ALL "
     "SELECT 1, 2.0 FROM zip_regions)", "DPSQL-E050"),
    ("SELECT dp_sum(cost, epsilon := 0.1) FROM (SELECT cost FROM visits_2023 UNION ALL "
     "SELECT cost FROM visits_2024)", "DPSQL-E050"),
    ("SELECT uid, cost FROM visits_2023 UNION ALL SELECT uid, cost FROM visits_2024", "DPSQL-E020"),
])
def test_union_hostile_variants_are_refused(adb: Path, sql: str, code: str) -> None:
    assert _refused(adb, sql) == code


# item 4: per-unit pre-aggregation (visits: 60 units x 4 rows, max_rows_per_unit 4)
PER_UNIT = ("SELECT dp_mean(total, epsilon := 0.1, lower := 0, upper := 100000) AS m "
            "FROM (SELECT uid, sum(cost) AS total FROM visits GROUP BY uid)")


def test_per_unit_pre_aggregation_is_charged_one_row_per_unit(adb: Path) -> None:
    with dpsql.connect(adb, analyst="alice") as s:
        r = s.sql(PER_UNIT)
        assert r.charged == Decimal("0.1")  # one row per unit: 0.1 x 1, not 0.1 x max_rows_per_unit 4
        assert r.columns == ["m"] and len(r.rows) == 1
        for sql in ("SELECT dp_median(m, epsilon := 0.1) AS p50 FROM (SELECT uid, max(cost) AS m FROM visits "
                    "GROUP BY uid)",
                    "SELECT dp_count(*, epsilon := 0.1) AS n FROM (SELECT uid FROM visits GROUP BY uid "
                    "HAVING max(cost) > 90)",
                    "SELECT dp_sum(total, epsilon := 0.1) AS s FROM (SELECT uid, sum(cost) AS total FROM visits "
                    "GROUP BY uid) WHERE total > 200",
                    "SELECT dp_mean(n, epsilon := 0.1) AS n FROM (SELECT uid, count(*) AS n, avg(cost) AS a, "
                    "min(cost) AS lo FROM visits GROUP BY uid) WHERE a > lo"):
            r = s.sql(sql)
            assert r.charged == Decimal("0.1") and len(r.rows) == 1, sql
        r = s.sql("SELECT dp_sum(v.cost / t.total, epsilon := 0.1) AS share FROM (SELECT uid, sum(cost) AS total "
                  "FROM visits GROUP BY uid) t JOIN visits v ON t.uid = v.uid")
        assert r.charged == Decimal("0.4")  # joined back to the raw rows: visits' k = 4 applies again
        assert s.budget().spent == Decimal("0.9")
    [first, *_] = dpsql.admin(adb).charges()
    assert first.amount == Decimal("0.1")


@pytest.mark.parametrize(("sql", "code"), [
    ("SELECT uid, sum(cost) AS total FROM visits GROUP BY uid", "DPSQL-E020"),
    ("SELECT * FROM (SELECT uid, max(cost) AS m FROM visits GROUP BY uid) WHERE m > 90", "DPSQL-E020"),
    ("SELECT dp_mean(total, epsilon := 0.1) FROM (SELECT zip, sum(cost) AS total FROM visits GROUP BY zip)",
     "DPSQL-E021"),
    ("SELECT dp_mean(total, epsilon := 0.1) FROM (SELECT uid, zip, sum(cost) AS total FROM visits "
     "GROUP BY uid, zip)", "DPSQL-E021"),
    ("SELECT dp_mean(total, epsilon := 0.1) FROM (SELECT uid, sum(cost) AS total FROM visits GROUP BY uid "
     "ORDER BY total DESC LIMIT 10)", "DPSQL-E050"),
    ("SELECT dp_mean(total, epsilon := 0.1) FROM (SELECT uid, sum(cost) OVER (PARTITION BY uid) AS total "
     "FROM visits)", "DPSQL-E050"),
    ("SELECT dp_mean(total, epsilon := 0.1) FROM (SELECT v.uid, sum(cost) AS total FROM visits v "
     "WHERE EXISTS (SELECT 1 FROM people p WHERE p.uid = v.uid) GROUP BY v.uid)", "DPSQL-E051"),
])
def test_per_unit_hostile_variants_are_refused(adb: Path, sql: str, code: str) -> None:
    assert _refused(adb, sql) == code
