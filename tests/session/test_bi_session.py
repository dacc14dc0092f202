"""BI tools' default SQL through a real guarded session (issue 19): probes answered from the schema (uncharged,
never run), pick-lists from the declared keys, the plain-aggregate opt-in charged at the rewritten cost, and
the budget as relations that survive LIMIT / ORDER BY."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import CANARY

import dpsql
from dpsql.errors import PrivacyError
from dpsql.guard import plan

pytestmark = [
    pytest.mark.real_guard,
    pytest.mark.skipif(importlib.util.find_spec("dpsql.duck") is None, reason="needs dpsql.duck"),
]

PROBES = [
    ("SELECT * FROM visits WHERE 1=0", ["patient_id", "clinic", "cost", "note"]),
    ("SELECT * FROM visits LIMIT 0", ["patient_id", "clinic", "cost", "note"]),
    ("SELECT * FROM (SELECT clinic, dp_count(*, epsilon := 0.5) AS n FROM visits GROUP BY clinic) AS q LIMIT 0",
     ["clinic", "n"]),
    ("SELECT * FROM (SELECT clinic, dp_mean(cost, epsilon := 50) AS m FROM visits GROUP BY clinic) AS q WHERE 1=0",
     ["clinic", "m"]),  # refused for its cost (3 x 50 > the budget of 3) outside a probe
    ("SELECT * FROM (SELECT note FROM visits WHERE note = 'CANARY_7731') AS q WHERE false", ["note"]),
]


@pytest.fixture
def real(db: Path):
    s = dpsql.connect(db, analyst="alice")
    yield s
    s.close()


@pytest.mark.parametrize(("sql", "columns"), PROBES)
def test_probes_are_answered_from_the_schema_uncharged_and_never_run(real, db: Path, tripwire, sql: str,
                                                                     columns: list[str]) -> None:
    tripwire.armed = True
    r = real.sql(sql)
    assert r.columns == columns and r.table.num_rows == 0 and r.charged == 0
    assert [name for name, _ in real.describe(sql)] == columns
    assert tripwire.calls == 0
    assert dpsql.admin(db).charges("alice") == []
    assert real.budget().spent == 0


def test_a_probe_has_the_types_of_the_query_it_wraps(real) -> None:
    inner = "SELECT clinic, dp_mean_ci(cost, epsilon := 0.1) AS m, dp_count(*, epsilon := 0.1) FROM visits GROUP BY 1"
    probe = real.sql(f"SELECT * FROM ({inner}) AS q LIMIT 0")
    assert dict(real.describe(f"SELECT * FROM ({inner}) AS q")) == dict(real.describe(f"SELECT * FROM ({inner}) AS q "
                                                                                     "LIMIT 0"))
    answer = real.sql(f"SELECT * FROM ({inner}) AS q")
    assert probe.table.schema == answer.table.schema and answer.charged > 0


@pytest.mark.parametrize("sql", ["SELECT * FROM (SELECT nosuch FROM visits) AS q LIMIT 0",
                                 "SELECT * FROM secrets WHERE 1=0", "SELECT cost + note FROM visits LIMIT 0"])
def test_a_probe_around_what_cannot_be_named_or_bound_is_refused_uncharged(real, db: Path, tripwire, sql: str) -> None:
    tripwire.armed = True
    with pytest.raises(PrivacyError) as e:
        real.sql(sql)
    assert e.value.code in ("DPSQL-E001", "DPSQL-E010") and CANARY not in str(e.value)
    assert dpsql.admin(db).charges("alice") == []


def test_pick_lists_are_the_declared_domain_free(db: Path) -> None:
    dpsql.admin(db).public_keys("visits", "clinic", ["A", "B", "C", "Z"])  # Z: declared, no rows
    with dpsql.connect(db, analyst="alice") as s:
        r = s.sql("SELECT clinic FROM main.visits GROUP BY clinic ORDER BY clinic LIMIT 1000")
        assert r.rows == [("A",), ("B",), ("C",), ("Z",)] and r.charged == 0
        assert s.sql("SELECT DISTINCT clinic FROM visits WHERE clinic < 'C'").rows in ([("A",), ("B",)],
                                                                                        [("B",), ("A",)])
        with pytest.raises(PrivacyError) as e:
            s.sql("SELECT DISTINCT clinic FROM visits WHERE note = 'CANARY_7731'")
        assert e.value.code == "DPSQL-E050"
    assert dpsql.admin(db).charges("alice") == []


def test_plain_aggregates_are_refused_naming_dp_mean_without_the_opt_in(real) -> None:
    with pytest.raises(PrivacyError) as e:
        real.sql("SELECT clinic, AVG(cost) FROM visits GROUP BY clinic")
    assert e.value.code == "DPSQL-E021" and "dp_mean(cost, epsilon := ...)" in e.value.message


def test_the_opt_in_charges_the_rewritten_cost_visibly(db: Path) -> None:
    adm = dpsql.admin(db)
    adm.plain_aggregates("alice", epsilon="0.1")
    assert adm.plain_aggregate_defaults() == {"alice": Decimal("0.1")}
    chart = "SELECT clinic, COUNT(*) AS count, AVG(cost) AS avg_cost FROM visits GROUP BY clinic ORDER BY COUNT(*) DESC"
    expected = plan("SELECT clinic, dp_count(*, epsilon := 0.1) AS count, dp_mean(cost, epsilon := 0.1) AS avg_cost "
                    "FROM visits GROUP BY clinic ORDER BY 2 DESC", adm.catalog("alice")).cost
    assert expected == Decimal("0.6")  # two calls x 0.1 x 3 rows per patient
    with dpsql.connect(db, analyst="alice") as s:
        assert s.describe(f"SELECT * FROM ({chart}) AS q LIMIT 0") == s.describe(chart)  # DOUBLE, not BIGINT
        r = s.sql(chart)
        assert r.charged == expected and r.columns == ["clinic", "count", "avg_cost"] and len(r.rows) == 3
        assert [m["function"] for m in r.mechanisms] == ["dp_count_star", "dp_mean"]
        assert s.sql(chart).replayed_from == r.seq  # a refresh: the same release, charged once
    assert [e.amount for e in adm.charges("alice")] == [expected]
    adm.plain_aggregates("alice", None)
    with dpsql.connect(db, analyst="alice") as s, pytest.raises(PrivacyError) as e:
        s.sql(chart)
    assert e.value.code == "DPSQL-E021"
    with pytest.raises(ValueError):
        adm.plain_aggregates("alice", 5000)


def test_the_budget_is_a_relation_that_survives_limit_and_order_by(real, db: Path) -> None:
    r = real.sql("SELECT * FROM dpsql_budget() LIMIT 1001")
    assert r.columns == ["limit", "spent", "remaining", "accounting"]
    assert r.rows == [(Decimal(3), Decimal(0), Decimal(3), "pure")] and r.charged == 0
    assert real.sql("SELECT * FROM dpsql_last_charge() LIMIT 1001").rows == []
    charged = real.sql("SELECT dp_count(*, epsilon := 0.1) AS n FROM visits")
    r = real.sql("SELECT remaining, spent FROM dpsql_budget() AS b WHERE b.accounting = 'pure' ORDER BY 1 LIMIT 5")
    assert r.rows == [(Decimal("2.7"), Decimal("0.3"))]
    last = real.sql("SELECT * FROM (SELECT * FROM dpsql_last_charge()) AS q LIMIT 1001")
    assert last.columns == ["seq", "kind", "charged", "delta_charged", "accounting", "replayed_from", "status",
                            "charged_at", "remaining"]
    [row] = last.rows
    assert row[:7] == (charged.seq, "charge", Decimal("0.3"), Decimal(0), "pure", None, "released")
    assert row[8] == Decimal("2.7")
    replay = real.sql("SELECT dp_count(*, epsilon := 0.1) AS n FROM visits")
    with dpsql.connect(db, analyst="alice") as other:  # another session (a BI tool's pool) sees it too
        kind, amount, ref = other.sql("SELECT kind, charged, replayed_from FROM dpsql_last_charge()").rows[0]
    assert (kind, amount, ref) == ("replay", Decimal(0), charged.seq) and replay.replayed_from == charged.seq
    assert [n for n, _ in real.describe("SELECT * FROM dpsql_budget() LIMIT 1001")] == ["limit", "spent", "remaining",
                                                                                        "accounting"]
    assert real.sql("SELECT * FROM dpsql_budget() WHERE 1=0").table.num_rows == 0
    assert [e.amount for e in dpsql.admin(db).charges("alice")] == [Decimal("0.3")]


@pytest.mark.parametrize("sql", ["SELECT * FROM dpsql_budget('bob')", "SELECT * FROM dpsql_ledger()",
                                 "SELECT * FROM dpsql_budget() JOIN visits ON true"])
def test_the_budget_relations_do_not_open_anything_else(real, sql: str) -> None:
    with pytest.raises(PrivacyError) as e:
        real.sql(sql)
    assert e.value.code in ("DPSQL-E010", "DPSQL-E020", "DPSQL-E040")
