"""Consistent answers over the front doors (issue 19): a BI refresh over the wire, a new connection and a
server restart replay the stored release (the NOTICE says so, nothing is charged); SET dpsql.replay = off;
the CLI's cost line, --fresh and `dpsql admin data-version`."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner
from frontdoors.harness import PASSWORD

from dpsql.cli import main
from dpsql.display import cost_line
from dpsql.server.auth import PasswordStore
from dpsql.server.pgwire import PgServer, running

CHART = "SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights GROUP BY carrier ORDER BY carrier"


def dsn(addr: tuple[str, int]) -> str:
    return f"host={addr[0]} port={addr[1]} user=alice password={PASSWORD} dbname=flights sslmode=disable"


def refresh(addr: tuple[str, int], sql: str = CHART, setup: str | None = None) -> tuple[list, list[str]]:
    """One chart view on a new connection: its rows and the notices it got."""
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(dsn(addr), autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        if setup:
            c.execute(setup)
        rows = c.execute(sql).fetchall()
        rows_again = c.execute(sql).fetchall()  # a refresh on the same connection
        assert (rows_again == rows) == (setup is None)  # with SET dpsql.replay = off: fresh noise
    return rows, notices


def serving(real_db: str) -> Callable[[], object]:
    import dpsql

    store = PasswordStore(f"{real_db}.passwords")
    return lambda: running(PgServer(lambda user: dpsql.connect(real_db, analyst=user), host="127.0.0.1", port=0,
                                    passwords=store))


def test_a_chart_refreshed_over_the_wire_is_charged_once(real_db: str) -> None:
    import dpsql

    start = serving(real_db)
    with start() as addr:
        rows, notices = refresh(addr)
        rows2, notices2 = refresh(addr)  # another connection: another session
    with start() as addr:  # the server restarted
        rows3, notices3 = refresh(addr, CHART.replace("GROUP BY", "\n  group by"))  # and the text reformatted
    [charge] = dpsql.admin(real_db).charges("alice")
    replay = f"dpsql: replayed release #{charge.seq}, charged epsilon 0, remaining 9.5"
    assert notices == ["dpsql: charged epsilon 0.5, remaining 9.5", replay]
    assert notices2 == notices3 == [replay, replay]
    assert rows == rows2 == rows3 and [r[0] for r in rows] == ["AA", "DL", "UA"]  # the same noisy counts
    log = dpsql.admin(real_db).log("alice")
    assert [e.kind for e in log] == ["charge"] + ["replay"] * 5
    assert {e.ref_seq for e in log[1:]} == {charge.seq}
    dpsql.admin(real_db).verify()


def test_set_dpsql_replay_off_gives_fresh_noise_charged(real_db: str) -> None:
    import dpsql

    psycopg = pytest.importorskip("psycopg")
    noisy = CHART.replace("0.5", "0.05")  # fresh counts then differ (all three equal: under 1 in 10^5)
    with serving(real_db)() as addr:
        refresh(addr, noisy)
        _, notices = refresh(addr, noisy, setup="SET dpsql.replay = off")
        assert notices == ["dpsql: charged epsilon 0.05, remaining 9.9", "dpsql: charged epsilon 0.05, remaining 9.85"]
        with psycopg.connect(dsn(addr), autocommit=True) as c:
            assert c.execute("SHOW dpsql.replay").fetchone() == ("on",)
            c.execute("SET dpsql.replay TO 'off'")
            assert c.execute("SHOW dpsql.replay").fetchone() == ("off",)
            with pytest.raises(psycopg.Error) as err:
                c.execute("SET dpsql.replay = sometimes")
            assert err.value.sqlstate == "22023"
    assert [e.kind for e in dpsql.admin(real_db).log("alice")] == ["charge", "replay", "charge", "charge"]


def test_cli_query_says_replayed_and_data_version_bumps(real_db: str) -> None:
    runner = CliRunner()
    q = ["query", real_db, "-a", "alice", "--format", "csv", CHART]
    first = runner.invoke(main, q)
    assert first.exit_code == 0 and "ε charged 0.5 · remaining 9.5" in first.stderr
    again = runner.invoke(main, q)
    assert again.exit_code == 0 and again.stdout == first.stdout
    assert "replayed release #2 · ε charged 0 · remaining 9.5" in again.stderr  # seq 1 is the grant
    fresh = runner.invoke(main, [*q, "--fresh"])
    assert "ε charged 0.5 · remaining 9" in fresh.stderr and "replayed" not in fresh.stderr
    r = runner.invoke(main, ["admin", "data-version", real_db])
    assert (r.exit_code, r.stdout.strip()) == (0, "data version 1")
    r = runner.invoke(main, ["admin", "data-version", real_db, "--bump", "--note", "new month"])
    assert r.exit_code == 0 and r.stdout.startswith("data version 2")
    after = runner.invoke(main, q)
    assert "ε charged 0.5 · remaining 8.5" in after.stderr and "replayed" not in after.stderr
    r = runner.invoke(main, ["admin", "log", real_db, "--replays"])
    assert r.exit_code == 0 and r.stdout.count("│ replay ") == 1 and r.stdout.count("│ data_version ") == 1
    assert runner.invoke(main, ["admin", "data-version", real_db, "--note", "x"]).exit_code != 0


def test_cost_line_of_a_replay() -> None:
    assert cost_line(0, 2.7, "pure", replayed_from=12) == "replayed release #12 · ε charged 0 · remaining 2.7"
    plain = cost_line(0, 1, "zcdp", unicode=False, replayed_from=3)
    assert plain == "replayed release #3 - rho charged 0 - remaining 1"
    assert cost_line(0.5, 2.2, "pure") == "ε charged 0.5 · remaining 2.2"


def test_the_shell_says_replayed(real_db: str) -> None:
    import io

    import dpsql
    from dpsql.shell import Shell

    out = io.StringIO()
    with dpsql.connect(real_db, analyst="alice") as s:
        sh = Shell(s, out=out)
        sh.query(CHART)
        sh.query(CHART)
    lines = [ln for ln in out.getvalue().splitlines() if "charged" in ln]
    assert lines == ["ε charged 0.5 · remaining 9.5", "replayed release #2 · ε charged 0 · remaining 9.5"]
