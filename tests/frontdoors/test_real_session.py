"""Front doors over the real guarded session (dpsql.connect/admin): server, CLI query/admin commands."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from click.testing import CliRunner

from dpsql.cli import main

from .harness import PASSWORD

E060_CARRIER = ("DPSQL-E060: dp_mean: its value must be numeric; carrier || 'x' is VARCHAR (convert it, e.g. "
                "TRY_CAST(carrier || 'x' AS DOUBLE), or count it with dp_count)")


def dsn(addr: tuple[str, int]) -> str:
    return f"host={addr[0]} port={addr[1]} user=alice password={PASSWORD} dbname=flights sslmode=disable"


def test_server_over_real_session(real_server, real_db) -> None:
    import dpsql

    psycopg = pytest.importorskip("psycopg")

    with psycopg.connect(dsn(real_server), autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = c.execute("SELECT carrier, dp_count(dep_delay, epsilon := %s) AS n FROM flights GROUP BY carrier "
                         "ORDER BY carrier", (0.5,)).fetchall()
        assert [r[0] for r in rows] == ["AA", "DL", "UA"]
        assert notices == ["dpsql: charged epsilon 0.5, remaining 9.5"]
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT dep_delay FROM flights")
        assert str(e.value).startswith("DPSQL-E0")
        with pytest.raises(psycopg.Error) as e:  # issue 14: a derived non-numeric value, named, uncharged
            c.execute("SELECT dp_mean(carrier || 'x', epsilon := 0.5) FROM flights")
        assert e.value.diag.message_primary == E060_CARRIER
        tables = c.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()
        assert tables == [("airlines",), ("flights",)]
        assert c.execute("SHOW dpsql.budget").fetchone()[2] == Decimal("9.5")
    charges = dpsql.admin(real_db).charges("alice")
    assert [e.amount for e in charges] == [Decimal("0.5")]  # prepared + described + executed: charged once


def test_cli_query_and_admin(real_db) -> None:
    runner = CliRunner()
    r = runner.invoke(main, ["query", real_db, "-a", "alice", "--format", "csv",
                             "SELECT carrier, dp_count(dep_delay, epsilon := 0.25) AS n FROM flights GROUP BY carrier"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "carrier,n"
    assert "charged 0.25" in r.stderr
    r = runner.invoke(main, ["query", real_db, "-a", "alice", "SELECT * FROM flights"])
    assert r.exit_code == 1 and "Error: DPSQL-E0" in r.stderr
    r = runner.invoke(main, ["query", real_db, "-a", "alice",
                             "SELECT carrier, dp_mean(carrier || 'x', epsilon := 0.25) FROM flights GROUP BY carrier"])
    assert r.exit_code == 1 and r.stderr.strip() == f"Error: {E060_CARRIER}"
    r = runner.invoke(main, ["query", real_db, "-a", "alice", "SELECT carrier, dp_mean_ci(dep_delay, epsilon := 0.25) "
                             "AS m FROM flights GROUP BY carrier ORDER BY carrier"])  # issue 14: with error bars
    assert r.exit_code == 0 and re.search(r"│ AA      │ -?\d+(\.\d+)? (± |\[)", r.stdout), r.output
    r = runner.invoke(main, ["query", real_db, "-a", "alice", "--format", "json",
                             "SELECT dp_mean(dep_delay, epsilon := 0.25) AS m FROM flights"])
    assert r.exit_code == 0 and r.stdout.startswith('[{"m": ')
    r = runner.invoke(main, ["admin", "budgets", real_db])
    assert "alice" in r.stdout and "9.25" in r.stdout
    r = runner.invoke(main, ["admin", "log", real_db, "--principal", "alice"])
    assert r.stdout.count("│ alice ") == 3
    r = runner.invoke(main, ["admin", "grant", real_db, "bob", "--epsilon", "2"])
    assert r.exit_code == 0 and "bob: limit 2" in r.stdout
    r = runner.invoke(main, ["admin", "password", real_db, "bob", "--password-stdin"], input="pw\n")
    assert r.exit_code == 0
    from dpsql.server import PasswordStore, password_file

    assert PasswordStore(password_file(real_db)).principals() == ["alice", "bob"]


def test_cli_admin_protect_keys_public(tmp_path) -> None:
    import duckdb

    db = str(tmp_path / "h.duckdb")
    con = duckdb.connect(db)
    con.execute("CREATE TABLE visits AS SELECT i % 10 AS patient, ['a','b'][i % 2 + 1] AS ward, i::DOUBLE AS cost "
                "FROM range(100) r(i)")
    con.execute("CREATE TABLE wards AS SELECT * FROM (VALUES ('a'), ('b')) v(ward)")
    con.close()
    runner = CliRunner()
    protect = ["admin", "protect", db, "visits", "--unit", "patient", "--max-rows", "5"]
    assert runner.invoke(main, protect).exit_code == 0
    assert runner.invoke(main, ["admin", "keys", db, "visits", "ward", "a", "b"]).exit_code == 0
    assert runner.invoke(main, ["admin", "public", db, "wards"]).exit_code == 0
    assert runner.invoke(main, ["admin", "grant", db, "carol", "--epsilon", "1"]).exit_code == 0
    import dpsql

    with dpsql.connect(db, analyst="carol") as s:
        kinds = {t.name: (t.kind, t.privacy_unit) for t in s.tables()}
    assert kinds == {"visits": ("protected", "patient"), "wards": ("public", None)}


def test_dpsql_serve_command(real_db, tls_files) -> None:
    psycopg = pytest.importorskip("psycopg")
    import os
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "dpsql.cli", "serve", real_db, "--port", "0", "--tls-cert",
                             tls_files[0], "--tls-key", tls_files[1]], stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, NB_NO_LEAK_WARNINGS="1"))
    try:
        line = proc.stderr.readline()
        m = re.search(r"on 127\.0\.0\.1:(\d+) \(TLS required, auth scram\)", line)
        assert m, line
        conninfo = (f"host=127.0.0.1 port={m.group(1)} user=alice password={PASSWORD} dbname=flights "
                    f"sslmode=verify-full sslrootcert={tls_files[0]}")
        with psycopg.connect(conninfo, autocommit=True) as c:
            assert c.pgconn.ssl_in_use
            rows = c.execute("SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights "
                             "GROUP BY carrier ORDER BY carrier").fetchall()
            assert [r[0] for r in rows] == ["AA", "DL", "UA"]
            # the logical database name is the file's stem (--database-name overrides it), not flights.duckdb
            assert c.execute("SELECT current_database(), (SELECT datname FROM pg_catalog.pg_database)").fetchone() \
                == ("flights", "flights")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0


@pytest.mark.parametrize("binary", [False, True])
def test_server_sends_a_ci_struct_as_json_text(real_server, real_db, binary: bool) -> None:
    """Issue 14: a dp_*_ci column arrives as one text column holding {"value": v, "lo": l, "hi": h} (JSON; an
    end without a finite bound is Infinity / -Infinity, as PostgreSQL writes floats; a NULL release is NULL),
    which psql prints as is and json.loads reads; charged what the plain call costs."""
    import json

    import dpsql

    psycopg = pytest.importorskip("psycopg")

    with psycopg.connect(dsn(real_server), autocommit=True) as c:
        cur = c.cursor(binary=binary)
        cur.execute("SELECT carrier, dp_count_ci(dep_delay, epsilon := %s, level := 0.9) AS n FROM flights "
                    "GROUP BY carrier ORDER BY carrier", (0.5,))
        assert [d.name for d in cur.description] == ["carrier", "n"]
        assert cur.description[1].type_code == 25  # text
        rows = cur.fetchall()
    assert [r[0] for r in rows] == ["AA", "DL", "UA"]
    for _, text in rows:
        assert text.startswith('{"value": ') and text.endswith("}")
        r = json.loads(text)
        assert list(r) == ["value", "lo", "hi"] and r["lo"] <= r["value"] <= r["hi"] and abs(r["value"] - 1000) < 50
    assert [e.amount for e in dpsql.admin(real_db).charges("alice")] == [Decimal("0.5")]


def test_median_over_the_wire_and_cli_runs_the_summary_plans(real_server, real_db, monkeypatch) -> None:
    """Issue 17: a guarded dp_median / dp_quantile through the server and through ``dpsql query`` is answered by
    the summary plans (over the query's input materialized once), charged once, with its columns and types."""
    import dpsql
    from dpsql import plans

    psycopg = pytest.importorskip("psycopg")
    seen = []
    real = plans.run

    def spy(con, sql, rng=None, *, materialize=False):  # noqa: ANN001, ANN202
        seen.append(materialize)
        return real(con, sql, rng, materialize=materialize)

    monkeypatch.setattr(plans, "run", spy)
    with psycopg.connect(dsn(real_server), autocommit=True) as c:
        cur = c.execute("SELECT carrier, dp_median(dep_delay, epsilon := 0.5) AS m, dp_quantile(dep_delay, 0.9, "
                        "epsilon := 0.5) AS p90 FROM flights GROUP BY carrier")
        assert [d.name for d in cur.description] == ["carrier", "m", "p90"]
        rows = sorted(cur.fetchall())
    assert [r[0] for r in rows] == ["AA", "DL", "UA"]
    assert all(isinstance(v, float) and -10 <= v <= 60 for r in rows for v in r[1:])  # data in [-5, 44], 1000 rows each
    assert seen.count(True) == 1
    r = CliRunner().invoke(main, ["query", real_db, "-a", "alice", "--format", "csv",
                                  "SELECT dp_median(dep_delay, epsilon := 0.25) AS m FROM flights"])
    assert r.exit_code == 0, r.output
    assert seen.count(True) == 2
    assert [e.amount for e in dpsql.admin(real_db).charges("alice")] == [Decimal("1.0"), Decimal("0.25")]
