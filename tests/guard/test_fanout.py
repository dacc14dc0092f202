"""Issue 13, finding 1: a join may repeat a protected row at most ``max_fanout`` times (E043), so the work a
query does cannot hinge on one person's data.  Each hostile query here ran, charged, and took 5-10x longer
when its predicate held for one person on c5628f3."""

import pytest

from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.guard.catalog import Catalog, TableInfo

VISITS = TableInfo("visits", "protected", {"patient_id": "INTEGER", "name": "VARCHAR", "clinic": "VARCHAR",
                                           "cost": "DOUBLE", "diag": "VARCHAR"},
                   privacy_unit="patient_id", max_rows_per_unit=3, public_keys={"clinic": ("A", "B", "C")})
BIG = TableInfo("big", "public", {"k": "BIGINT", "grp": "BIGINT"}, rows=1_000_000,
                multiplicity={"k": 1, "grp": 100_000})
CLINICS = TableInfo("clinics", "public", {"clinic": "VARCHAR", "name": "VARCHAR"}, rows=3,
                    multiplicity={"clinic": 1, "name": 1})
UNMEASURED = TableInfo("unmeasured", "public", {"k": "BIGINT"})
CAT = Catalog({t.name: t for t in (VISITS, BIG, CLINICS, UNMEASURED)})
C = "dp_count(*, epsilon := 0.1)"
P = "v.name = 'target' AND v.diag = 'hiv'"

HOSTILE = [
    f"SELECT {C} FROM visits v JOIN big b ON ({P})",  # the attack
    f"SELECT {C} FROM big b JOIN visits v ON ({P})",  # public side first
    f"SELECT {C} FROM visits v JOIN big b ON b.grp = v.cost AND {P}",  # an equality, but 1e5 rows per value
    f"SELECT {C} FROM visits v JOIN (SELECT 1 AS x FROM big) b ON b.x = v.cost",  # derived: size bound only
    f"SELECT {C} FROM visits v JOIN (SELECT a.k FROM clinics c, big a) b ON b.k = v.cost",
    f"SELECT {C} FROM visits v JOIN (SELECT b1.k FROM big b1 JOIN big b2 ON b1.k = b2.k) b ON {P}",
    f"WITH w AS (SELECT k FROM big UNION ALL SELECT k FROM big) SELECT {C} FROM visits v JOIN w ON {P}",
    f"SELECT {C} FROM visits v JOIN clinics c ON v.clinic = c.clinic JOIN big b ON b.grp = c.clinic",
    f"SELECT {C} FROM visits v JOIN unmeasured u ON u.k = v.cost",  # no statistics: fail closed
    f"SELECT {C} FROM visits v LEFT JOIN big b ON ({P})",
]
ALLOWED = [
    f"SELECT {C} FROM visits v JOIN big b ON b.k = v.cost AND {P}",  # one big row per protected row
    f"SELECT {C} FROM visits v JOIN clinics USING (clinic)",
    f"SELECT {C} FROM visits v JOIN clinics c ON ({P})",  # 3 rows: at most 3 per protected row
    f"SELECT {C} FROM visits v JOIN (SELECT k FROM big LIMIT 500) b ON ({P})",
    f"SELECT {C} FROM visits v JOIN (SELECT 1 AS x UNION ALL SELECT 2 AS x) t ON {P}",
    f"SELECT {C} FROM visits v JOIN clinics c ON v.clinic = c.clinic JOIN big b ON b.k = v.cost",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_joins_that_can_repeat_a_row_many_times_are_refused_before_any_charge(sql):
    with pytest.raises(PrivacyError) as e:
        plan(sql, CAT)
    assert e.value.code == "DPSQL-E043"


@pytest.mark.parametrize("sql", ALLOWED)
def test_joins_with_a_small_fanout_are_allowed(sql):
    assert plan(sql, CAT).cost > 0


def test_the_limit_is_a_catalog_setting():
    sql = f"SELECT {C} FROM visits v JOIN clinics c ON ({P})"
    with pytest.raises(PrivacyError):
        plan(sql, Catalog(CAT.tables, max_fanout=2))


def test_join_equalities_stay_hash_joinable_only_when_no_cast_can_fail():
    """Totality used to wrap the whole ON in TRY(...), so DuckDB could not plan a hash join: a keyed join to
    a 1M-row public table became a 1e10-pair nested loop.  Equalities between columns of the same or of
    numeric types stay bare; VARCHAR = INTEGER (a cast that raises on 'x' at run time) stays under TRY."""
    cat = Catalog({**CAT.tables, "names": TableInfo("names", "public", {"label": "VARCHAR"}, rows=3,
                                                    multiplicity={"label": 1})})
    keyed = plan(f"SELECT {C} FROM visits v JOIN big b ON b.k = v.patient_id AND {P}", cat).sql
    assert "ON b.k = v.patient_id AND TRY(" in keyed
    assert "ON b.k = v.cost" in plan(f"SELECT {C} FROM visits v JOIN big b ON b.k = v.cost", cat).sql
    cast = plan(f"SELECT {C} FROM visits v JOIN names n ON n.label = v.patient_id", cat).sql
    assert "ON TRY(n.label = v.patient_id)" in cast


def test_a_string_to_integer_join_never_raises_on_data(tmp_path):
    """End to end: the VARCHAR = INTEGER join condition raises a conversion error on 'x' without TRY."""
    import duckdb

    import dpsql

    db = tmp_path / "t.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE visits AS SELECT i AS patient_id, i::DOUBLE AS cost FROM range(50) r(i)")
    con.execute("CREATE TABLE names AS SELECT * FROM (VALUES ('x'), ('7')) t(label)")
    con.close()
    adm = dpsql.admin(db)
    adm.protect("visits", privacy_unit="patient_id")
    adm.public_table("names")
    adm.grant("alice", epsilon=1)
    with dpsql.connect(db, analyst="alice") as s:
        r = s.sql("SELECT dp_count(*, epsilon := 0.5) AS n FROM visits v JOIN names n ON n.label = v.patient_id")
        assert r.rows[0][0] is not None
