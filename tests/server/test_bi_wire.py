"""What BI tools ask by default, over the wire with psycopg (issue 19): zero-row probes and pick-lists answered
free, a default COUNT(*) chart under the owner's opt-in charged visibly, and the budget readable with Superset's
appended LIMIT; the opt-in's CLI verb."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from click.testing import CliRunner
from frontdoors.harness import PASSWORD

from dpsql.cli import main
from dpsql.server.auth import PasswordStore
from dpsql.server.pgwire import PgServer, running

psycopg = pytest.importorskip("psycopg")


def dsn(addr: tuple[str, int]) -> str:
    return f"host={addr[0]} port={addr[1]} user=alice password={PASSWORD} dbname=flights sslmode=disable"


@pytest.fixture
def opted_in_server(real_db: str) -> Iterator[tuple[str, int]]:
    """The real server on a database whose owner mapped alice's plain aggregates to dp_* at ε 0.2 per call."""
    import dpsql

    dpsql.admin(real_db).plain_aggregates("alice", epsilon="0.2")
    store = PasswordStore(f"{real_db}.passwords")
    with running(PgServer(lambda user: dpsql.connect(real_db, analyst=user), host="127.0.0.1", port=0,
                          passwords=store)) as addr:
        yield addr


def test_bi_default_sql_over_the_wire(opted_in_server: tuple[str, int], real_db: str) -> None:
    import dpsql

    with psycopg.connect(dsn(opted_in_server), autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        # zero-row probes: jupysql's table check, SQLAlchemy/Superset column discovery around a dp query
        cur = c.execute("SELECT * FROM flights WHERE 1=0")
        assert [d.name for d in cur.description] == ["carrier", "month", "dep_delay"] and cur.fetchall() == []
        cur = c.execute("SELECT * FROM (SELECT carrier, dp_mean(dep_delay, epsilon := 0.5) AS m FROM flights "
                        "GROUP BY carrier) AS virtual_table LIMIT 0")
        assert [d.name for d in cur.description] == ["carrier", "m"] and cur.fetchall() == []
        # Superset's filter pick-list and a DISTINCT: the declared keys
        rows = c.execute("SELECT carrier FROM main.flights GROUP BY carrier ORDER BY carrier LIMIT 1000").fetchall()
        assert rows == [("AA",), ("DL",), ("UA",)]
        assert sorted(c.execute("SELECT DISTINCT carrier FROM flights").fetchall()) == rows
        # the budget with Superset's appended LIMIT, before and after a default COUNT(*) chart
        assert c.execute("SELECT * FROM dpsql_budget() LIMIT 1001").fetchall() == [
            (Decimal(10), Decimal(0), Decimal(10), "pure")]
        assert c.execute("SELECT * FROM dpsql_last_charge() LIMIT 1001").fetchall() == []
        assert notices == ["dpsql: charged epsilon 0, remaining 10"] * 6
        chart = "SELECT COUNT(*) AS count FROM main.flights LIMIT 50000"
        [(count,)] = c.execute(chart).fetchall()
        assert abs(count - 3000) < 200 and notices[-1] == "dpsql: charged epsilon 0.2, remaining 9.8"
        assert c.execute(chart).fetchall() == [(count,)]  # a refresh: the same release, not charged again
        kind, charged, replayed, remaining = c.execute(
            "SELECT kind, charged, replayed_from, remaining FROM dpsql_last_charge() LIMIT 1001").fetchone()
        assert (kind, charged, remaining) == ("replay", Decimal(0), Decimal("9.8")) and replayed is not None
        assert c.execute("SELECT spent FROM dpsql_budget() ORDER BY 1 LIMIT 1001").fetchone() == (Decimal("0.2"),)
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT MAX(dep_delay) FROM flights")
        assert str(e.value).startswith("DPSQL-E021: ") and "dp_quantile(dep_delay" in str(e.value)
    assert [e.amount for e in dpsql.admin(real_db).charges("alice")] == [Decimal("0.2")]


def test_cli_plain_aggregates(real_db: str) -> None:
    runner = CliRunner()
    r = runner.invoke(main, ["admin", "plain-aggregates", real_db, "alice", "--epsilon", "0.1"])
    assert r.exit_code == 0 and "alice: plain COUNT/SUM/AVG -> dp_* with epsilon 0.1 per call" in r.output
    r = runner.invoke(main, ["admin", "plain-aggregates", real_db])
    assert r.exit_code == 0 and r.output.strip() == "alice: plain COUNT/SUM/AVG -> dp_* with epsilon 0.1 per call"
    mean = "SELECT AVG(dep_delay) AS m FROM flights"
    r = runner.invoke(main, ["query", real_db, "-a", "alice", "--format", "csv", mean])
    assert r.exit_code == 0 and r.stdout.startswith("m\n") and "charged 0.1" in r.stderr
    r = runner.invoke(main, ["admin", "plain-aggregates", real_db, "alice", "--off"])
    assert r.exit_code == 0 and runner.invoke(main, ["admin", "plain-aggregates", real_db]).output == ""
    r = runner.invoke(main, ["query", real_db, "-a", "alice", mean])
    assert r.exit_code == 1 and "DPSQL-E021" in r.stderr and "dp_mean(dep_delay, epsilon := ...)" in r.stderr
    assert runner.invoke(main, ["admin", "plain-aggregates", real_db, "alice", "--epsilon", "-1"]).exit_code != 0
    assert runner.invoke(main, ["admin", "plain-aggregates", real_db, "alice"]).exit_code != 0
