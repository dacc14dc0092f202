"""A PostgreSQL-looking catalog built only from dpsql metadata (``session.tables()``).

Clients probe ``pg_catalog`` and ``information_schema`` on connect and while browsing.  Those statements never reach
the protected database: they run on a private in-memory DuckDB that holds catalog tables filled from the session's
table list (names, column types, protected/public) and nothing else, no rows, no statistics.  External access is
disabled and the configuration locked on that connection, so it cannot read files either.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

from . import types as t
from .sqltext import _segments, strip_comments

log = logging.getLogger(__name__)

SERVER_VERSION = "15.0"
VERSION_STRING = f"PostgreSQL {SERVER_VERSION} (dpsql guarded DuckDB) on x86_64-pc-linux-gnu, 64-bit"
NAMESPACE_OID = {"pg_catalog": 11, "public": 2200, "information_schema": 13000, "main": 16384}
FIRST_TABLE_OID = 16400

_FORMAT = {
    t.BOOL: "boolean", t.INT2: "smallint", t.INT4: "integer", t.INT8: "bigint", t.FLOAT4: "real",
    t.FLOAT8: "double precision", t.TEXT: "text", t.VARCHAR: "character varying", t.NUMERIC: "numeric",
    t.DATE: "date", t.TIME: "time without time zone", t.TIMESTAMP: "timestamp without time zone",
    t.TIMESTAMPTZ: "timestamp with time zone", t.INTERVAL: "interval", t.UUID_: "uuid", t.BYTEA: "bytea",
    t.JSON_: "json", t.JSONB: "jsonb", t.OID: "oid", t.NAME: "name", t.CHAR: '"char"', t.BPCHAR: "character",
    t.UNKNOWN: "unknown",
}

_TYPE_CATEGORY = {t.BOOL: "B", t.INT2: "N", t.INT4: "N", t.INT8: "N", t.FLOAT4: "N", t.FLOAT8: "N",
                  t.NUMERIC: "N", t.OID: "N", t.DATE: "D", t.TIME: "D", t.TIMESTAMP: "D", t.TIMESTAMPTZ: "D",
                  t.INTERVAL: "T", t.UUID_: "U", t.BYTEA: "U", t.JSON_: "U", t.JSONB: "U"}

_JSON_OVERLOADS = ", ".join(
    "(" + ", ".join(f"a{i}" for i in range(1, n + 1)) + ") AS NULL::VARCHAR" for n in range(4, 21, 2))

_DDL = """
CREATE TYPE regclass AS BIGINT; CREATE TYPE regtype AS BIGINT; CREATE TYPE regproc AS BIGINT;
CREATE TYPE regprocedure AS BIGINT; CREATE TYPE regnamespace AS BIGINT; CREATE TYPE regrole AS BIGINT;
CREATE TYPE name AS VARCHAR; CREATE TYPE xid AS BIGINT;
CREATE TABLE pg_namespace (oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR[]);
CREATE TABLE pg_class (oid BIGINT, relname VARCHAR, relnamespace BIGINT, reltype BIGINT, reloftype BIGINT,
  relowner BIGINT, relam BIGINT, relfilenode BIGINT, reltablespace BIGINT, relpages INTEGER, reltuples REAL,
  relallvisible INTEGER, reltoastrelid BIGINT, relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence VARCHAR,
  relkind VARCHAR, relnatts SMALLINT, relchecks SMALLINT, relhasrules BOOLEAN, relhastriggers BOOLEAN,
  relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN, relispopulated BOOLEAN,
  relreplident VARCHAR, relispartition BOOLEAN, relrewrite BIGINT, relfrozenxid BIGINT, relminmxid BIGINT,
  relacl VARCHAR[], reloptions VARCHAR[], relpartbound VARCHAR, relhasoids BOOLEAN);
CREATE TABLE pg_attribute (attrelid BIGINT, attname VARCHAR, atttypid BIGINT, attstattarget INTEGER,
  attlen SMALLINT, attnum SMALLINT, attndims INTEGER, attcacheoff INTEGER, atttypmod INTEGER, attbyval BOOLEAN,
  attalign VARCHAR, attstorage VARCHAR, attcompression VARCHAR, attnotnull BOOLEAN, atthasdef BOOLEAN,
  atthasmissing BOOLEAN, attidentity VARCHAR, attgenerated VARCHAR, attisdropped BOOLEAN, attislocal BOOLEAN,
  attinhcount INTEGER, attcollation BIGINT, attacl VARCHAR[], attoptions VARCHAR[], attfdwoptions VARCHAR[],
  attmissingval VARCHAR);
CREATE TABLE pg_type (oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT, typlen SMALLINT,
  typbyval BOOLEAN, typtype VARCHAR, typcategory VARCHAR, typispreferred BOOLEAN, typisdefined BOOLEAN,
  typdelim VARCHAR, typrelid BIGINT, typelem BIGINT, typarray BIGINT, typinput VARCHAR, typoutput VARCHAR,
  typreceive VARCHAR, typsend VARCHAR, typmodin VARCHAR, typmodout VARCHAR, typanalyze VARCHAR,
  typalign VARCHAR, typstorage VARCHAR, typnotnull BOOLEAN, typbasetype BIGINT, typtypmod INTEGER,
  typndims INTEGER, typcollation BIGINT, typdefaultbin VARCHAR, typdefault VARCHAR, typacl VARCHAR[],
  _format VARCHAR);
CREATE TABLE pg_database (oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER, datlocprovider VARCHAR,
  datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, datfrozenxid BIGINT, datminmxid BIGINT,
  dattablespace BIGINT, datcollate VARCHAR, datctype VARCHAR, daticulocale VARCHAR, datcollversion VARCHAR,
  datacl VARCHAR[]);
CREATE TABLE pg_roles (oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, rolcreaterole BOOLEAN,
  rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolreplication BOOLEAN, rolconnlimit INTEGER, rolpassword VARCHAR,
  rolvaliduntil TIMESTAMPTZ, rolbypassrls BOOLEAN, rolconfig VARCHAR[]);
CREATE TABLE pg_description (objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR);
CREATE TABLE pg_attrdef (oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR);
CREATE TABLE pg_index (indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT,
  indisunique BOOLEAN, indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN,
  indimmediate BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN,
  indislive BOOLEAN, indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[], indclass BIGINT[],
  indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR);
CREATE TABLE pg_constraint (oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR,
  condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, contypid BIGINT,
  conindid BIGINT, conparentid BIGINT, confrelid BIGINT, confupdtype VARCHAR, confdeltype VARCHAR,
  confmatchtype VARCHAR, conislocal BOOLEAN, coninhcount INTEGER, connoinherit BOOLEAN, conkey SMALLINT[],
  confkey SMALLINT[], conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[], conexclop BIGINT[],
  conbin VARCHAR);
CREATE TABLE pg_inherits (inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN);
CREATE TABLE pg_am (oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR);
CREATE TABLE pg_collation (oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT,
  collprovider VARCHAR, collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR,
  collctype VARCHAR);
CREATE TABLE pg_proc (oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT, prolang BIGINT,
  procost REAL, prorows REAL, provariadic BIGINT, prosupport VARCHAR, prokind VARCHAR, prosecdef BOOLEAN,
  proleakproof BOOLEAN, proisstrict BOOLEAN, proretset BOOLEAN, provolatile VARCHAR, proparallel VARCHAR,
  pronargs SMALLINT, pronargdefaults SMALLINT, prorettype BIGINT, proargtypes BIGINT[], proallargtypes BIGINT[],
  proargmodes VARCHAR[], proargnames VARCHAR[], prosrc VARCHAR, probin VARCHAR);
CREATE TABLE pg_trigger (oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT,
  tgtype SMALLINT, tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid BIGINT, tgconstraint BIGINT);
CREATE TABLE pg_rewrite (oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR,
  is_instead BOOLEAN);
CREATE TABLE pg_policy (oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN,
  polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR);
CREATE TABLE pg_statistic_ext (oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT,
  stxowner BIGINT, stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR);
CREATE TABLE pg_publication (oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN,
  pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN);
CREATE TABLE pg_publication_rel (oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]);
CREATE TABLE pg_publication_namespace (oid BIGINT, pnpubid BIGINT, pnnspid BIGINT);
CREATE TABLE pg_tablespace (oid BIGINT, spcname VARCHAR, spcowner BIGINT, spcacl VARCHAR[],
  spcoptions VARCHAR[]);
CREATE TABLE pg_extension (oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT,
  extrelocatable BOOLEAN, extversion VARCHAR);
CREATE TABLE pg_enum (oid BIGINT, enumtypid BIGINT, enumsortorder REAL, enumlabel VARCHAR);
CREATE TABLE pg_range (rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT);
CREATE TABLE pg_sequence (seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT, seqincrement BIGINT,
  seqmax BIGINT, seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN);
CREATE TABLE pg_foreign_table (ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]);
CREATE TABLE pg_partitioned_table (partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT);
CREATE TABLE pg_depend (classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, refobjid BIGINT,
  refobjsubid INTEGER, deptype VARCHAR);
CREATE TABLE pg_auth_members (oid BIGINT, roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN);
CREATE TABLE pg_foreign_server (oid BIGINT, srvname VARCHAR, srvowner BIGINT, srvfdw BIGINT, srvtype VARCHAR,
  srvversion VARCHAR, srvacl VARCHAR[], srvoptions VARCHAR[]);
CREATE TABLE pg_foreign_data_wrapper (oid BIGINT, fdwname VARCHAR, fdwowner BIGINT, fdwhandler BIGINT,
  fdwvalidator BIGINT, fdwacl VARCHAR[], fdwoptions VARCHAR[]);
CREATE TABLE pg_opclass (oid BIGINT, opcmethod BIGINT, opcname VARCHAR, opcnamespace BIGINT, opcdefault BOOLEAN);
CREATE TABLE pg_event_trigger (oid BIGINT, evtname VARCHAR);
CREATE TABLE pg_settings (name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR,
  context VARCHAR, vartype VARCHAR, source VARCHAR);
CREATE TABLE pg_stat_activity (datid BIGINT, datname VARCHAR, pid INTEGER, usename VARCHAR, state VARCHAR,
  query VARCHAR);
CREATE VIEW pg_user AS SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb,
  rolsuper AS usesuper, false AS userepl, false AS usebypassrls, NULL::VARCHAR AS passwd,
  NULL::TIMESTAMPTZ AS valuntil, NULL::VARCHAR[] AS useconfig FROM pg_roles;
CREATE VIEW pg_authid AS SELECT * FROM pg_roles;
CREATE VIEW pg_tables AS SELECT n.nspname AS schemaname, c.relname AS tablename, 'dpsql' AS tableowner,
  NULL::VARCHAR AS tablespace, false AS hasindexes, false AS hasrules, false AS hastriggers,
  false AS rowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r';
CREATE VIEW pg_views AS SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS viewname,
  NULL::VARCHAR AS viewowner, NULL::VARCHAR AS definition WHERE false;
CREATE VIEW pg_matviews AS SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS matviewname,
  NULL::VARCHAR AS matviewowner, NULL::VARCHAR AS tablespace, false AS hasindexes, false AS ispopulated,
  NULL::VARCHAR AS definition WHERE false;
CREATE TABLE information_schema_schemata (catalog_name VARCHAR, schema_name VARCHAR, schema_owner VARCHAR);
CREATE TABLE information_schema_tables (table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR,
  table_type VARCHAR, self_referencing_column_name VARCHAR, reference_generation VARCHAR,
  user_defined_type_catalog VARCHAR, user_defined_type_schema VARCHAR, user_defined_type_name VARCHAR,
  is_insertable_into VARCHAR, is_typed VARCHAR, commit_action VARCHAR, table_comment VARCHAR);
CREATE TABLE information_schema_columns (table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR,
  column_name VARCHAR, ordinal_position INTEGER, column_default VARCHAR, is_nullable VARCHAR,
  data_type VARCHAR, character_maximum_length INTEGER, character_octet_length INTEGER,
  numeric_precision INTEGER, numeric_precision_radix INTEGER, numeric_scale INTEGER,
  datetime_precision INTEGER, udt_catalog VARCHAR, udt_schema VARCHAR, udt_name VARCHAR,
  is_identity VARCHAR, is_generated VARCHAR, is_updatable VARCHAR, column_comment VARCHAR);
CREATE VIEW information_schema_views AS SELECT * FROM information_schema_tables WHERE false;
CREATE TABLE _dpsql_settings (name VARCHAR, setting VARCHAR);
CREATE MACRO pg_get_userbyid(r) AS 'dpsql';
CREATE MACRO pg_table_is_visible(r) AS true;
CREATE MACRO pg_type_is_visible(r) AS true;
CREATE MACRO pg_function_is_visible(r) AS true;
CREATE MACRO pg_encoding_to_char(e) AS 'UTF8';
CREATE MACRO format_type(ty, md) AS coalesce((SELECT _format FROM pg_type WHERE oid = ty), '???');
CREATE MACRO pg_get_expr(e, r) AS NULL::VARCHAR, (e, r, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_indexdef(i) AS NULL::VARCHAR, (i, c, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_constraintdef(c) AS NULL::VARCHAR, (c, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_viewdef(v) AS NULL::VARCHAR, (v, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_function_result(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_function_arguments(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_function_identity_arguments(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_triggerdef(f) AS NULL::VARCHAR, (f, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_ruledef(f) AS NULL::VARCHAR, (f, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_partkeydef(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_statisticsobjdef_columns(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_serial_sequence(tb, col) AS NULL::VARCHAR;
CREATE MACRO pg_relation_size(r) AS 0::BIGINT, (r, f) AS 0::BIGINT;
CREATE MACRO pg_total_relation_size(r) AS 0::BIGINT;
CREATE MACRO pg_table_size(r) AS 0::BIGINT;
CREATE MACRO pg_size_pretty(b) AS '0 bytes';
CREATE MACRO pg_backend_pid() AS 1;
CREATE MACRO pg_is_in_recovery() AS false;
CREATE MACRO txid_current() AS 1::BIGINT;
CREATE MACRO has_table_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO has_schema_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO has_database_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO has_column_privilege(a, b, c) AS true, (a, b, c, d) AS true;
CREATE MACRO quote_ident(s) AS '"' || replace(s, '"', '""') || '"';
CREATE MACRO obj_description(o) AS (SELECT first(description) FROM pg_description WHERE objoid = o
  AND objsubid = 0), (o, c) AS (SELECT first(description) FROM pg_description WHERE objoid = o
  AND objsubid = 0);
CREATE MACRO col_description(o, n) AS (SELECT first(description) FROM pg_description WHERE objoid = o
  AND objsubid = n);
CREATE MACRO shobj_description(o, c) AS NULL::VARCHAR;
CREATE MACRO current_setting(s) AS (SELECT first(setting) FROM _dpsql_settings WHERE name = lower(s)),
  (s, m) AS (SELECT first(setting) FROM _dpsql_settings WHERE name = lower(s));
CREATE MACRO array_lower(a, d) AS 1;
CREATE MACRO array_upper(a, d) AS len(a);
CREATE MACRO to_regtype(s) AS (SELECT first(oid) FROM pg_type WHERE typname = s);
CREATE MACRO to_regclass(s) AS (SELECT first(oid) FROM pg_class WHERE relname = s);
CREATE MACRO json_build_object(a1, a2) AS NULL::VARCHAR, {json_overloads};
CREATE MACRO pg_collation_is_visible(c) AS true;
CREATE MACRO pg_relation_is_publishable(c) AS false;
CREATE MACRO pg_postmaster_start_time() AS TIMESTAMPTZ '2000-01-01 00:00:00+00';
"""

#: Answers to SHOW and current_setting().
SETTINGS: dict[str, str] = {
    "server_version": SERVER_VERSION, "server_version_num": "150000", "server_encoding": "UTF8",
    "client_encoding": "UTF8", "datestyle": "ISO, MDY", "timezone": "UTC", "integer_datetimes": "on",
    "standard_conforming_strings": "on", "transaction_isolation": "read committed",
    "transaction isolation level": "read committed", "transaction_read_only": "on",
    "default_transaction_read_only": "on", "search_path": '"$user", main, public', "intervalstyle": "postgres",
    "is_superuser": "off", "application_name": "", "lc_collate": "C", "lc_ctype": "C", "max_identifier_length": "63",
    "max_index_keys": "32", "extra_float_digits": "3", "bytea_output": "hex", "time zone": "UTC",
    "default_transaction_isolation": "read committed", "statement_timeout": "0", "lock_timeout": "0",
    "max_connections": "100", "block_size": "8192", "ssl": "off",
}

_REWRITES = [
    (re.compile(r"OPERATOR\s*\(\s*(?:pg_catalog\s*\.\s*)?([^)\s]+)\s*\)", re.I), r"\1"),
    (re.compile(r"\s+COLLATE\s+(?:pg_catalog\s*\.\s*)?\"?(default|C|POSIX)\"?", re.I), ""),
    (re.compile(r"'([^']*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regclass\b", re.I), lambda m: _regclass(m.group(1))),
    (re.compile(r"CAST\s*\(\s*'([^']*)'\s+AS\s+(?:pg_catalog\s*\.\s*)?regclass\s*\)", re.I),
     lambda m: _regclass(m.group(1))),
    (re.compile(r"'([^']*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regtype\b", re.I),
     r"(SELECT oid FROM pg_type WHERE typname = '\1')"),
    (re.compile(r"'([^']*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regnamespace\b", re.I),
     r"(SELECT oid FROM pg_namespace WHERE nspname = '\1')"),
    (re.compile(r"\"?pg_catalog\"?\s*\.\s*", re.I), ""),
    (re.compile(r"\"?information_schema\"?\s*\.\s*\"?(\w+)\"?", re.I), r"information_schema_\1"),
    (re.compile(r"::\s*\"char\"", re.I), "::VARCHAR"),
    (re.compile(r"\bversion\s*\(\s*\)", re.I), "'" + VERSION_STRING + "'"),
]


_SYSTEM_OIDS = {"pg_class": 1259, "pg_attribute": 1249, "pg_proc": 1255, "pg_type": 1247, "pg_namespace": 2615,
                "pg_constraint": 2606, "pg_database": 1262, "pg_index": 2610, "pg_description": 2609,
                "pg_trigger": 2620, "pg_rewrite": 2618, "pg_am": 2601, "pg_attrdef": 2604}


def _regclass(name: str) -> str:
    bare = name.split(".")[-1].strip('"')
    if bare.lower() in _SYSTEM_OIDS:
        return str(_SYSTEM_OIDS[bare.lower()])
    return f"(SELECT first(oid) FROM pg_class WHERE relname = '{bare.replace(chr(39), chr(39) * 2)}')"


def rewrite(sql: str) -> str:
    """Adapt a PostgreSQL catalog query to the DuckDB-hosted catalog."""
    for pattern, repl in _REWRITES:
        sql = pattern.sub(repl, sql)
    return sql


def _name_parts(name: str) -> tuple[str, str]:
    if "." in name:
        schema, _, table = name.rpartition(".")
        return schema.split(".")[-1].strip('"'), table.strip('"')
    return "main", name


def _table_refs(sql: str) -> set[str] | None:
    """Lower-cased names of the relations a statement reads (None when it does not parse)."""
    try:
        tree = sqlglot.parse_one(rewrite(sql), read="postgres")
    except Exception:  # noqa: BLE001 - any parse failure means "not recognisably a catalog query"
        return None
    if not isinstance(tree, exp.Query):
        return None  # only queries may run on the catalog connection
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    names: set[str] = set()
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name and name not in ctes:
            names.add(name)
    return names


_CATALOG_NAME = re.compile(r"^(pg_\w+|information_schema_\w+)$")
#: DuckDB's own functions that no PostgreSQL client sends: introspection (settings, home and secret
#: directories, memory), file readers and unbounded row generators (issue 13, finding 4)
_DUCKDB_ONLY = re.compile(
    r"\b(duckdb_\w+|pragma_\w+|read_\w+|glob|sniff_csv|which_secret|query|query_table|range|parquet_\w+"
    r"|iceberg_\w+|delta_scan|sqlite_\w+|postgres_\w+|mysql_\w+|current_setting_raw|getenv)\s*\(", re.I)
CATALOG_SECONDS = 2.0  # work per catalog query before it is interrupted
CATALOG_ROWS = 100_000


class Catalog:
    """The metadata-only catalog of one client connection."""

    def __init__(self, tables: Iterable[Any], *, database: str = "dpsql", user: str = "analyst") -> None:
        self.tables = list(tables)
        self.user_tables = {_name_parts(ti.name)[1].lower() for ti in self.tables}
        self.database = database
        self.user = user
        self._con: duckdb.DuckDBPyConnection | None = None

    # ------------------------------------------------------------------ routing
    def handles(self, sql: str) -> bool:
        """True when ``sql`` is a query that reads only catalog relations (or none) and calls no dp_ aggregate.

        The catalog connection holds no data, so a wrong "True" can at worst return empty or made-up metadata;
        everything else goes to the guarded session."""
        bare = strip_comments(sql)
        if not re.match(r"\s*\(*\s*(SELECT|WITH|VALUES|TABLE)\b", bare, re.I):
            return False  # DDL, PRAGMA, ATTACH, COPY ... go to the guard, which refuses them
        code = " ".join(bare[a:b] for kind, a, b in _segments(bare) if not bare[a:b].startswith("'"))
        if re.search(r"\bdp_\w+\s*\(", code, re.I) or re.search(r"\bdpsql_\w+", code, re.I):
            return False
        if _DUCKDB_ONLY.search(code):
            return False  # DuckDB's own introspection, file readers and row generators: the guard refuses them
        refs = _table_refs(sql)
        if refs is None:
            words = {w.lower() for w in re.findall(r"[A-Za-z_][\w$]*", code)}
            return not (words & self.user_tables) and bool(re.search(r"\b(pg_|information_schema)", code, re.I))
        user_refs = {r for r in refs if not _CATALOG_NAME.match(r)}
        return not user_refs

    # ------------------------------------------------------------------ execution
    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is not None:
            return self._con
        con = duckdb.connect(":memory:", config={"autoload_known_extensions": "false",
                                                 "autoinstall_known_extensions": "false"})
        for stmt in _DDL.replace("{json_overloads}", _JSON_OVERLOADS).split(";\n"):
            if stmt.strip():
                con.execute(stmt)
        self._fill(con)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        self._con = con
        return con

    def _fill(self, con: duckdb.DuckDBPyConnection) -> None:
        con.executemany("INSERT INTO pg_namespace VALUES (?, ?, 10, NULL)", [[o, n] for n, o in NAMESPACE_OID.items()])
        con.executemany("INSERT INTO _dpsql_settings VALUES (?, ?)", [[k, v] for k, v in SETTINGS.items()])
        con.execute("INSERT INTO pg_settings SELECT name, setting, NULL, NULL, NULL, 'user', 'string', 'default' "
                    "FROM _dpsql_settings")
        con.execute("INSERT INTO pg_database VALUES (1, ?, 10, 6, 'c', false, true, -1, 0, 0, 1663, 'C', 'C', "
                    "NULL, NULL, NULL)", [self.database])
        con.execute("INSERT INTO pg_roles VALUES (10, ?, false, true, false, false, true, false, -1, NULL, NULL, "
                    "false, NULL)", [self.user])
        con.execute("INSERT INTO pg_am VALUES (2, 'heap', 'heap_tableam_handler', 't')")
        con.execute("INSERT INTO pg_tablespace VALUES (1663, 'pg_default', 10, NULL, NULL)")
        types = [[oid, name, 11, 10, size, size in (1, 2, 4, 8), "b", _TYPE_CATEGORY.get(oid, "S"), False, True,
                  ",", 0, 0, arr, None, None, None, None, None, None, None, "i", "p", False, 0, -1, 0, 0, None,
                  None, None, _FORMAT.get(oid, name)] for oid, (name, size, arr) in t.TYPE_INFO.items()]
        types += [[arr, "_" + name, 11, 10, -1, False, "b", "A", False, True, ",", 0, oid, 0, None, None, None,
                   None, None, None, None, "i", "x", False, 0, -1, 0, 0, None, None, None,
                   _FORMAT.get(oid, name) + "[]"] for oid, (name, _size, arr) in t.TYPE_INFO.items() if arr]
        con.executemany("INSERT INTO pg_type VALUES (" + ", ".join("?" * 32) + ")", types)
        for i, ti in enumerate(self.tables):
            schema, name = _name_parts(ti.name)
            ns = NAMESPACE_OID.get(schema, NAMESPACE_OID["main"])
            oid = FIRST_TABLE_OID + 2 * i
            cols = list(dict(ti.columns).items())
            con.execute("INSERT INTO pg_class VALUES (?, ?, ?, ?, 0, 10, 2, ?, 0, 0, -1, 0, 0, false, false, 'p', "
                        "'r', ?, 0, false, false, false, false, false, true, 'd', false, 0, 0, 0, NULL, NULL, "
                        "NULL, false)", [oid, name, ns, oid + 1, oid, len(cols)])
            kind = getattr(ti, "kind", "protected")
            unit = getattr(ti, "privacy_unit", None)
            comment = f"dpsql {kind} table" + (f" (privacy unit: {unit})" if unit else "")
            con.execute("INSERT INTO pg_description VALUES (?, 1259, 0, ?)", [oid, comment])
            con.execute("INSERT INTO information_schema_tables VALUES (?, ?, ?, 'BASE TABLE', NULL, NULL, NULL, "
                        "NULL, NULL, 'NO', 'NO', NULL, ?)", [self.database, schema, name, comment])
            for num, (col, duck_type) in enumerate(cols, start=1):
                toid = t.oid_for_duckdb(duck_type)
                typmod = -1
                m = re.match(r"(?:DECIMAL|NUMERIC)\((\d+),\s*(\d+)\)", str(duck_type).upper())
                if m:
                    typmod = ((int(m.group(1)) << 16) | int(m.group(2))) + 4
                con.execute("INSERT INTO pg_attribute VALUES (?, ?, ?, -1, ?, ?, 0, -1, ?, false, 'i', 'p', '', "
                            "false, false, false, '', '', false, true, 0, 0, NULL, NULL, NULL, NULL)",
                            [oid, col, toid, t.type_size(toid), num, typmod])
                con.execute("INSERT INTO information_schema_columns VALUES (?, ?, ?, ?, ?, NULL, 'YES', ?, NULL, "
                            "NULL, NULL, NULL, NULL, NULL, ?, 'pg_catalog', ?, 'NO', 'NEVER', 'NO', NULL)",
                            [self.database, schema, name, col, num, _FORMAT.get(toid, "text"), self.database,
                             t.TYPE_INFO.get(toid, ("text",))[0]])
        con.execute("INSERT INTO information_schema_schemata SELECT ?, nspname, 'dpsql' FROM pg_namespace",
                    [self.database])

    def execute(self, sql: str) -> pa.Table:
        """Run a catalog query; statements the emulation cannot answer give an empty result, not an error.

        At most CATALOG_SECONDS of work (then DuckDB is interrupted) and CATALOG_ROWS rows: the route is
        uncharged, so it must not be a free CPU or memory sink."""
        con = self._connection().cursor()
        timer = threading.Timer(CATALOG_SECONDS, con.interrupt)
        timer.start()
        try:
            return con.sql(rewrite(sql)).limit(CATALOG_ROWS).to_arrow_table()
        except duckdb.Error as e:
            log.info("catalog query answered empty (%s): %s", str(e).splitlines()[0][:300], sql)
            return pa.table({})
        finally:
            timer.cancel()
            con.close()

    def describe(self, sql: str) -> list[tuple[str, int]]:
        """(name, oid) of the columns a catalog query returns."""
        table = self.execute(sql)
        return [(f.name, t.oid_for_arrow(f.type)) for f in table.schema]
