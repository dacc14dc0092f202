"""Unit tests of the server's building blocks: SQL text scanning, literals, numeric codec, SCRAM, catalog."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from decimal import Decimal

import duckdb
import pytest
from frontdoors.fakes import FakeWorld

from dpsql.errors import PrivacyError
from dpsql.server import types as t
from dpsql.server.auth import ScramExchange, make_verifier, mock_verifier
from dpsql.server.catalog import Catalog, CatalogLimit
from dpsql.sqltext import max_placeholder, split_statements, substitute


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
    and CATALOG_MEMORY (a chain of || over CTEs needs no function and grew to gigabytes).  A stop is an error
    (57014, 53200), not an empty answer a tool would read as "nothing there"."""
    import time

    cat = Catalog(FakeWorld().connect("alice").tables())
    t = time.monotonic()
    with pytest.raises(CatalogLimit) as e:
        cat.execute("SELECT count(*) FROM pg_type a, pg_type b, pg_type c, pg_type d, pg_type e, pg_type f, "
                    "pg_type g")
    assert time.monotonic() - t < 10 and e.value.sqlstate == "57014"  # interrupted after CATALOG_SECONDS
    assert cat.execute("SELECT a.oid FROM pg_type a, pg_type b, pg_type c, pg_type d").num_rows == 100_000
    chain = "a AS (SELECT 'xxxxxxxxxx' AS s)" + "".join(
        f", l{i} AS (SELECT {' || '.join(['s'] * 10)} AS s FROM {'a' if i == 0 else f'l{i - 1}'})" for i in range(7))
    with pytest.raises(CatalogLimit) as e:
        cat.execute(f"WITH {chain} SELECT length(s) AS n FROM l6")  # 10^8 characters
    assert e.value.sqlstate == "53200"


#: pgcli 4.7's table and column lists (\dt, \dv, \d and its completion) as a log of BI tools' catalog queries
#: (external material, not in this repository) recorded them: PostgreSQL array literals in = ANY(...), which
#: DuckDB cannot cast (they used to answer empty)
PGCLI_RELATIONS = """SELECT  n.nspname schema_name, c.relname table_name
        FROM    pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE   c.relkind = ANY('{KINDS}') ORDER BY 1,2"""
PGCLI_COLUMNS = """SELECT  nsp.nspname schema_name, cls.relname table_name, att.attname column_name,
                        att.atttypid::regtype::text type_name, att.atthasdef AS has_default,
                        pg_catalog.pg_get_expr(def.adbin, def.adrelid, true) as default
                FROM    pg_catalog.pg_attribute att
                        INNER JOIN pg_catalog.pg_class cls ON att.attrelid = cls.oid
                        INNER JOIN pg_catalog.pg_namespace nsp ON cls.relnamespace = nsp.oid
                        LEFT OUTER JOIN pg_attrdef def ON def.adrelid = att.attrelid AND def.adnum = att.attnum
                WHERE   cls.relkind = ANY('{KINDS}') AND NOT att.attisdropped AND att.attnum  > 0
                ORDER BY 1, 2, att.attnum"""
PGSPECIAL_LIST = """SELECT n.nspname as schema, c.relname as name,
                    CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'p' THEN 'partitioned table'
                      WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence'
                      WHEN 's' THEN 'special' WHEN 'f' THEN 'foreign table' END as type,
                    pg_catalog.pg_get_userbyid(c.relowner) as owner
            FROM    pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE   c.relkind = ANY('{KINDS}')
            AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_toast'
            AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1, 2"""
PGCLI_FUNCTIONS = """SELECT n.nspname schema_name, p.proname func_name, p.proargnames,
                        COALESCE(proallargtypes::regtype[], proargtypes::regtype[])::text[], p.proargmodes,
                        prorettype::regtype::text return_type, p.prokind = 'a' is_aggregate,
                        p.prokind = 'w' is_window, p.proretset is_set_returning, d.deptype = 'e' is_extension,
                        pg_get_expr(proargdefaults, 0) AS arg_defaults
                FROM pg_catalog.pg_proc p INNER JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                LEFT JOIN pg_depend d ON d.objid = p.oid and d.deptype = 'e'
                WHERE p.prorettype::regtype != 'trigger'::regtype ORDER BY 1, 2"""
HARLEQUIN_ROUTINES = r"""select distinct routine_name as label,
                case when routine_type is null then 'agg' else 'fn' end as type_label,
                case when routine_schema = 'pg_catalog' then null else routine_schema end as context
            from information_schema.routines
            where length(routine_name) < 37 and routine_name not ilike '\_%' and routine_name not ilike 'pg\_%'
                and routine_name not ilike 'binary\_upgrade\_%' order by 1"""


def _real_tables() -> list:
    from dpsql.guard.catalog import TableInfo

    return [TableInfo("flights", "protected", {"month": "INTEGER", "carrier": "VARCHAR", "dep_delay": "DOUBLE",
                                               "tailnum": "VARCHAR"}, privacy_unit="tailnum",
                      public_keys={"carrier": ("AA", "DL", "UA")}),
            TableInfo("airlines", "public", {"carrier": "VARCHAR", "name": "VARCHAR"})]


def test_catalog_answers_pgcli_array_literals() -> None:
    cat = Catalog(FakeWorld().connect("alice").tables())
    tables = [("main", "airlines"), ("main", "flights")]
    for kinds, expected in [("r,p,f", tables), ("v,m", []), ('r,p,""', tables), ("r,p,v,m,S,f,\"\"", tables)]:
        assert cat.handles(PGCLI_RELATIONS.replace("KINDS", kinds))
        assert cat.execute(PGCLI_RELATIONS.replace("KINDS", kinds)).to_pylist() == [
            {"schema_name": s, "table_name": n} for s, n in expected]
        assert [r["name"] for r in cat.execute(PGSPECIAL_LIST.replace("KINDS", kinds)).to_pylist()] == [
            n for _, n in expected]
    columns = cat.execute(PGCLI_COLUMNS.replace("KINDS", "r,p,f"))
    assert columns.num_rows == 6
    assert columns.column("type_name").to_pylist()[:2] == ["text", "text"]  # airlines: regtype::text is a name
    assert dict(zip(columns.column("column_name").to_pylist()[2:], columns.column("type_name").to_pylist()[2:],
                    strict=True)) == {"month": "integer", "carrier": "text", "dep_delay": "double precision",
                                      "day": "date"}
    assert cat.execute(PGCLI_COLUMNS.replace("KINDS", "v,m")).num_columns == 6


@pytest.mark.parametrize(("sql", "out"), [
    ("x = ANY('{r,p,f}')", "x = ANY(['r', 'p', 'f'])"),
    ("x = any ( '{a, \"b c\", NULL, \"\"}' )", "x = any(['a', 'b c', NULL, ''])"),
    ("x <> ALL('{}')", "x <> ALL([])"),
    ("relkind = ANY('{r,p}'::\"char\"[])", "relkind = ANY(['r', 'p'])"),
    ("oid = ANY('{1,2}'::pg_catalog.oid[])", "oid = ANY([1, 2])"),
    ("x = ANY('{it''s}')", "x = ANY(['it''s'])"),
    ("x = ANY('{{1,2},{3,4}}')", "x = ANY('{{1,2},{3,4}}')"),  # not one-dimensional: left alone
    ("x = ANY('{a\"b}')", "x = ANY('{a\"b}')"),
    ("x = '{a,b}'", "x = '{a,b}'"),  # a string that is not an array operand stays a string
    ("a.atttypid::regtype::text", "format_type(a.atttypid, NULL)"),
    ("'public.dp_mean(double precision)'::pg_catalog.regprocedure",
     "(SELECT first(oid) FROM pg_proc WHERE proname = 'dp_mean')"),
    ("COALESCE(p.proallargtypes::pg_catalog.regtype[], p.proargtypes::regtype[])::text[]",
     "COALESCE(_regtypes(p.proallargtypes), _regtypes(p.proargtypes))::text[]"),
])
def test_catalog_rewrites_postgresql_arrays_and_regtype(sql: str, out: str) -> None:
    from dpsql.server.catalog import rewrite

    assert rewrite(sql) == out


def test_catalog_lists_every_dp_function() -> None:
    """pg_proc, information_schema.routines/parameters and \\df name every dp_* aggregate of
    dpsql.duck.AGGREGATE_FUNCTIONS with its arguments (from sql/macros.sql), so tools can suggest them."""
    from dpsql.duck import AGGREGATE_FUNCTIONS

    cat = Catalog(FakeWorld().connect("alice").tables())
    names = sorted(AGGREGATE_FUNCTIONS)
    funcs = cat.execute(PGCLI_FUNCTIONS).to_pylist()
    assert [f["func_name"] for f in funcs] == names
    mean = next(f for f in funcs if f["func_name"] == "dp_mean")
    assert mean["schema_name"] == "public" and mean["is_aggregate"] and not mean["is_extension"]
    assert mean["proargnames"][:3] == ["x", "epsilon", "lower"] and mean["return_type"] == "double precision"
    assert list(mean.values())[3][:2] == ["double precision", "double precision"]  # the ::regtype[] list
    assert mean["arg_defaults"].startswith("NULL::double precision, ")
    quantile_ci = next(f for f in funcs if f["func_name"] == "dp_quantile_ci")
    assert quantile_ci["proargnames"][:3] == ["x", "p", "epsilon"] and quantile_ci["proargnames"][-1] == "level"
    assert quantile_ci["arg_defaults"].endswith(", 0.95")
    assert cat.execute(HARLEQUIN_ROUTINES).to_pylist() == [
        {"label": n, "type_label": "agg", "context": "public"} for n in names]
    row = cat.execute("SELECT pg_catalog.pg_get_function_arguments(p.oid) AS a, pg_get_function_result(p.oid) AS r, "
                      "obj_description(p.oid, 'pg_proc') AS d FROM pg_proc p WHERE proname = 'dp_count'").to_pylist()
    assert row == [{"a": "x anyelement, epsilon double precision DEFAULT NULL::double precision, method text "
                         "DEFAULT NULL::text", "r": "double precision",
                    "d": "dpsql: differentially private count; charged to your budget (epsilon := ...)"}]
    source = cat.execute("SELECT pg_catalog.pg_get_functiondef('dp_median'::pg_catalog.regproc::pg_catalog.oid) "
                         "AS d").column(0).to_pylist()[0]  # psql's and pgcli's \\sf dp_median
    assert source.startswith("-- dpsql: differentially private median; charged to your budget")
    assert "\nCREATE OR REPLACE TEMP MACRO dp_median(x DOUBLE, epsilon := NULL, " in source and source.endswith(";")
    params = cat.execute("SELECT parameter_name, data_type FROM information_schema.parameters WHERE specific_name = "
                         "(SELECT specific_name FROM information_schema.routines WHERE routine_name = "
                         "'dp_count_star') ORDER BY ordinal_position").to_pylist()
    assert params == [{"parameter_name": "epsilon", "data_type": "double precision"},
                      {"parameter_name": "method", "data_type": "text"}]


def test_catalog_comments_say_protected_or_public() -> None:
    cat = Catalog(_real_tables(), database="flights", user="alice")
    rows = cat.execute("SELECT c.relname, obj_description(c.oid, 'pg_class') AS d FROM pg_catalog.pg_class c "
                       "ORDER BY 1").to_pylist()
    assert rows == [{"relname": "airlines", "d": "dpsql: public table"},
                    {"relname": "flights", "d": "dpsql: protected, privacy unit tailnum; use dp_* aggregates"}]
    cols = cat.execute("SELECT a.attname, col_description(a.attrelid, a.attnum) AS d FROM pg_attribute a JOIN "
                       "pg_class c ON c.oid = a.attrelid WHERE c.relname = 'flights' ORDER BY a.attnum").to_pylist()
    assert [(r["attname"], r["d"]) for r in cols] == [
        ("month", None), ("carrier", "dpsql: public keys declared (3 values); GROUP BY it to get every key"),
        ("dep_delay", None), ("tailnum", "dpsql: privacy unit")]
    unit_per_row = Catalog(FakeWorld().connect("alice").tables())
    assert unit_per_row.execute("SELECT table_comment FROM information_schema.tables WHERE table_name = 'flights'"
                                ).to_pylist() == [{"table_comment": "dpsql: protected, each row is a privacy unit; "
                                                                    "use dp_* aggregates"}]


def test_catalog_names_the_logical_database_and_the_user() -> None:
    cat = Catalog(_real_tables(), database="flights", user="alice")
    assert cat.execute("SELECT current_database() AS d, current_catalog AS c, current_user AS u, session_user AS s, "
                       "current_schemas(true) AS p").to_pylist() == [
        {"d": "flights", "c": "flights", "u": "alice", "s": "alice", "p": ["pg_catalog", "main", "public"]}]
    assert cat.execute("SELECT datname FROM pg_catalog.pg_database").to_pylist() == [{"datname": "flights"}]


def test_failed_catalog_query_answers_typed_and_empty() -> None:
    """A query the emulation cannot bind answers no rows but the columns it asked for, typed where the select
    list says (a catalog column, a cast, a literal, a predicate, count), so clients can still read a header."""
    cat = Catalog(FakeWorld().connect("alice").tables())
    out = cat.execute("SELECT c.relname, c.relnatts AS n, c.no_such_column, 1 AS one, 'x'::text AS s, "
                      "c.relname = 'x' AS b, count(*) AS k, c.oid::int8 AS o FROM pg_catalog.pg_class c")
    assert out.num_rows == 0
    assert [(f.name, str(f.type)) for f in out.schema] == [
        ("relname", "string"), ("n", "int16"), ("no_such_column", "string"), ("one", "int32"), ("s", "string"),
        ("b", "bool"), ("k", "int64"), ("o", "int64")]
    star = cat.execute("SELECT n.*, 1 AS x FROM pg_namespace n JOIN pg_class c ON c.no_such_column")
    assert star.schema.names == ["oid", "nspname", "nspowner", "nspacl", "x"] and star.num_rows == 0
    assert cat.describe("SELECT no_such_column FROM pg_class") == [("no_such_column", t.TEXT)]
