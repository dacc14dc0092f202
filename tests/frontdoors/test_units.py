"""Unit tests of the server's building blocks: SQL text scanning, literals, numeric codec, SCRAM, catalog."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from decimal import Decimal

import duckdb
import pytest

from dpsql.errors import PrivacyError
from dpsql.server import types as t
from dpsql.server.auth import ScramExchange, make_verifier, mock_verifier
from dpsql.server.catalog import Catalog
from dpsql.server.sqltext import max_placeholder, split_statements, substitute

from .fakes import FakeWorld


def test_split_respects_quotes_and_comments() -> None:
    sql = "select ';' as a; -- x; y\n select $$a;b$$, E'it\\'s;' ; /* ; */ ;"
    assert split_statements(sql) == ["select ';' as a", "-- x; y\n select $$a;b$$, E'it\\'s;'"]


def test_substitute_only_real_placeholders() -> None:
    sql = "select $1, '$1', \"$2\", x$1 -- $1\n, $2"
    assert substitute(sql, lambda n: f"<{n}>") == "select <1>, '$1', \"$2\", x$1 -- $1\n, <2>"
    assert max_placeholder("select $12, '$13'") == 12


@pytest.mark.parametrize("value", ["x'); DROP TABLE t; --", "a''b", "\\'", "$1", "--"])
def test_string_literals_cannot_escape(value: str) -> None:
    lit = t.to_literal(t.TEXT, value.encode(), True)
    assert duckdb.sql(f"SELECT {lit}").fetchall() == [(value,)]
    assert duckdb.sql(f"SELECT {t.python_literal(value)}").fetchall() == [(value,)]


def test_numeric_text_parameters_are_validated() -> None:
    assert t.to_literal(t.FLOAT8, b"0.5", True) == "0.5"
    assert t.to_literal(0, b"0.5", True) == "0.5"  # untyped number stays a number (pg8000, ε)
    assert t.to_literal(0, b"0.5 OR 1=1", True) == "'0.5 OR 1=1'"
    with pytest.raises(ValueError):
        t.to_literal(t.INT4, b"1 OR 1=1", True)


@pytest.mark.parametrize("x", ["0", "1.5", "-123456.789", "0.0001", "100000000", "12.30", "0.000012345", "9" * 30])
def test_numeric_binary_roundtrip(x: str) -> None:
    d = Decimal(x)
    assert t.decode_param_binary(t.NUMERIC, t.encoder(t.NUMERIC, True)(d)) == d


def test_binary_timestamp_and_date_roundtrip() -> None:
    ts = dt.datetime(2013, 5, 6, 7, 8, 9, 123456)
    assert t.decode_param_binary(t.TIMESTAMP, t.encoder(t.TIMESTAMP, True)(ts)) == ts
    d = dt.date(1999, 12, 31)
    assert t.decode_param_binary(t.DATE, t.encoder(t.DATE, True)(d)) == d


def _client_final(password: str, client_first_bare: str, server_first: str) -> str:
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    sig = hmac.new(stored, auth, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


@pytest.mark.parametrize("password,ok", [("right", True), ("wrong", False)])
def test_scram_exchange(password: str, ok: bool) -> None:
    ex = ScramExchange(make_verifier("right"))
    server_first = ex.first(b"n,,n=,r=abcdef").decode()
    final = ex.final(_client_final(password, "n=,r=abcdef", server_first).encode())
    assert (final is not None) == ok


def test_scram_unknown_user_fails_like_a_wrong_password() -> None:
    ex = ScramExchange(mock_verifier(b"k" * 32, "mallory"), known=False)
    server_first = ex.first(b"n,,n=,r=abcdef").decode()
    assert ex.final(_client_final("anything", "n=,r=abcdef", server_first).encode()) is None


def test_catalog_routing_and_isolation() -> None:
    cat = Catalog(FakeWorld().connect("alice").tables())
    assert cat.handles("SELECT relname FROM pg_catalog.pg_class")
    assert cat.handles("SELECT table_name FROM information_schema.tables")
    assert cat.handles("SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) "
                       "'^(flights)$' COLLATE pg_catalog.default")  # the table name only appears in a literal
    assert cat.handles("SELECT version()")
    assert not cat.handles("SELECT * FROM flights")
    assert not cat.handles("SELECT c.relname FROM pg_class c JOIN flights f ON true")
    assert not cat.handles("SELECT dp_count(1)")
    for stmt in ("ATTACH 'x.duckdb' AS x", "CREATE TABLE pg_x AS SELECT 1", "PRAGMA version", "COPY pg_class TO 'f'",
                 "INSTALL httpfs", "SET threads = 1"):
        assert not cat.handles(stmt), stmt
    assert cat.execute("SELECT relname FROM pg_catalog.pg_class ORDER BY 1").column(0).to_pylist() == [
        "airlines", "flights"]
    assert cat.execute("SELECT count(*) AS n FROM pg_catalog.pg_attribute").column(0).to_pylist() == [6]
    # the catalog connection holds no data, reads no files, and is only asked what its allow-list permits
    for sql in ("SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM flights"):
        with pytest.raises(PrivacyError, match="DPSQL-E010"):
            cat.execute(sql)


class _CannotRun:
    """Stands in for the catalog's DuckDB connection: a statement that reaches it fails the test."""

    def cursor(self) -> None:
        raise AssertionError("the statement ran on the catalog connection")


def _catalog_that_cannot_run() -> Catalog:
    cat = Catalog(FakeWorld().connect("alice").tables())
    cat._connection()
    cat._con = _CannotRun()  # type: ignore[assignment]
    return cat


#: Issue 13 finding 4: the uncharged catalog route ran any table-free DuckDB SQL (duckdb_settings() showed the
#: server's home and secret directories; range(6e9) burned a minute of CPU per call).  Table functions, also
#: hidden in a CTE, a subquery or LATERAL, DuckDB's own views behind a CTE of the same name, functions off the
#: allow-list, recursion and unparsable statements are refused (E010) before anything runs.
HOSTILE_CATALOG = [
    "SELECT name, value FROM duckdb_settings()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM pragma_database_size()",
    "SELECT sum(x) FROM range(6000000000) t(x)",
    "SELECT count(*) FROM generate_series(1, 100000000)",
    "SELECT count(*) FROM generate_series(1, 1e8)",
    "SELECT generate_series(1, 100000000)",
    "SELECT count(*) FROM unnest(range(100000000))",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM glob('*')",
    "SELECT * FROM query('select 1')",
    "SELECT * FROM query_table('flights')",
    "SELECT repeat('x', 100000000)",
    "SELECT lpad('x', 100000000, 'x')",
    "SELECT 'x'.repeat(100000000)",
    "SELECT pg_sleep(5)",
    "SELECT getenv('HOME')",
    "WITH s AS (SELECT * FROM range(100000000) t(x)) SELECT count(*) FROM s",
    "SELECT (SELECT count(*) FROM generate_series(1, 100000000)) AS n",
    "SELECT c.relname, g.x FROM pg_class c, LATERAL (SELECT * FROM range(100000000) t(x)) g",
    "SELECT c.relname, g FROM pg_class c CROSS JOIN LATERAL generate_series(1, 100000000) g",
    "WITH duckdb_tables AS (SELECT * FROM duckdb_tables) SELECT * FROM duckdb_tables",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r",
    "SELECT relname FROM pg_class WHERE (",
    "SELECT relname FROM pg_class LIMIT 1 -- " + "x" * 40_000,
]


@pytest.mark.parametrize("sql", HOSTILE_CATALOG)
def test_catalog_route_refuses_what_is_not_on_its_allow_list(sql: str) -> None:
    cat = _catalog_that_cannot_run()
    assert cat.handles(sql)  # names no user table: the catalog route's to answer, not the guard's
    with pytest.raises(PrivacyError) as e:
        cat.execute(sql)
    assert e.value.code == "DPSQL-E010"
    assert e.value.message.startswith("the catalog route only answers catalog queries: ")


#: What clients send while browsing, on top of tests/clients: pgcli's search path, psycopg's server-side
#: cursor close, the DuckDB CLI's ATTACH, harlequin's completions, psql's \l+ and \d (publications).
CLIENT_CATALOG = [
    "SELECT * FROM unnest(current_schemas(true))",
    "SELECT 1 FROM pg_catalog.pg_cursors WHERE name = 'c_1'",
    "SELECT pg_namespace.oid, tablename, indexname FROM pg_indexes JOIN pg_namespace ON (schemaname=nspname) "
    "ORDER BY pg_namespace.oid",
    "select distinct routine_name as label, case when routine_type is null then 'agg' else 'fn' end as type_label "
    "from information_schema.routines where length(routine_name) < 37 and routine_name not ilike 'pg\\_%'",
    "select distinct name as label from pg_settings",
    "SELECT d.datname, pg_catalog.pg_size_pretty(pg_catalog.pg_database_size(d.datname)), "
    "pg_catalog.array_to_string(d.datacl, E'\\n') FROM pg_catalog.pg_database d ORDER BY 1",
    "SELECT pubname, (SELECT string_agg(attname, ', ') FROM pg_catalog.generate_series(0, "
    "pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s, pg_catalog.pg_attribute "
    "WHERE attrelid = pr.prrelid AND attnum = prattrs[s]) FROM pg_catalog.pg_publication p "
    "JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid",
    "SELECT current_setting('default_table_access_method'), current_schema(), current_database()",
    "WITH t AS (SELECT relname FROM pg_class) SELECT count(*) FROM t",
    "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) v(n, s)",
]


@pytest.mark.parametrize("sql", CLIENT_CATALOG)
def test_catalog_route_answers_what_clients_send(sql: str) -> None:
    cat = Catalog(FakeWorld().connect("alice").tables())
    assert cat.handles(sql)
    assert cat.execute(sql).num_columns > 0


def test_catalog_current_setting_is_the_emulation() -> None:
    """current_setting() is dpsql's macro over its own SETTINGS (clients need it), never DuckDB's settings."""
    cat = Catalog(FakeWorld().connect("alice").tables())
    assert cat.execute("SELECT current_setting('server_version') AS v").column(0).to_pylist() == ["15.0"]
    for name in ("home_directory", "secret_directory", "memory_limit", "threads"):
        assert cat.execute(f"SELECT current_setting('{name}') AS v").column(0).to_pylist() == [None]


def test_catalog_route_is_bounded_in_time_rows_and_memory() -> None:
    """The second line of defence: an allowed statement still stops after CATALOG_SECONDS, CATALOG_ROWS rows
    and CATALOG_MEMORY (a chain of || over CTEs needs no function and grew to gigabytes)."""
    import time

    cat = Catalog(FakeWorld().connect("alice").tables())
    t = time.monotonic()
    out = cat.execute("SELECT count(*) FROM pg_type a, pg_type b, pg_type c, pg_type d, pg_type e, pg_type f, "
                      "pg_type g")
    assert time.monotonic() - t < 10  # interrupted after CATALOG_SECONDS, answered empty
    assert out.num_rows == 0
    assert cat.execute("SELECT a.oid FROM pg_type a, pg_type b, pg_type c, pg_type d").num_rows == 100_000
    chain = "a AS (SELECT 'xxxxxxxxxx' AS s)" + "".join(
        f", l{i} AS (SELECT {' || '.join(['s'] * 10)} AS s FROM {'a' if i == 0 else f'l{i - 1}'})" for i in range(7))
    assert cat.execute(f"WITH {chain} SELECT length(s) AS n FROM l6").num_rows == 0  # 10^8 characters
