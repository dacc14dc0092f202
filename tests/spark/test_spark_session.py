"""A guarded Spark session: guard -> translation -> analysis -> charge -> one action -> release.  Exact
statistics equal DuckDB's on the same rewritten SQL; refusals charge nothing."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from corpus import PICK_LISTS, PROBES

import dpsql.spark as dspark
from dpsql.errors import PrivacyError
from dpsql.guard import plan
from dpsql.ledger import Ledger

KEYS = {"clinic": ("A", "B", "C")}


@pytest.fixture
def session(spark, frames, tmp_path):
    ledger = Ledger(tmp_path / "l.duckdb", "ds", create=True)
    ledger.grant("alice", "pure", 100000)
    s = dspark.Session(spark, ledger, "alice")
    s.protect("visits", frames["visits"], unit="patient_id", max_rows_per_unit=3, max_groups_per_unit=3,
              public_keys=KEYS)
    s.public("clinics", frames["clinics"])
    yield s
    s.close()


def _duck_rows(con, sql: str) -> list[tuple]:
    return con.sql(sql).fetchall()


def test_registration_reads_the_schema(session):
    info = session.catalog().get("visits")
    assert info.columns == {"patient_id": "INTEGER", "clinic": "VARCHAR", "cost": "DOUBLE", "note": "VARCHAR"}
    assert session.catalog().get("clinics").rows == 3
    assert session.catalog().get("clinics").multiplicity["clinic"] == 1


def test_counts_equal_duckdb(session, hospital_duck):
    sql = "SELECT clinic, dp_count(*, epsilon := 1000) AS n FROM visits GROUP BY clinic ORDER BY clinic"
    r = session.sql(sql)
    exact = _duck_rows(hospital_duck, plan(sql, session.catalog()).sql)  # the exact stand-in binding
    assert r.rows == [(k, float(n)) for k, n in exact]  # eps = 1000: the discrete Laplace draw is 0
    assert r.charged == 9000 and r.columns == ["clinic", "n"]


def test_native_sums_equal_duckdb(session, hospital_duck, spark):
    """The native route's integer fixed-point sums (k1): rint, not truncation, on values off the grid."""
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    import dpsql
    from dpsql import duck

    sql = ("SELECT clinic, dp_sum(cost / 7, epsilon := 1, lower := 0, upper := 20, method := 'clipped') AS s "
           "FROM visits GROUP BY clinic ORDER BY clinic")

    def k1(agg, n, k1, k2, *rest):  # noqa: ANN001, ANN002, ANN202 - k1 and n, exactly, in one double
        return pc.cast(pc.add(pc.multiply(pc.cast(k1, pa.float64()), 1e6), pc.cast(n, pa.float64())),
                       pa.float64())

    checked = plan(sql, session.catalog())
    session.spark.udf.register("_dpsql_fin", arrow_udf(k1, "DOUBLE", ArrowUDFType.SCALAR))
    try:
        got = session.spark.sql(dspark.translate(checked.sql, session._views).sql).collect()
    finally:
        dspark.register_udfs(spark)
    import duckdb

    con = duckdb.connect()
    dpsql.install(con)
    con.remove_function("_dpsql_fin")
    fin = duck._udf(k1, ("agg", "n", "k1", "k2"), duck.FIN_PARAM_NAMES)
    types = ["VARCHAR", "BIGINT", "BIGINT", "BIGINT", *duck._types(duck.FIN_PARAM_NAMES)]
    con.create_function("_dpsql_fin", fin, types, "DOUBLE", type="arrow", null_handling="special", side_effects=False)
    con.execute("CREATE MACRO _dpsql_rand() AS (random() * 9e18)::BIGINT")
    for t in ("visits", "clinics"):
        con.register(t, hospital_duck.sql(f"SELECT * FROM {t}").to_arrow_table())
    want = con.sql(checked.sql).fetchall()
    assert [tuple(r) for r in got] == want
    assert all(s > 1e6 for _, s in want)


def test_release_is_noisy_and_typed(session):
    r = session.sql("SELECT clinic, dp_mean(cost, epsilon := 10) AS m, dp_median_ci(cost, epsilon := 10) AS q "
                    "FROM visits GROUP BY clinic")
    assert r.table.schema.field("m").type == pa.float64()
    assert set(r.table.schema.field("q").type.names) == {"value", "lo", "hi"} if hasattr(
        r.table.schema.field("q").type, "names") else True
    assert all(m is None or math.isfinite(m) for _, m, _ in r.rows)
    assert len(r.rows) == 3


def test_one_action_per_charge(session, monkeypatch):
    sc = session.spark.sparkContext
    tracker = sc.statusTracker()
    actions = []
    seen_at_charge = []
    real = type(session.spark.sql("SELECT 1")).toArrow

    def counting(self):  # noqa: ANN001, ANN202
        actions.append(1)
        return real(self)

    monkeypatch.setattr(type(session.spark.sql("SELECT 1")), "toArrow", counting)
    monkeypatch.setattr(dspark, "_after_charge", lambda: seen_at_charge.append(
        len(tracker.getJobIdsForGroup("dpsql-one-action"))))
    sc.setJobGroup("dpsql-one-action", "one action per charge")
    try:
        r = session.sql("SELECT dp_count(*, epsilon := 1) AS n, dp_sum(cost, epsilon := 1) AS s FROM visits")
    finally:
        sc.setJobGroup("other", "")
    assert r.charged == 6  # (1 + 1) x 3 rows per unit
    assert seen_at_charge == [0]  # guard, translation and analysis read no data
    assert actions == [1]
    assert len(tracker.getJobIdsForGroup("dpsql-one-action")) >= 1


@pytest.mark.parametrize("sql, code", [
    ("SELECT * FROM visits", "DPSQL-E020"),
    ("SELECT dp_count(*, epsilon := 1) FROM visits WHERE random() < 0.5", "DPSQL-E011"),
    ("SELECT dp_count(*, epsilon := 1) FROM visits WHERE starts_with(note, 'n1')", "DPSQL-E013"),
])
def test_refusals_charge_nothing(session, sql, code):
    before = session.budget().remaining
    with pytest.raises(PrivacyError) as e:
        session.sql(sql)
    assert e.value.code == code
    assert session.budget().remaining == before
    assert session._ledger.entries("alice", "charge") == []


def test_public_only_query_is_free(session):
    r = session.sql("SELECT name FROM clinics ORDER BY name")
    assert r.rows == [("East",), ("North",), ("South",)] and r.charged == 0


@pytest.mark.parametrize("sql, rows", [(q, r) for q, r in PICK_LISTS if "events" not in q][:3])
def test_pick_lists_answer_from_the_keys(session, sql, rows):
    r = session.sql(sql)
    assert r.charged == 0 and sorted(r.rows) == sorted(rows)


def test_probes_are_free_and_read_nothing(session, monkeypatch):
    ran = []
    monkeypatch.setattr(dspark, "_after_charge", lambda: ran.append(1))
    for sql in PROBES:
        r = session.sql(sql)
        assert r.charged == 0 and r.table.num_rows == 0 and r.columns, sql
    assert ran == []
    assert session._ledger.entries("alice", "charge") == []
