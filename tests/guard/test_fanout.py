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
