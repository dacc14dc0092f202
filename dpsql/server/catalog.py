"""A PostgreSQL-looking catalog built only from dpsql metadata (``session.tables()``).

Clients probe ``pg_catalog`` and ``information_schema`` on connect and while browsing.  Those statements never reach
the protected database: they run on a private in-memory DuckDB that holds catalog tables filled from the session's
table list (names, column types, protected/public as table comments, privacy unit and declared-key columns as
column comments), the dp_* functions' signatures (:func:`dp_functions`) and the connection's open cursors, and
nothing else: no rows, no statistics.  External access is disabled and the configuration locked on that
connection, so it cannot read files either.

The route is uncharged, so it is closed: before anything runs, :func:`check` refuses (E010) a statement that reads
anything but the emulated catalog relations, calls a function outside :data:`CATALOG_FUNCTIONS` or does not parse.
Time, row and memory caps bound what an allowed statement can still cost.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

from ..errors import PrivacyError
from ..sqltext import segments, strip_comments
from . import types as t

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
  proargmodes VARCHAR[], proargnames VARCHAR[], prosrc VARCHAR, probin VARCHAR, proargdefaults VARCHAR,
  proconfig VARCHAR[], proacl VARCHAR[], proisagg BOOLEAN, proiswindow BOOLEAN);
CREATE TABLE pg_language (oid BIGINT, lanname VARCHAR, lanowner BIGINT, lanispl BOOLEAN, lanpltrusted BOOLEAN,
  lanplcallfoid BIGINT, laninline BIGINT, lanvalidator BIGINT, lanacl VARCHAR[]);
CREATE TABLE _dpsql_proc (oid BIGINT, result VARCHAR, arguments VARCHAR, identity VARCHAR, definition VARCHAR);
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
CREATE TABLE information_schema_routines (specific_catalog VARCHAR, specific_schema VARCHAR,
  specific_name VARCHAR, routine_catalog VARCHAR, routine_schema VARCHAR, routine_name VARCHAR,
  routine_type VARCHAR, data_type VARCHAR, type_udt_catalog VARCHAR, type_udt_schema VARCHAR,
  type_udt_name VARCHAR, routine_body VARCHAR, routine_definition VARCHAR, external_language VARCHAR,
  parameter_style VARCHAR, is_deterministic VARCHAR, sql_data_access VARCHAR, is_null_call VARCHAR,
  security_type VARCHAR);
CREATE TABLE information_schema_parameters (specific_catalog VARCHAR, specific_schema VARCHAR,
  specific_name VARCHAR, ordinal_position INTEGER, parameter_mode VARCHAR, is_result VARCHAR,
  as_locator VARCHAR, parameter_name VARCHAR, data_type VARCHAR, udt_catalog VARCHAR, udt_schema VARCHAR,
  udt_name VARCHAR, parameter_default VARCHAR);
CREATE TABLE pg_indexes (schemaname VARCHAR, tablename VARCHAR, indexname VARCHAR, tablespace VARCHAR,
  indexdef VARCHAR);
CREATE TABLE pg_cursors (name VARCHAR, statement VARCHAR, is_holdable BOOLEAN, is_binary BOOLEAN,
  is_scrollable BOOLEAN, creation_time TIMESTAMPTZ);
CREATE TABLE _dpsql_settings (name VARCHAR, setting VARCHAR);
CREATE MACRO pg_get_userbyid(r) AS 'dpsql';
CREATE MACRO pg_table_is_visible(r) AS true;
CREATE MACRO pg_type_is_visible(r) AS true;
CREATE MACRO pg_function_is_visible(r) AS true;
CREATE MACRO pg_encoding_to_char(e) AS 'UTF8';
CREATE MACRO format_type(ty, md) AS coalesce((SELECT _format FROM pg_type WHERE oid = ty), '???');
CREATE MACRO pg_get_expr(e, r) AS e::VARCHAR, (e, r, p) AS e::VARCHAR;
CREATE MACRO pg_get_indexdef(i) AS NULL::VARCHAR, (i, c, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_constraintdef(c) AS NULL::VARCHAR, (c, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_viewdef(v) AS NULL::VARCHAR, (v, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_function_result(f) AS (SELECT first(result) FROM _dpsql_proc WHERE oid = f);
CREATE MACRO pg_get_function_arguments(f) AS (SELECT first(arguments) FROM _dpsql_proc WHERE oid = f);
CREATE MACRO pg_get_function_identity_arguments(f) AS (SELECT first(identity) FROM _dpsql_proc WHERE oid = f);
CREATE MACRO pg_get_functiondef(f) AS (SELECT first(definition) FROM _dpsql_proc WHERE oid = f);
CREATE MACRO _regtypes(a) AS (SELECT list(coalesce(t._format, '???') ORDER BY u.i) FROM (SELECT unnest(a) AS o,
  generate_subscripts(a, 1) AS i) u LEFT JOIN pg_type t ON t.oid = u.o);
CREATE MACRO current_database() AS (SELECT first(datname) FROM pg_database);
CREATE MACRO current_catalog() AS (SELECT first(datname) FROM pg_database);
CREATE MACRO current_user() AS (SELECT first(rolname) FROM pg_roles);
CREATE MACRO session_user() AS (SELECT first(rolname) FROM pg_roles);
CREATE MACRO current_role() AS (SELECT first(rolname) FROM pg_roles);
CREATE MACRO current_schemas(implicit) AS CASE WHEN implicit THEN ['pg_catalog', 'main', 'public']
  ELSE ['main', 'public'] END;
CREATE MACRO pg_get_triggerdef(f) AS NULL::VARCHAR, (f, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_ruledef(f) AS NULL::VARCHAR, (f, p) AS NULL::VARCHAR;
CREATE MACRO pg_get_partkeydef(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_statisticsobjdef_columns(f) AS NULL::VARCHAR;
CREATE MACRO pg_get_serial_sequence(tb, col) AS NULL::VARCHAR;
CREATE MACRO pg_relation_size(r) AS 0::BIGINT, (r, f) AS 0::BIGINT;
CREATE MACRO pg_total_relation_size(r) AS 0::BIGINT;
CREATE MACRO pg_table_size(r) AS 0::BIGINT;
CREATE MACRO pg_database_size(d) AS 0::BIGINT;
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

_NUMERIC_ARRAY_TYPES = {"int2", "int4", "int8", "smallint", "integer", "int", "bigint", "oid", "float4", "float8",
                        "real", "numeric", "regtype", "regclass", "regproc", "regnamespace", "double precision"}
_ARRAY_TEXT = r"'\{((?:[^'{}]|'')*)\}'"
_ARRAY_TYPE = r"\s*::\s*(?:pg_catalog\s*\.\s*)?(\"?[a-z]\w*\"?(?:\s+precision|\s+varying)?)\s*\[\s*\]"


def _array_items(body: str) -> list[str | None] | None:
    """The elements of a one-dimensional PostgreSQL array literal's body (``r,p,"a b",NULL``); None when it is
    not one (nested, or a stray quote)."""
    items: list[str | None] = []
    if not body.strip():
        return items
    i, n = 0, len(body)
    while True:
        while i < n and body[i].isspace():
            i += 1
        if i < n and body[i] == '"':
            j, chars = i + 1, []
            while j < n and body[j] != '"':
                if body[j] == "\\" and j + 1 < n:
                    j += 1
                chars.append(body[j])
                j += 1
            if j >= n:
                return None
            items.append("".join(chars))
            i = j + 1
            while i < n and body[i].isspace():
                i += 1
        else:
            j = i
            while j < n and body[j] not in ',"{}':
                j += 1
            if j < n and body[j] != ",":
                return None
            bare = body[i:j].strip()
            items.append(None if bare.upper() == "NULL" else bare)
            i = j
        if i >= n:
            return items
        if body[i] != ",":
            return None
        i += 1


def _pg_array(body: str, elem_type: str | None) -> str | None:
    """A PostgreSQL array literal's body as a DuckDB list literal (numbers for a numeric ``elem_type``, else
    strings); None when it is not one, and the text is then left as it is."""
    items = _array_items(body.replace("''", "'"))
    if items is None:
        return None
    numeric = (elem_type or "").strip('"').lower() in _NUMERIC_ARRAY_TYPES
    out = []
    for item in items:
        if item is None:
            out.append("NULL")
        elif numeric and re.fullmatch(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?", item):
            out.append(item)
        elif numeric:
            return None
        else:
            out.append("'" + item.replace("'", "''") + "'")
    return "[" + ", ".join(out) + "]"


def _array_cast(m: re.Match[str]) -> str:
    return _pg_array(m.group(1), m.group(2)) or m.group(0)


def _array_operand(m: re.Match[str]) -> str:
    listed = _pg_array(m.group(2), None)
    return f"{m.group(1)}({listed})" if listed else m.group(0)


_REWRITES = [
    # PostgreSQL array literals, which DuckDB cannot cast from text: '{r,p}'::"char"[] and = ANY('{r,p,f}')
    # (pgcli's \dt, \dv, \d and its completion lists) become list literals ['r', 'p', 'f']
    (re.compile(_ARRAY_TEXT + _ARRAY_TYPE, re.I), _array_cast),
    (re.compile(r"\b(ANY|ALL|SOME)\s*\(\s*" + _ARRAY_TEXT + r"\s*\)", re.I), _array_operand),
    # x::regtype::text is the type's name (pgcli's column and function types), x::regtype[] a list of names
    (re.compile(r"([\w.\"]+)\s*::\s*(?:pg_catalog\s*\.\s*)?regtype\s*::\s*(?:pg_catalog\s*\.\s*)?"
                r"(?:text|varchar|name)\b(?!\s*\[)", re.I), r"format_type(\1, NULL)"),
    (re.compile(r"([\w.\"]+)\s*::\s*(?:pg_catalog\s*\.\s*)?regtype\s*\[\s*\]", re.I), r"_regtypes(\1)"),
    (re.compile(r"OPERATOR\s*\(\s*(?:pg_catalog\s*\.\s*)?([^)\s]+)\s*\)", re.I), r"\1"),
    (re.compile(r"\s+COLLATE\s+(?:pg_catalog\s*\.\s*)?\"?(default|C|POSIX)\"?", re.I), ""),
    (re.compile(r"'([^']*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regclass\b", re.I), lambda m: _regclass(m.group(1))),
    (re.compile(r"CAST\s*\(\s*'([^']*)'\s+AS\s+(?:pg_catalog\s*\.\s*)?regclass\s*\)", re.I),
     lambda m: _regclass(m.group(1))),
    (re.compile(r"'([^']*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regtype\b", re.I),
     r"(SELECT oid FROM pg_type WHERE typname = '\1')"),
    # 'dp_mean'::regproc, 'dp_mean(double precision)'::regprocedure (psql's and pgcli's \\sf)
    (re.compile(r"'([^'(]*)(?:\([^']*\))?'\s*::\s*(?:pg_catalog\s*\.\s*)?regproc(?:edure)?\b", re.I),
     lambda m: "(SELECT first(oid) FROM pg_proc WHERE proname = '"
               + m.group(1).split(".")[-1].strip().strip('"').replace("'", "''") + "')"),
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


def table_comment(ti: Any) -> str:
    """The comment (``obj_description``) that tells a tool whether a table is protected and how to query it."""
    if getattr(ti, "kind", "protected") == "public":
        return "dpsql: public table"
    unit = getattr(ti, "privacy_unit", None)
    return f"dpsql: protected, {f'privacy unit {unit}' if unit else 'each row is a privacy unit'}; use dp_* aggregates"


def column_comments(ti: Any) -> dict[str, str]:
    """Column comments (``col_description``): the privacy unit and the columns with declared public keys."""
    out = {col: f"dpsql: public keys declared ({len(keys)} values); GROUP BY it to get every key"
           for col, keys in (getattr(ti, "public_keys", None) or {}).items()}
    unit = getattr(ti, "privacy_unit", None)
    if unit:
        out[unit] = "dpsql: privacy unit"
    return out


ANYELEMENT, RECORD, TRIGGER, VOID = 2283, 2249, 2279, 2278
#: pseudo-types clients name in catalog queries (pgcli: ``prorettype::regtype != 'trigger'::regtype``)
PSEUDO_TYPES = {ANYELEMENT: "anyelement", RECORD: "record", TRIGGER: "trigger", VOID: "void", 2276: "any"}
_FORMAT.update(PSEUDO_TYPES)
FIRST_PROC_OID = 90000  # pg_proc oids of the dp_* functions (tables take FIRST_TABLE_OID + 2i)
_PROC_ARG_TYPES = {"DOUBLE": t.FLOAT8, "VARCHAR": t.TEXT}  # a dp_* parameter's type (dpsql.surface) as pg_proc's


@dataclasses.dataclass(frozen=True)
class DpFunction:
    """One dp_* aggregate as pg_proc and information_schema.routines list it."""

    name: str
    args: tuple[tuple[str, int, str | None], ...]  # (name, type oid, default expression or None)
    result: int
    description: str
    source: str = ""  # its macro in sql/macros.sql (``pg_get_functiondef``: psql's and pgcli's \\sf)

    def definition(self) -> str:
        """``pg_get_functiondef``: the description, the PostgreSQL-style signature and the DuckDB macro."""
        head = f"-- {self.description}\n-- public.{self.name}({self.arguments()}) RETURNS {_FORMAT[self.result]}\n"
        return head + self.source

    def arguments(self, defaults: bool = True) -> str:
        """``pg_get_function_arguments`` (with defaults) or ``..._identity_arguments`` (without)."""
        return ", ".join(f"{n} {_FORMAT[o]}" + (f" DEFAULT {d}" if d is not None and defaults else "")
                         for n, o, d in self.args)


@functools.lru_cache(maxsize=1)
def dp_functions() -> tuple[DpFunction, ...]:
    """The dp_* aggregates with their arguments, types and defaults, from :mod:`dpsql.surface` (the one
    declaration, which sql/macros.sql is generated from); ``source`` is each one's macro in sql/macros.sql."""
    from ..sqltext import read_sql
    from ..surface import CI_SUFFIX, DEFAULT_LEVEL, FUNCTIONS, PARAMETERS, VALUE, plain_function

    try:
        text = read_sql("macros.sql")
    except OSError:
        text = ""
    sources = {m.group(1).lower(): m.group(0).strip() for m in
               re.finditer(r"^CREATE[^;]*?MACRO\s+(dp_\w+)\s*\(.*?;$", text, re.I | re.M | re.S)}
    out = []
    for name in sorted(FUNCTIONS):
        fn = FUNCTIONS[name]
        plain = plain_function(name)
        args = []
        for arg in fn.positional:  # dp_count counts a value of any type; the rest read numbers, p is a number
            args.append((arg, ANYELEMENT if arg == VALUE and fn.value == "ANY" else t.FLOAT8, None))
        for arg in fn.named:
            oid, default = _PROC_ARG_TYPES[PARAMETERS[arg].sql_type], PARAMETERS[arg].default
            args.append((arg, oid, f"NULL::{_FORMAT[oid]}" if default is None else repr(default)))
        what = {"dp_count_star": "row count"}.get(plain, plain.removeprefix("dp_").replace("_", " "))
        if name.endswith(CI_SUFFIX):
            desc = (f"dpsql: differentially private {what} with its {DEFAULT_LEVEL:.0%} interval (level :=), "
                    "value, lo and hi as JSON text; charged like " + plain)
        else:
            desc = f"dpsql: differentially private {what}; charged to your budget (epsilon := ...)"
        out.append(DpFunction(name, tuple(args), t.TEXT if name.endswith(CI_SUFFIX) else t.FLOAT8, desc,
                              sources.get(name, "")))
    return tuple(out)


#: The relations the catalog route may read: the ones _DDL creates (pg_catalog names unqualified,
#: information_schema.x as information_schema_x after rewrite()), minus dpsql's own settings table.
CATALOG_RELATIONS: frozenset[str] = frozenset(
    name.lower() for name in re.findall(r"CREATE (?:TABLE|VIEW) (\w+)", _DDL) if not name.startswith("_"))

#: Functions a statement on the catalog route may call, in PostgreSQL spelling (_SPELLING maps sqlglot's names).
#: Built from what clients send while browsing: tests/clients (psql, psycopg, pg8000, pgJDBC, SQLAlchemy, DuckDB
#: CLI), tests/server, psql's backslash commands, pgcli/pgspecial, harlequin-postgres and a log of BI tools' catalog
#: queries (external material, not in this repository).  Every one is bounded in its output by its input;
#: nothing that makes rows or long values from a number (range, repeat, lpad, format, list_resize), reads files
#: or shows DuckDB's own state (duckdb_*, pragma_*, getenv, current_setting_raw).
CATALOG_FUNCTIONS: frozenset[str] = frozenset({
    # PostgreSQL functions emulated by the macros in _DDL (psql, pgcli, pgJDBC, SQLAlchemy, harlequin)
    "pg_get_userbyid", "pg_table_is_visible", "pg_type_is_visible", "pg_function_is_visible",
    "pg_collation_is_visible", "pg_encoding_to_char", "format_type", "pg_get_expr", "pg_get_indexdef",
    "pg_get_constraintdef", "pg_get_viewdef", "pg_get_function_result", "pg_get_function_arguments",
    "pg_get_function_identity_arguments", "pg_get_triggerdef", "pg_get_ruledef", "pg_get_partkeydef",
    "pg_get_functiondef",  # psql's and pgcli's \\sf: the dp_* function's signature and macro
    "pg_get_statisticsobjdef_columns", "pg_get_serial_sequence", "pg_relation_size", "pg_total_relation_size",
    "pg_table_size", "pg_database_size", "pg_size_pretty", "pg_backend_pid", "pg_is_in_recovery", "txid_current",
    "has_table_privilege", "has_schema_privilege", "has_database_privilege", "has_column_privilege",
    "quote_ident", "obj_description", "col_description", "shobj_description", "current_setting", "array_lower",
    "array_upper", "to_regtype", "to_regclass", "json_build_object", "pg_relation_is_publishable",
    "pg_postmaster_start_time",
    # dpsql's own helper, introduced by rewrite() for pgcli's x::regtype[] (a list of type names)
    "_regtypes",
    # session information: SQLAlchemy and psql (current_schema, current_database), pgcli (current_schemas)
    "current_schema", "current_schemas", "current_database", "current_catalog", "current_user", "session_user",
    # scalar functions in client catalog queries: pgJDBC (nullif), psql \\l \\dp \\du (array_to_string),
    # pgcli (coalesce, lower, array_remove), pgspecial (trim, substring), harlequin (length)
    "coalesce", "nullif", "lower", "upper", "length", "trim", "substring", "array_to_string", "array_remove",
    "array_length", "cardinality",
    # aggregates and window functions: SQLAlchemy (array_agg, bool_and, min), pgJDBC (row_number), psql
    # (string_agg, count), rewrite() (first)
    "count", "min", "max", "array_agg", "string_agg", "bool_and", "bool_or", "first", "row_number",
    # set-returning, bounded by the list they unpack: SQLAlchemy (unnest, generate_subscripts), pgcli (unnest),
    # psql \\d (generate_series over an array's subscripts; its bounds are checked by _bounded_series)
    "unnest", "generate_subscripts", "generate_series",
})

#: sqlglot's names for functions it parses into typed nodes, where they differ from PostgreSQL's
_SPELLING = {"group_concat": "string_agg", "logical_and": "bool_and", "logical_or": "bool_or", "explode": "unnest",
             "exploding_generate_series": "generate_series", "array_size": "array_length"}

#: Syntax a catalog statement may use besides relations and function calls; any other node is refused.
_SYNTAX: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery, exp.From, exp.Join, exp.Lateral, exp.Where,
    exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Fetch, exp.Distinct, exp.With,
    exp.CTE, exp.Values, exp.Tuple, exp.Table, exp.TableAlias, exp.Alias, exp.Column, exp.Identifier, exp.Star,
    exp.Literal, exp.Boolean, exp.Null, exp.ByteString, exp.RawString, exp.Var, exp.Paren, exp.Cast, exp.DataType,
    exp.DataTypeParam, exp.Collate, exp.Case, exp.If, exp.And, exp.Or, exp.Not, exp.Neg, exp.EQ, exp.NEQ, exp.GT,
    exp.GTE, exp.LT, exp.LTE, exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ, exp.In, exp.Between, exp.Like, exp.ILike,
    exp.Escape, exp.RegexpLike, exp.RegexpILike, exp.SimilarTo, exp.Any, exp.All, exp.Exists, exp.Add, exp.Sub,
    exp.Mul, exp.Div, exp.Mod, exp.DPipe, exp.Array, exp.Bracket, exp.Slice, exp.Window, exp.WindowSpec,
    exp.Filter, exp.Interval,
)
CATALOG_SECONDS = 2.0  # work per catalog query before it is interrupted
CATALOG_ROWS = 100_000  # rows per catalog answer
CATALOG_MEMORY = "64MB"  # memory of the catalog's DuckDB (one thread)
CATALOG_MAX_SQL = 32_768  # characters of a catalog statement (the longest a client sent: about 3,200)
CATALOG_VALUES = 1_000  # rows of a VALUES list
CATALOG_SERIES = 1_000  # largest literal bound of generate_series()


class CatalogLimit(Exception):
    """A catalog query stopped by a limit (time or memory): reported as an error with this SQLSTATE."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate, self.message = sqlstate, message


def _refuse(reason: str) -> PrivacyError:
    return PrivacyError("DPSQL-E010", f"the catalog route only answers catalog queries: {reason}")


@functools.lru_cache(maxsize=256)
def _parse(sql: str) -> exp.Expression | None:
    """The sqlglot tree of a rewritten statement, read as PostgreSQL or else as DuckDB (which runs it); None when
    neither parses.  Shared between callers, never modified."""
    for dialect in ("postgres", "duckdb"):
        try:
            return sqlglot.parse_one(sql, read=dialect)
        except Exception:  # noqa: BLE001, PERF203 - any parse failure means "not recognisably a catalog query"
            continue
    return None


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    name = node.sql_name().lower()
    return _SPELLING.get(name, name)


def _bounded_series(node: exp.Func) -> bool:
    """generate_series(a, b[, step]) whose bounds are small integer literals or the size of a column's list
    (psql's ``generate_series(0, array_upper(pr.prattrs::int2[], 1))``)."""
    def bare(e: exp.Expression | None) -> exp.Expression | None:
        while isinstance(e, exp.Paren | exp.Cast | exp.Neg):
            e = e.this
        return e

    def bound(e: exp.Expression | None) -> bool:
        e = bare(e)
        if isinstance(e, exp.Literal) and not e.is_string:
            return e.is_int and abs(int(e.this)) <= CATALOG_SERIES
        if not (isinstance(e, exp.Func) and _function_name(e) in ("array_upper", "array_length", "cardinality")):
            return False
        listed = e.expressions[0] if isinstance(e, exp.Anonymous) and e.expressions else e.this
        return isinstance(bare(listed), exp.Column)

    step = node.args.get("step")
    return bound(node.args.get("start")) and bound(node.args.get("end")) and (step is None or bound(step))


def check(sql: str, *, existing: frozenset[str]) -> exp.Expression:
    """The parse tree of a statement the catalog route may run; PrivacyError E010 for anything else.

    Allowed: one query over CATALOG_RELATIONS, its own CTEs (not named like a relation in ``existing``, the
    relations DuckDB itself would find), subqueries and short VALUES lists, calling only CATALOG_FUNCTIONS."""
    if len(sql) > CATALOG_MAX_SQL:
        raise _refuse(f"the statement is longer than {CATALOG_MAX_SQL} characters")
    tree = _parse(rewrite(sql))
    if tree is None:
        raise _refuse("the statement could not be parsed")
    if not isinstance(tree, exp.Query | exp.Values):
        raise _refuse("only queries are answered")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in tree.walk():
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = node.name.lower()
            if node.args.get("db") is not None or node.args.get("catalog") is not None:
                raise _refuse(f"qualified relation {node.sql(dialect='postgres')}")
            if name not in CATALOG_RELATIONS and (name not in ctes or name in existing):
                raise _refuse(f"relation {name} is not in the emulated catalog")
        elif isinstance(node, exp.With) and node.args.get("recursive"):
            raise _refuse("recursive CTEs are not allowed")
        elif isinstance(node, exp.Values) and len(node.expressions) > CATALOG_VALUES:
            raise _refuse(f"VALUES lists are limited to {CATALOG_VALUES} rows")
        if isinstance(node, _SYNTAX):
            continue
        if not isinstance(node, exp.Func):
            raise _refuse(f"{node.key} is not allowed")
        name = _function_name(node)
        where = "table function" if isinstance(node.parent, exp.Table) else "function"
        if name not in CATALOG_FUNCTIONS:
            raise _refuse(f"{where} {name}() is not allowed")
        if name == "generate_series" and not _bounded_series(node):
            raise _refuse(f"generate_series() bounds must be literals up to {CATALOG_SERIES} or an array's size")
    return tree


def _table_refs(sql: str) -> set[str] | None:
    """Lower-cased names of the named relations a statement reads (None when it does not parse)."""
    tree = _parse(rewrite(sql)) if len(sql) <= CATALOG_MAX_SQL else None
    if tree is None:
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return {name for table in tree.find_all(exp.Table) if isinstance(table.this, exp.Identifier)
            and (name := table.name.lower()) not in ctes}


_CATALOG_NAME = re.compile(r"^(pg_\w+|information_schema_\w+)$")


class Catalog:
    """The metadata-only catalog of one client connection."""

    def __init__(self, tables: Iterable[Any], *, database: str = "dpsql", user: str = "analyst") -> None:
        self.tables = list(tables)
        self.user_tables = {_name_parts(ti.name)[1].lower() for ti in self.tables}
        self.database = database
        self.user = user
        self._con: duckdb.DuckDBPyConnection | None = None
        self._existing: frozenset[str] = frozenset()
        self._schemas: dict[str, pa.Schema] = {}

    # ------------------------------------------------------------------ routing
    def handles(self, sql: str) -> bool:
        """True for the catalog route: a query that names only pg_catalog and information_schema relations (or
        none) and calls no dp_ function.

        Whether it may run is :func:`check`'s decision (``execute`` refuses the rest); everything else goes to
        the guarded session."""
        bare = strip_comments(sql)
        if not re.match(r"\s*\(*\s*(SELECT|WITH|VALUES|TABLE)\b", bare, re.I):
            return False  # DDL, PRAGMA, ATTACH, COPY ... go to the guard, which refuses them
        code = " ".join(bare[a:b] for kind, a, b in segments(bare) if not bare[a:b].startswith("'"))
        if re.search(r"\bdp_\w+\s*\(", code, re.I) or re.search(r"\bdpsql_\w+", code, re.I):
            return False
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
                                                 "autoinstall_known_extensions": "false",
                                                 "python_enable_replacements": "false",
                                                 "memory_limit": CATALOG_MEMORY, "threads": "1"})
        for stmt in _DDL.replace("{json_overloads}", _JSON_OVERLOADS).split(";\n"):
            if stmt.strip():
                con.execute(stmt)
        self._fill(con)
        # every relation DuckDB resolves here (its own duckdb_*, pg_* and information_schema views too): a CTE
        # may not take one of these names, or a reference outside the CTE's scope would read the real one
        self._existing = frozenset(r[0].lower() for r in con.execute(
            "SELECT view_name FROM duckdb_views() UNION SELECT table_name FROM duckdb_tables()").fetchall())
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
        types += [[oid, name, 11, 10, 4 if oid != 2276 else -1, True, "p", "P", False, True, ",", 0, 0, 0, None,
                   None, None, None, None, None, None, "i", "p", False, 0, -1, 0, 0, None, None, None, name]
                  for oid, name in PSEUDO_TYPES.items()]
        con.executemany("INSERT INTO pg_type VALUES (" + ", ".join("?" * 32) + ")", types)
        con.executemany("INSERT INTO pg_language (oid, lanname, lanowner, lanispl, lanpltrusted) VALUES "
                        "(?, ?, 10, false, ?)", [[12, "internal", False], [13, "c", False], [14, "sql", True]])
        self._fill_functions(con)
        for i, ti in enumerate(self.tables):
            schema, name = _name_parts(ti.name)
            ns = NAMESPACE_OID.get(schema, NAMESPACE_OID["main"])
            oid = FIRST_TABLE_OID + 2 * i
            cols = list(dict(ti.columns).items())
            con.execute("INSERT INTO pg_class VALUES (?, ?, ?, ?, 0, 10, 2, ?, 0, 0, -1, 0, 0, false, false, 'p', "
                        "'r', ?, 0, false, false, false, false, false, true, 'd', false, 0, 0, 0, NULL, NULL, "
                        "NULL, false)", [oid, name, ns, oid + 1, oid, len(cols)])
            comment, col_comments = table_comment(ti), column_comments(ti)
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
                            "NULL, NULL, NULL, NULL, NULL, ?, 'pg_catalog', ?, 'NO', 'NEVER', 'NO', ?)",
                            [self.database, schema, name, col, num, _FORMAT.get(toid, "text"), self.database,
                             t.TYPE_INFO.get(toid, ("text",))[0], col_comments.get(col)])
                if col in col_comments:
                    con.execute("INSERT INTO pg_description VALUES (?, 1259, ?, ?)", [oid, num, col_comments[col]])
        con.execute("INSERT INTO information_schema_schemata SELECT ?, nspname, 'dpsql' FROM pg_namespace",
                    [self.database])

    def _fill_functions(self, con: duckdb.DuckDBPyConnection) -> None:
        """pg_proc, information_schema.routines/parameters and descriptions of the dp_* aggregates, in schema
        public, where PostgreSQL keeps user functions (pgcli suggests unqualified functions of public only)."""
        ns = NAMESPACE_OID["public"]
        for i, fn in enumerate(dp_functions()):
            oid = FIRST_PROC_OID + i
            defaults = [d for _, _, d in fn.args if d is not None]
            con.execute("INSERT INTO pg_proc (oid, proname, pronamespace, proowner, prolang, procost, prorows, "
                        "provariadic, prosupport, prokind, prosecdef, proleakproof, proisstrict, proretset, "
                        "provolatile, proparallel, pronargs, pronargdefaults, prorettype, proargtypes, proargnames, "
                        "prosrc, proargdefaults, proisagg, proiswindow) VALUES (?, ?, ?, 10, 14, 1, 0, 0, '-', 'a', "
                        "false, false, false, false, 'v', 'u', ?, ?, ?, ?, ?, 'aggregate_dummy', ?, true, false)",
                        [oid, fn.name, ns, len(fn.args), len(defaults), fn.result, [o for _, o, _ in fn.args],
                         [n for n, _, _ in fn.args], ", ".join(defaults) or None])
            con.execute("INSERT INTO _dpsql_proc VALUES (?, ?, ?, ?, ?)",
                        [oid, _FORMAT[fn.result], fn.arguments(), fn.arguments(defaults=False), fn.definition()])
            con.execute("INSERT INTO pg_description VALUES (?, 1255, 0, ?)", [oid, fn.description])
            specific = f"{fn.name}_{oid}"
            # routine_type is NULL for an aggregate, as in PostgreSQL (harlequin labels those 'agg')
            con.execute("INSERT INTO information_schema_routines VALUES (?, 'public', ?, ?, 'public', ?, NULL, ?, ?, "
                        "'pg_catalog', ?, 'EXTERNAL', NULL, 'SQL', 'GENERAL', 'NO', 'READS', 'YES', 'INVOKER')",
                        [self.database, specific, self.database, fn.name, _FORMAT[fn.result], self.database,
                         t.TYPE_INFO.get(fn.result, ("text",))[0]])
            for pos, (arg, aoid, default) in enumerate(fn.args, start=1):
                con.execute("INSERT INTO information_schema_parameters VALUES (?, 'public', ?, ?, 'IN', 'NO', 'NO', ?, "
                            "?, ?, 'pg_catalog', ?, ?)",
                            [self.database, specific, pos, arg, _FORMAT[aoid], self.database,
                             t.TYPE_INFO.get(aoid, (PSEUDO_TYPES.get(aoid, "text"),))[0], default])

    def execute(self, sql: str) -> pa.Table:
        """Run a catalog query if :func:`check` allows it (else PrivacyError E010).

        A statement the emulation cannot answer (DuckDB fails to bind or run it: a column, function or syntax
        the emulation lacks) gets a typed empty result with the columns it asks for (:meth:`_empty_answer`):
        it asks about things dpsql does not have, and clients such as pgcli iterate over whatever comes back.
        A statement stopped by a limit is an error (CatalogLimit), not an empty answer, so that a tool never
        mistakes a cut-off for "no tables".  At most CATALOG_SECONDS of work (then DuckDB is interrupted),
        CATALOG_ROWS rows and CATALOG_MEMORY: the route is uncharged, so even an allowed statement must not be
        a free CPU or memory sink."""
        base = self._connection()
        try:
            tree = check(sql, existing=self._existing)
        except PrivacyError as e:
            log.info("catalog route refused (%s): %s", e.message, sql[:2000])
            raise
        con = base.cursor()
        timer = threading.Timer(CATALOG_SECONDS, con.interrupt)
        timer.start()
        try:
            return con.sql(rewrite(sql)).limit(CATALOG_ROWS).to_arrow_table()
        except duckdb.InterruptException:
            log.info("catalog query stopped after %s s: %s", CATALOG_SECONDS, sql[:2000])
            raise CatalogLimit("57014", f"catalog query stopped: it ran longer than {CATALOG_SECONDS:g} s") from None
        except duckdb.OutOfMemoryException:
            log.info("catalog query stopped at the memory limit: %s", sql[:2000])
            raise CatalogLimit("53200", f"catalog query stopped: it needed more than {CATALOG_MEMORY}") from None
        except duckdb.Error as e:
            log.info("catalog query answered empty (%s): %s", str(e).splitlines()[0][:300], sql)
            return self._empty_answer(tree)
        finally:
            timer.cancel()
            con.close()

    def describe(self, sql: str) -> list[tuple[str, int]]:
        """(name, oid) of the columns a catalog query returns."""
        table = self.execute(sql)
        return [(f.name, t.oid_for_arrow(f.type)) for f in table.schema]

    def set_cursors(self, cursors: Iterable[tuple[str, str, bool, bool, bool]]) -> None:
        """The connection's open cursors as pg_cursors lists them: (name, statement, holdable, binary,
        scrollable)."""
        con = self._connection()
        con.execute("DELETE FROM pg_cursors")
        rows = [[*c, None] for c in cursors]
        if rows:
            con.executemany("INSERT INTO pg_cursors VALUES (?, ?, ?, ?, ?, ?)", rows)

    # ------------------------------------------------------------------ typed empty answers
    def _relation_schema(self, name: str) -> pa.Schema | None:
        if name not in CATALOG_RELATIONS:
            return None
        schema = self._schemas.get(name)
        if schema is None:
            schema = self._schemas[name] = self._connection().sql(f"SELECT * FROM {name} LIMIT 0").to_arrow_table(
                ).schema
        return schema

    def _empty_answer(self, tree: exp.Expression) -> pa.Table:
        """A zero-row table with the columns a failed catalog query asks for: names from its select list,
        types from the emulated relation a column comes from, a cast, a literal or a predicate (text
        otherwise); ``*`` expands to the columns of the catalog relations it reads."""
        select = tree
        while isinstance(select, exp.SetOperation | exp.Subquery):
            select = select.this
        if not isinstance(select, exp.Select):
            return pa.table({})
        sources: dict[str, pa.Schema] = {}
        for table in select.find_all(exp.Table):
            if table.parent_select is select and (schema := self._relation_schema(table.name.lower())) is not None:
                sources[table.alias_or_name.lower()] = schema
        fields: list[pa.Field] = []
        for e in select.expressions:
            star = isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
            if star:
                qual = e.table.lower() if isinstance(e, exp.Column) else ""
                fields += [f for a, sch in sources.items() if not qual or a == qual for f in sch]
                continue
            fields.append(pa.field(e.alias_or_name or "?column?", self._guess_type(e, sources)))
        return pa.schema(fields).empty_table()

    @staticmethod
    def _guess_type(e: exp.Expression, sources: dict[str, pa.Schema]) -> pa.DataType:
        e = e.this if isinstance(e, exp.Alias) else e
        if isinstance(e, exp.Cast):
            kind = e.to.this
            if kind in exp.DataType.INTEGER_TYPES:
                return pa.int64()
            if kind in exp.DataType.REAL_TYPES:
                return pa.float64()
            return pa.bool_() if kind == exp.DataType.Type.BOOLEAN else pa.string()
        if isinstance(e, exp.Column):
            for alias, schema in sources.items():
                if (not e.table or e.table.lower() == alias) and e.name in schema.names:
                    return schema.field(e.name).type
            return pa.string()
        if isinstance(e, exp.Literal):
            return pa.string() if e.is_string else (pa.int32() if e.is_int else pa.float64())
        if isinstance(e, exp.Predicate | exp.Connector | exp.Not | exp.Boolean):
            return pa.bool_()
        if isinstance(e, exp.Count):
            return pa.int64()
        return pa.string()
