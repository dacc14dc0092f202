"""Wire-protocol behaviour of the server, driven by psycopg 3 against fake guarded sessions."""

from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal

import pytest
from frontdoors.fakes import FakeWorld
from frontdoors.harness import PASSWORD

psycopg = pytest.importorskip("psycopg")


def dsn(addr: tuple[str, int], user: str = "alice", password: str = PASSWORD, sslmode: str = "disable") -> str:
    return f"host={addr[0]} port={addr[1]} user={user} password={password} dbname=flights sslmode={sslmode}"


def test_dp_query_simple_and_extended(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = c.execute("SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights "
                         "GROUP BY carrier ORDER BY carrier", prepare=False).fetchall()
        assert rows == [("AA", 100.0), ("DL", 100.0), ("UA", 100.0)]
        cur = c.cursor()
        cur.execute("SELECT dp_count(dep_delay, epsilon := 0.5) FROM flights")  # extended protocol
        assert cur.fetchall() == [(300.0,)]
        assert notices[-1] == "dpsql: charged epsilon 0.5, remaining 9"
    assert [ch[1] for ch in world.charges] == [Decimal("0.5"), Decimal("0.5")]


def test_rejection_carries_code_and_sqlstate(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), autocommit=True) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
            c.execute("SELECT dep_delay FROM flights")
        assert e.value.sqlstate == "42501"
        assert str(e.value).startswith("DPSQL-E021: ")
        assert e.value.diag.message_detail == "dpsql error code DPSQL-E021"
        with pytest.raises(psycopg.errors.SyntaxError):
            c.execute("SELECT 1; SELECT 2", prepare=True)  # several statements in one prepared statement
        assert c.execute("SELECT 1 AS one").fetchone() == (1,)  # the connection survives
    assert world.charges == []


def test_catalog_refusal_is_shaped_like_a_guard_refusal(server, world: FakeWorld) -> None:
    """The closed catalog route (issue 13 finding 4) refuses like the guard: SQLSTATE 42501, the code first in the
    message and in the detail, on Execute and on Describe; nothing reaches the session, nothing is charged."""
    with psycopg.connect(dsn(server), autocommit=True) as c:
        for sql in ("SELECT name, value FROM duckdb_settings()", "SELECT repeat('x', 100000000) AS x",
                    "SELECT pg_sleep(5)"):
            for prepare in (False, True):
                with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
                    c.execute(sql, prepare=prepare)
                assert str(e.value).startswith("DPSQL-E010: the catalog route only answers catalog queries: ")
                assert e.value.diag.message_detail == "dpsql error code DPSQL-E010"
        assert c.execute("SELECT count(*) FROM pg_catalog.pg_class").fetchone() == (2,)
    assert world.charges == [] and world.describes == []


def test_execute_charges_once_and_describe_never(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), autocommit=True, prepare_threshold=0) as c:
        for _ in range(3):
            c.execute("SELECT dp_mean(dep_delay, epsilon := %s) FROM flights WHERE carrier = %s", (0.25, "UA"))
    assert len(world.charges) == 3
    assert all(ch[1] == Decimal("0.25") for ch in world.charges)
    assert world.describes  # prepared statements were described, and that did not charge


@pytest.mark.parametrize("binary", [False, True])
def test_parameters_of_common_types(server, world: FakeWorld, binary: bool) -> None:
    values = [7, 2.5, "O'Hare; DROP TABLE flights --", dt.date(2013, 3, 1), dt.datetime(2013, 3, 1, 12, 30),
              Decimal("1.25"), True, None, -3]
    with psycopg.connect(dsn(server), autocommit=True) as c:
        cur = c.cursor(binary=binary)
        cur.execute("SELECT %s AS i, %s AS f, %s AS s, %s AS d, %s AS ts, %s AS n, %s AS b, %s AS z, %s AS neg",
                    values)
        row = cur.fetchone()
    assert row == tuple(values)


def test_eps_parameter_is_bound_before_the_guard(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), autocommit=True) as c:
        c.execute("SELECT dp_count(dep_delay, epsilon := %s) FROM flights WHERE carrier = %s", (0.125, "AA"))
    assert world.charges[0][2] == "SELECT dp_count(dep_delay, epsilon := 0.125) FROM flights WHERE carrier = 'AA'"


@pytest.mark.parametrize("binary", [False, True])
def test_result_formats(server, binary: bool) -> None:
    q = ("SELECT 1::SMALLINT AS a, 2::INTEGER AS b, 3::BIGINT AS c, 1.5::REAL AS d, 2.25::DOUBLE AS e, "
         "true AS f, 'x'::VARCHAR AS g, DATE '2013-01-02' AS h, TIMESTAMP '2013-01-02 03:04:05.5' AS i, "
         "12.345::DECIMAL(10,3) AS j, NULL::INTEGER AS k, 'NaN'::DOUBLE AS l")
    with psycopg.connect(dsn(server), autocommit=True) as c:
        row = c.cursor(binary=binary).execute(q).fetchone()
    assert row[:10] == (1, 2, 3, 1.5, 2.25, True, "x", dt.date(2013, 1, 2), dt.datetime(2013, 1, 2, 3, 4, 5, 500000),
                        Decimal("12.345"))
    assert row[10] is None and row[11] != row[11]


def test_session_chatter_never_reaches_the_session(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server)) as c:  # not autocommit: psycopg sends BEGIN
        c.execute("SET statement_timeout = 0")
        c.execute("SET search_path TO evil")
        assert c.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        assert c.execute("SHOW TRANSACTION ISOLATION LEVEL").fetchone() == ("read committed",)
        assert c.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 15.0 (dpsql")
        c.commit()
        with pytest.raises(psycopg.errors.UndefinedObject):
            c.execute("SHOW no_such_setting")
        c.rollback()
        budget = c.execute("SHOW dpsql.budget").fetchone()
        assert budget == (Decimal(10), Decimal(0), Decimal(10), "pure")
    assert world.charges == [] and world.describes == []


def test_simple_query_with_several_statements_stops_at_first_error(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), autocommit=True) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT dp_count(dep_delay, epsilon := 0.5) FROM flights; SELECT * FROM flights; "
                      "SELECT dp_count(dep_delay, epsilon := 0.25) FROM flights", prepare=False)
    assert [ch[1] for ch in world.charges] == [Decimal("0.5")]


def test_authentication(server) -> None:
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn(server, password="wrong"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn(server, user="mallory"))
    with pytest.raises(psycopg.OperationalError, match="DPSQL-E070"):
        psycopg.connect(dsn(server, user="nobody"))  # known password, but no session for this principal


def test_tls_required_and_used(tls_server, tls_files) -> None:
    with pytest.raises(psycopg.OperationalError, match="requires TLS"):
        psycopg.connect(dsn(tls_server, sslmode="disable"))
    conninfo = dsn(tls_server, sslmode="verify-full") + f" sslrootcert={tls_files[0]}"
    with psycopg.connect(conninfo.replace("host=127.0.0.1", "host=localhost hostaddr=127.0.0.1")) as c:
        assert c.pgconn.ssl_in_use
        assert c.execute("SELECT dp_count(dep_delay, epsilon := 0.1) FROM flights").fetchone() == (300.0,)


def test_many_concurrent_clients(server, world: FakeWorld) -> None:
    errors: list[BaseException] = []

    def client() -> None:
        try:
            with psycopg.connect(dsn(server, user="bob"), autocommit=True) as c:
                for _ in range(3):
                    assert c.execute("SELECT dp_count(dep_delay, epsilon := 0.01) FROM flights WHERE month = %s",
                                     (1,)).fetchone() == (100.0,)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(12)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(world.charges) == 36
