"""An asyncio PostgreSQL wire-protocol (v3) server in front of guarded dpsql sessions.

One client connection = one authenticated principal = one guarded session.  Every statement goes either to the
session (checked and charged by the guard) or, for pure catalog probes, to a metadata-only catalog
(:mod:`dpsql.server.catalog`).  Client session commands (SET, BEGIN, SHOW ...) are answered here and never
forwarded to DuckDB.  A Describe never runs a query through ``session.sql``; an Execute runs it exactly once.
SQL cursors (:mod:`dpsql.server.cursors`) run their query once, at DECLARE, and FETCH pages through its rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import signal
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..errors import PrivacyError
from ..sqltext import max_placeholder, split_statements, strip_comments, substitute
from . import types as t
from .auth import MECHANISM, PasswordStore, ScramExchange, mock_verifier
from .catalog import SETTINGS, Catalog, CatalogLimit
from .cursors import Close, Cursor, CursorError, Declare, is_cursor_statement
from .cursors import parse as parse_cursor

log = logging.getLogger(__name__)

SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST, PROTOCOL_3 = 80877103, 80877104, 80877102, 196608
#: Limits (issue 13): a message before authentication is at most PRE_AUTH_MAX_MESSAGE bytes (SCRAM messages
#: are ~100 bytes; a declared 300 MiB SASL message used to be read into memory); after it, ``max_message``.
PRE_AUTH_MAX_MESSAGE = 8192
MAX_MESSAGE = 64 << 20
MAX_CONNECTIONS = 128
STARTUP_TIMEOUT = 10.0  # seconds from accept to an authenticated session
#: Work runs in two thread pools, so that logins never wait behind queries (six slow queries used to
#: fill asyncio's shared default pool and time every new login out); a principal runs at most
#: PER_PRINCIPAL queries at once (the others wait their turn), so one analyst cannot take the whole pool.
LOGIN_WORKERS = 4
QUERY_WORKERS = 8
PER_PRINCIPAL = 2
DISCONNECT_POLL = 0.25  # seconds between checks that a client with a running query is still there
MAX_CURSORS = 64  # open SQL cursors per connection (each holds its released rows)
_QUERY = re.compile(r"^\s*\(*\s*(SELECT|WITH|VALUES|TABLE)\b", re.I)

SessionFactory = Callable[[str], Any]


def sqlstate_for(code: str) -> str:
    """SQLSTATE reported for a DPSQL error code."""
    if code in ("DPSQL-E001", "DPSQL-E002"):
        return "42601"  # syntax_error
    if code == "DPSQL-E070":
        return "53400"  # configuration_limit_exceeded: the budget is spent
    if code == "DPSQL-E071":
        return "40001"  # serialization_failure: safe to retry
    if code == "DPSQL-E080":
        return "58000"
    if code == "DPSQL-E090":
        return "58030"
    return "42501"  # insufficient_privilege: the guard refused the statement


class WireError(Exception):
    """An error to report to the client as an ErrorResponse."""

    def __init__(self, sqlstate: str, message: str, detail: str | None = None, severity: str = "ERROR") -> None:
        super().__init__(message)
        self.sqlstate, self.message, self.detail, self.severity = sqlstate, message, detail, severity


def _refusal(e: PrivacyError) -> WireError:
    """The ErrorResponse of a refusal (guard or catalog route): SQLSTATE by code, the code first in the message."""
    return WireError(sqlstate_for(e.code), f"{e.code}: {e.message}", f"dpsql error code {e.code}")


@dataclass
class Outcome:
    """What one statement produced: a command tag, and columns/rows when it returns rows."""

    tag: str
    columns: list[tuple[str, int]] | None = None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notice: str | None = None
    empty: bool = False
    binary: bool = False  # FETCH from a BINARY cursor: rows in binary format on the simple protocol


@dataclass
class Prepared:
    sql: str
    param_oids: list[int]
    described: list[tuple[str, int]] | None = None


@dataclass
class Portal:
    stmt: Prepared
    sql: str
    formats: list[int]
    outcome: Outcome | None = None
    sent: int = 0


_TXN_TAGS = [
    (re.compile(r"^(BEGIN|START\s+TRANSACTION)\b", re.I), "BEGIN", "T"),
    (re.compile(r"^(COMMIT|END)\b", re.I), "COMMIT", "I"),
    (re.compile(r"^(ROLLBACK|ABORT)\s+(TO|WORK\s+TO|TRANSACTION\s+TO)\b", re.I), "ROLLBACK", None),
    (re.compile(r"^(ROLLBACK|ABORT)\b", re.I), "ROLLBACK", "I"),
    (re.compile(r"^SAVEPOINT\b", re.I), "SAVEPOINT", None),
    (re.compile(r"^RELEASE\b", re.I), "RELEASE", None),
    (re.compile(r"^SET\b", re.I), "SET", None),
    (re.compile(r"^RESET\b", re.I), "RESET", None),
    (re.compile(r"^DISCARD\b", re.I), "DISCARD ALL", None),
    (re.compile(r"^DEALLOCATE\b", re.I), "DEALLOCATE", None),
    (re.compile(r"^(UN)?LISTEN\b", re.I), "LISTEN", None),
]
_SHOW = re.compile(r"^SHOW\s+(.+?)\s*$", re.I | re.S)
_BUDGET = re.compile(r"^(SHOW\s+(dpsql\.)?budget|SELECT\s+\*\s+FROM\s+dpsql_budget\s*\(\s*\))\s*$", re.I)


def _value_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*cols, strict=True)) if cols else []


class Connection:
    """The state machine of one client connection."""

    def __init__(self, server: PgServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader, self.writer = reader, writer
        self.session: Any = None
        self.catalog: Catalog | None = None
        self.user = ""
        self.authenticated = False
        self.cancelled = False
        self.active = False  # a call of this connection is in the query pool
        self.query_gen = 0
        self.cancel_key: tuple[int, int] | None = None  # BackendKeyData, once authenticated
        self.txn = "I"
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.cursors: dict[str, Cursor] = {}  # SQL cursors (DECLARE ... CURSOR), by name
        self.implicit_block = False  # a simple query of several statements: an implicit transaction block
        self.settings = {**SETTINGS, "dpsql.replay": "on"}  # SET dpsql.replay = off: fresh noise, charged
        self._out: list[bytes] = []

    # ------------------------------------------------------------------ framing
    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self._out.append(kind + struct.pack("!i", len(payload) + 4) + payload)

    async def flush(self) -> None:
        if self._out:
            self.writer.write(b"".join(self._out))
            self._out.clear()
        await self.writer.drain()

    async def read_message(self) -> tuple[bytes, bytes]:
        head = await self.reader.readexactly(5)
        (length,) = struct.unpack("!i", head[1:])
        limit = self.server.max_message if self.authenticated else PRE_AUTH_MAX_MESSAGE
        if length < 4 or length > limit:
            raise ConnectionError("bad message length")
        return head[:1], await self.reader.readexactly(length - 4)

    def send_error(self, err: WireError) -> None:
        fields = [b"S" + err.severity.encode(), b"V" + err.severity.encode(), b"C" + err.sqlstate.encode(),
                  b"M" + err.message.encode()]
        if err.detail:
            fields.append(b"D" + err.detail.encode())
        self.send(b"E", b"\0".join(fields) + b"\0\0")

    def send_notice(self, message: str) -> None:
        self.send(b"N", b"SNOTICE\0VNOTICE\0C00000\0M" + message.encode() + b"\0\0")

    def send_parameter(self, name: str, value: str) -> None:
        self.send(b"S", name.encode() + b"\0" + value.encode() + b"\0")

    # ------------------------------------------------------------------ start-up and authentication
    async def startup(self) -> bool:
        tls = False
        while True:
            (length,) = struct.unpack("!i", await self.reader.readexactly(4))
            if length < 8 or length > 10000:
                return False
            body = await self.reader.readexactly(length - 4)
            (code,) = struct.unpack("!i", body[:4])
            if code == SSL_REQUEST:
                if self.server.ssl_context is not None and not tls:
                    self.writer.write(b"S")
                    await self.writer.drain()
                    await self.writer.start_tls(self.server.ssl_context)
                    tls = True
                else:
                    self.writer.write(b"N")
                    await self.writer.drain()
                continue
            if code == GSSENC_REQUEST:
                self.writer.write(b"N")
                await self.writer.drain()
                continue
            if code == CANCEL_REQUEST:  # interrupt the query of the connection holding this key, if any
                if len(body) >= 12:
                    target = self.server.cancel_keys.get(struct.unpack("!ii", body[4:12]))
                    if target is not None:
                        target.interrupt()
                return False
            if code != PROTOCOL_3:
                self.send_error(WireError("0A000", "unsupported frontend protocol", severity="FATAL"))
                await self.flush()
                return False
            break
        items = body[4:].split(b"\0")
        try:
            params = {items[i].decode(): items[i + 1].decode() for i in range(0, len(items) - 1, 2) if items[i]}
        except UnicodeDecodeError:
            self.send_error(WireError("08P01", "invalid startup packet: names and values must be UTF-8",
                                      severity="FATAL"))
            await self.flush()
            return False
        self.user = params.get("user", "")
        if self.server.ssl_context is not None and self.server.require_tls and not tls:
            self.send_error(WireError("28000", "dpsql requires TLS (connect with sslmode=require)", severity="FATAL"))
            await self.flush()
            return False
        if not self.user or not await self.authenticate():
            return False
        try:
            self.session = await self.server.in_login_pool(self.server.session_factory, self.user)
        except PrivacyError as e:
            self.send_error(WireError("28000", f"{e.code}: {e.message}", severity="FATAL"))
            await self.flush()
            return False
        except Exception:  # noqa: BLE001 - never leak internals to an unauthenticated-ish client
            log.exception("could not open a session for %r", self.user)
            self.send_error(WireError("28000", "could not open a dpsql session", severity="FATAL"))
            await self.flush()
            return False
        self.send(b"R", struct.pack("!i", 0))
        for name in ("server_version", "server_encoding", "client_encoding", "DateStyle", "TimeZone",
                     "integer_datetimes", "standard_conforming_strings", "IntervalStyle", "is_superuser"):
            self.send_parameter(name, self.settings[name.lower()])
        self.send_parameter("application_name", params.get("application_name", ""))
        self.send_parameter("session_authorization", self.user)
        self.cancel_key = (os.getpid() & 0x7FFFFFFF, secrets.randbits(31))
        self.server.cancel_keys[self.cancel_key] = self
        self.send(b"K", struct.pack("!ii", *self.cancel_key))
        self.send(b"Z", self.txn.encode())
        await self.flush()
        self.authenticated = True
        return True

    async def authenticate(self) -> bool:
        if self.server.auth == "trust":
            return True
        store = self.server.passwords
        verifier = store.verifier(self.user) if store is not None else None
        known = verifier is not None
        scram = ScramExchange(verifier if known else mock_verifier(self.server.mock_secret, self.user), known)
        self.send(b"R", struct.pack("!i", 10) + MECHANISM.encode() + b"\0\0")
        await self.flush()
        fail = WireError("28P01", f'password authentication failed for user "{self.user}"', severity="FATAL")
        try:
            kind, body = await self.read_message()
            if kind != b"p":
                return False
            mech, _, rest = body.partition(b"\0")
            if mech.decode() != MECHANISM:
                raise ValueError("mechanism")
            (n,) = struct.unpack("!i", rest[:4])
            server_first = scram.first(rest[4:4 + n])
            self.send(b"R", struct.pack("!i", 11) + server_first)
            await self.flush()
            kind, body = await self.read_message()
            if kind != b"p":
                return False
            server_final = scram.final(body)
        except (ValueError, struct.error, UnicodeDecodeError):
            server_final = None
        if server_final is None:
            self.send_error(fail)
            await self.flush()
            return False
        self.send(b"R", struct.pack("!i", 12) + server_final)
        return True

    # ------------------------------------------------------------------ statement handling
    def _catalog(self) -> Catalog:
        if self.catalog is None:
            self.catalog = Catalog(self.session.tables(), database=self.server.database_name, user=self.user)
        return self.catalog

    def _local(self, sql: str) -> Outcome | None:
        """Statements answered without the session: transaction and session chatter, SHOW, the budget."""
        bare = strip_comments(sql).strip().rstrip(";").strip()
        if not bare:
            return Outcome("", empty=True)
        for pattern, tag, txn in _TXN_TAGS:
            if pattern.match(bare):
                if txn is not None:
                    if tag in ("COMMIT", "ROLLBACK"):
                        self._end_transaction(commit=tag == "COMMIT")
                    self.txn = txn
                if tag == "DISCARD ALL":
                    self.cursors.clear()
                if tag == "SET":
                    m = re.match(r"^SET\s+(?:SESSION\s+|LOCAL\s+)?([\w.]+)\s*(?:=|TO)\s*'?([^';]*)'?", bare, re.I)
                    if m and m.group(1).lower() in ("application_name", "datestyle", "extra_float_digits"):
                        self.settings[m.group(1).lower()] = m.group(2)
                    elif m and m.group(1).lower() == "dpsql.replay":
                        self._set_replay(m.group(2))
                return Outcome(tag)
        if _BUDGET.match(bare):
            b = self.session.budget()
            cols = [("limit", t.NUMERIC), ("spent", t.NUMERIC), ("remaining", t.NUMERIC), ("accounting", t.TEXT)]
            return Outcome("SHOW", cols, [(b.limit, b.spent, b.remaining, str(b.accounting))])
        m = _SHOW.match(bare)
        if m:
            name = m.group(1).strip().strip('"').lower()
            if name == "all":
                return Outcome("SHOW", [("name", t.TEXT), ("setting", t.TEXT), ("description", t.TEXT)],
                               [(k, v, "") for k, v in sorted(self.settings.items())])
            name = re.sub(r"\s+", " ", name)
            if name not in self.settings:
                raise WireError("42704", f'unrecognized configuration parameter "{name}"')
            return Outcome("SHOW", [(name.replace(" ", "_"), t.TEXT)], [(self.settings[name],)])
        return None

    def run(self, sql: str) -> Outcome:
        """Execute one statement (blocking; called in a worker thread)."""
        bare = strip_comments(sql).strip().rstrip(";").strip()
        if is_cursor_statement(bare):
            try:
                return self._cursor_statement(bare)
            except CursorError as e:
                raise WireError(e.sqlstate, e.message) from None
        return self._query(sql)

    def _query(self, sql: str) -> Outcome:
        """A statement that is not a cursor command: local, catalog route or the guarded session."""
        local = self._local(sql)
        if local is not None:
            return local
        catalog = self._catalog()
        if catalog.handles(sql):
            if "pg_cursors" in sql.lower():
                catalog.set_cursors((c.name, c.statement, c.hold, c.binary, bool(c.scroll))
                                    for c in self.cursors.values())
            try:
                table = catalog.execute(sql)
            except PrivacyError as e:
                raise _refusal(e) from None
            except CatalogLimit as e:
                raise WireError(e.sqlstate, e.message) from None
            cols = [(f.name, t.oid_for_arrow(f.type)) for f in table.schema]
            return Outcome(f"SELECT {table.num_rows}", cols, _value_rows(table))
        try:
            result = self.session.sql(sql)
        except PrivacyError as e:
            raise _refusal(e) from None
        except Exception:  # noqa: BLE001 - engine messages may carry data; they go to the log only
            log.exception("statement failed for %r", self.user)
            raise WireError("XX000", "dpsql: the statement failed (details are in the server log)") from None
        table = result.table
        cols = [(f.name, t.oid_for_arrow(f.type)) for f in table.schema]
        notice = None
        charged = getattr(result, "charged", None)
        if charged is not None:
            unit = getattr(result, "accounting", None) or "epsilon"
            unit = "rho" if str(unit).lower() in ("zcdp", "rho") else "epsilon"
            notice = f"dpsql: charged {unit} {_num(charged)}, remaining {_num(getattr(result, 'remaining', ''))}"
            replayed = getattr(result, "replayed_from", None)
            if replayed is not None:  # issue 19: the stored release answered again, at no cost
                notice = f"dpsql: replayed release #{replayed}, " + notice.removeprefix("dpsql: ")
        return Outcome(f"SELECT {table.num_rows}", cols, _value_rows(table), notice)

    # ------------------------------------------------------------------ SQL cursors
    def _cursor_statement(self, sql: str) -> Outcome:
        """DECLARE, FETCH, MOVE or CLOSE (see :mod:`dpsql.server.cursors`)."""
        stmt = parse_cursor(sql)
        if isinstance(stmt, Declare):
            return self._declare(stmt, sql)
        if isinstance(stmt, Close):
            if stmt.name is None:
                self.cursors.clear()
            elif self.cursors.pop(stmt.name, None) is None:
                raise CursorError("34000", f'cursor "{stmt.name}" does not exist')
            return Outcome("CLOSE CURSOR")
        cur = self._cursor(stmt.name)
        idx = cur.indices(stmt.kind, stmt.count)
        if stmt.move:
            return Outcome(f"MOVE {len(idx)}")
        return Outcome(f"FETCH {len(idx)}", cur.columns, [cur.rows[i] for i in idx], binary=cur.binary)

    def _cursor(self, name: str) -> Cursor:
        cur = self.cursors.get(name)
        if cur is None:
            raise CursorError("34000", f'cursor "{name}" does not exist')
        return cur

    def _declare(self, stmt: Declare, sql: str) -> Outcome:
        """Answer the cursor's query once, exactly as the plain query (checked, charged, released), and hold
        the released rows for FETCH.  A refusal keeps its code; nothing is held then."""
        if stmt.name in self.cursors:
            raise CursorError("42P03", f'cursor "{stmt.name}" already exists')
        if not stmt.hold and self.txn != "T" and not self.implicit_block:
            raise CursorError("25P01", "DECLARE CURSOR can only be used in transaction blocks "
                                       "(BEGIN first, or declare it WITH HOLD)")
        if len(self.cursors) >= MAX_CURSORS:
            raise CursorError("54000", f"too many open cursors (at most {MAX_CURSORS} per connection); CLOSE some")
        if not _QUERY.match(strip_comments(stmt.query)):
            raise CursorError("42601", "DECLARE CURSOR needs a query (SELECT, WITH, VALUES or TABLE)")
        outcome = self._query(stmt.query)
        if outcome.columns is None:
            raise CursorError("42P11", "DECLARE CURSOR needs a query that returns rows")
        self.cursors[stmt.name] = Cursor(stmt.name, sql, outcome.columns, outcome.rows, stmt.binary, stmt.scroll,
                                         stmt.hold, in_transaction=self.txn == "T")
        return Outcome("DECLARE CURSOR", notice=outcome.notice)

    def _end_transaction(self, commit: bool) -> None:
        """COMMIT keeps only WITH HOLD cursors; ROLLBACK also drops those declared in the transaction."""
        for name, cur in list(self.cursors.items()):
            if not cur.hold or (not commit and cur.in_transaction):
                del self.cursors[name]
            else:
                cur.in_transaction = False

    def _set_replay(self, value: str) -> None:
        """``SET dpsql.replay = on|off``: whether this connection's session replays stored releases."""
        on = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}.get(value.strip().lower())
        if on is None:
            raise WireError("22023", f'invalid value for parameter "dpsql.replay": "{value.strip()}" (on or off)')
        if hasattr(self.session, "replay"):
            self.session.replay = on
        self.settings["dpsql.replay"] = "on" if on else "off"

    def describe(self, sql: str) -> list[tuple[str, int]] | None:
        """Result columns of one statement without charging, running or changing anything (blocking)."""
        bare = strip_comments(sql).strip().rstrip(";").strip()
        if is_cursor_statement(bare):  # only FETCH returns rows: the cursor's columns
            try:
                stmt = parse_cursor(bare)
                if isinstance(stmt, Declare | Close) or stmt.move:
                    return None
                return self._cursor(stmt.name).columns
            except CursorError as e:
                raise WireError(e.sqlstate, e.message) from None
        if any(pattern.match(bare) for pattern, _, _ in _TXN_TAGS):
            return None  # SET, BEGIN, COMMIT ... take effect when executed, not when described
        local = self._local(sql)
        if local is not None:
            return local.columns
        catalog = self._catalog()
        try:
            if catalog.handles(sql):
                return catalog.describe(sql)
            described = self.session.describe(sql)
        except PrivacyError as e:
            raise _refusal(e) from None
        except CatalogLimit as e:
            raise WireError(e.sqlstate, e.message) from None
        except Exception:  # noqa: BLE001
            log.info("describe failed for %r", self.user, exc_info=True)
            raise WireError("XX000", "dpsql: the statement could not be described") from None
        return [(name, t.oid_for_duckdb(str(typ))) for name, typ in described]

    # ------------------------------------------------------------------ result output
    def send_row_description(self, cols: list[tuple[str, int]], formats: list[int]) -> None:
        parts = [struct.pack("!h", len(cols))]
        for i, (name, oid) in enumerate(cols):
            fmt = _format_for(formats, i)
            parts.append(name.encode() + b"\0" + struct.pack("!ihihih", 0, 0, oid, t.type_size(oid), -1, fmt))
        self.send(b"T", b"".join(parts))

    def send_rows(self, cols: list[tuple[str, int]], rows: list[tuple[Any, ...]], formats: list[int]) -> None:
        encoders = [t.encoder(oid, _format_for(formats, i) == 1) for i, (_, oid) in enumerate(cols)]
        head = struct.pack("!h", len(cols))
        for row in rows:
            parts = [head]
            for enc, value in zip(encoders, row, strict=True):
                if value is None:
                    parts.append(b"\xff\xff\xff\xff")
                else:
                    data = enc(value)
                    parts.append(struct.pack("!i", len(data)) + data)
            self.send(b"D", b"".join(parts))

    # ------------------------------------------------------------------ simple query protocol
    async def simple_query(self, body: bytes) -> None:
        text = body.rstrip(b"\0").decode()
        statements = split_statements(text)
        if not statements:
            self.send(b"I")
        self.implicit_block = len(statements) > 1
        for sql in statements:
            try:
                outcome = await self.in_query_pool(self.run, sql)
            except WireError as e:
                self.send_error(e)
                break
            self.finish(outcome, [1] if outcome.binary else [], None, describe=True)
        self.implicit_block = False
        if self.txn == "I":  # the implicit transaction ended: its WITHOUT HOLD cursors with it
            self._end_transaction(commit=True)
        self.send(b"Z", self.txn.encode())
        await self.flush()

    def finish(self, outcome: Outcome, formats: list[int], described: list[tuple[str, int]] | None, *,
               describe: bool, portal: Portal | None = None, max_rows: int = 0) -> None:
        if outcome.empty:
            self.send(b"I")
            return
        if outcome.columns is None:
            if outcome.notice:
                self.send_notice(outcome.notice)
            self.send(b"C", outcome.tag.encode() + b"\0")
            return
        cols = described if described is not None and len(described) == len(outcome.columns) else outcome.columns
        if describe:
            self.send_row_description(cols, formats)
        start = portal.sent if portal else 0
        rows = outcome.rows[start:start + max_rows] if max_rows > 0 else outcome.rows[start:]
        self.send_rows(cols, rows, formats)
        if portal is not None:
            portal.sent = start + len(rows)
            if max_rows > 0 and portal.sent < len(outcome.rows):
                self.send(b"s")
                return
        if outcome.notice and (portal is None or portal.sent >= len(outcome.rows)):
            self.send_notice(outcome.notice)
        self.send(b"C", outcome.tag.encode() + b"\0")

    # ------------------------------------------------------------------ extended query protocol
    def parse(self, body: bytes) -> None:
        name, rest = _cstr(body)
        query, rest = _cstr(rest)
        (n,) = struct.unpack("!h", rest[:2])
        oids = list(struct.unpack(f"!{n}i", rest[2:2 + 4 * n]))
        statements = split_statements(query)
        if len(statements) > 1:
            raise WireError("42601", "DPSQL-E002: cannot insert multiple commands into a prepared statement")
        sql = statements[0] if statements else ""
        count = max(max_placeholder(sql), len(oids))
        oids += [0] * (count - len(oids))
        self.statements[name] = Prepared(sql, oids)
        self.send(b"1")

    def bind(self, body: bytes) -> None:
        portal_name, rest = _cstr(body)
        stmt_name, rest = _cstr(rest)
        stmt = self.statements.get(stmt_name)
        if stmt is None:
            raise WireError("26000", f'prepared statement "{stmt_name}" does not exist')
        (nf,) = struct.unpack("!h", rest[:2])
        fmts = list(struct.unpack(f"!{nf}h", rest[2:2 + 2 * nf]))
        rest = rest[2 + 2 * nf:]
        (np_,) = struct.unpack("!h", rest[:2])
        rest = rest[2:]
        values: list[bytes | None] = []
        for _ in range(np_):
            (ln,) = struct.unpack("!i", rest[:4])
            if ln < 0:
                values.append(None)
                rest = rest[4:]
            else:
                values.append(rest[4:4 + ln])
                rest = rest[4 + ln:]
        (nr,) = struct.unpack("!h", rest[:2])
        result_formats = list(struct.unpack(f"!{nr}h", rest[2:2 + 2 * nr]))
        if np_ < len(stmt.param_oids):
            raise WireError("08P01", f"bind message supplies {np_} parameters, but the statement needs "
                                     f"{len(stmt.param_oids)}")
        oids = stmt.param_oids + [0] * (np_ - len(stmt.param_oids))

        def literal(i: int) -> str:
            if i < 1 or i > np_:
                raise WireError("42P02", f"there is no parameter ${i}")
            value, oid = values[i - 1], oids[i - 1]
            binary = _format_for(fmts, i - 1) == 1
            try:
                if value is None:
                    return "NULL"
                if binary:
                    return t.python_literal(t.decode_param_binary(oid, value))
                return t.to_literal(oid, value, True)
            except (ValueError, struct.error, UnicodeDecodeError) as e:
                raise WireError("22P02", f"invalid value for parameter ${i}: {e}") from None

        self.portals[portal_name] = Portal(stmt, substitute(stmt.sql, literal), result_formats)
        self.send(b"2")

    async def describe_message(self, body: bytes) -> None:
        kind, name = body[:1], _cstr(body[1:])[0]
        if kind == b"S":
            stmt = self.statements.get(name)
            if stmt is None:
                raise WireError("26000", f'prepared statement "{name}" does not exist')
            self.send(b"t", struct.pack(f"!h{len(stmt.param_oids)}i", len(stmt.param_oids),
                                        *[o or t.TEXT for o in stmt.param_oids]))
            cols = await self.in_query_pool(self._describe_statement, stmt)
            stmt.described = cols
            formats: list[int] = []
        else:
            portal = self.portals.get(name)
            if portal is None and name in self.cursors:  # a SQL cursor is a portal too (psycopg 3 describes it)
                cols, formats = self.cursors[name].columns, []
            elif portal is None:
                raise WireError("34000", f'portal "{name}" does not exist')
            elif portal.outcome is not None:
                cols = portal.outcome.columns
            else:
                cols = await self.in_query_pool(self.describe, portal.sql)
                portal.stmt.described = cols
            if portal is not None:
                formats = portal.formats
        if cols is None:
            self.send(b"n")
        else:
            self.send_row_description(cols, formats)

    def _describe_statement(self, stmt: Prepared) -> list[tuple[str, int]] | None:
        if not stmt.param_oids:
            return self.describe(stmt.sql)

        def dummy(style: int) -> Callable[[int], str]:
            def literal(i: int) -> str:
                oid = stmt.param_oids[i - 1] if i <= len(stmt.param_oids) else 0
                if oid in (t.INT2, t.INT4, t.INT8, t.FLOAT4, t.FLOAT8, t.NUMERIC, t.OID):
                    return "1"
                if oid == t.BOOL:
                    return "TRUE"
                if oid == t.DATE:
                    return "DATE '2000-01-01'"
                if oid in (t.TIMESTAMP, t.TIMESTAMPTZ):
                    return "TIMESTAMP '2000-01-01 00:00:00'"
                return "1" if style == 0 and oid in (0, t.UNKNOWN) else "'1'"
            return literal

        try:
            cols = self.describe(substitute(stmt.sql, dummy(0)))
        except WireError:
            cols = None
        if not cols:  # e.g. a text column compared with the numeric dummy: try quoted dummies
            cols = self.describe(substitute(stmt.sql, dummy(1)))
        return cols

    async def execute(self, body: bytes) -> None:
        name, rest = _cstr(body)
        (max_rows,) = struct.unpack("!i", rest[:4])
        portal = self.portals.get(name)
        if portal is None and name in self.cursors:  # Execute on a SQL cursor: FETCH FORWARD max_rows
            cur = self.cursors[name]
            idx = cur.indices("forward", max_rows if max_rows > 0 else None)
            self.send_rows(cur.columns, [cur.rows[i] for i in idx], [1] if cur.binary else [])
            if max_rows > 0 and cur.pos < len(cur.rows):
                self.send(b"s")
            else:
                self.send(b"C", f"FETCH {len(idx)}".encode() + b"\0")
            return
        if portal is None:
            raise WireError("34000", f'portal "{name}" does not exist')
        if portal.outcome is None:
            portal.outcome = await self.in_query_pool(self.run, portal.sql)
        self.finish(portal.outcome, portal.formats, portal.stmt.described, describe=False, portal=portal,
                    max_rows=max_rows)

    # ------------------------------------------------------------------ main loop
    async def serve(self) -> None:
        try:  # an unauthenticated client cannot hold a connection open
            async with asyncio.timeout(self.server.startup_timeout):
                if not await self.startup():
                    return
        except TimeoutError:
            return
        skipping = False
        while True:
            kind, body = await self.read_message()
            if kind == b"X":
                return
            if kind == b"Q":
                skipping = False
                await self.simple_query(body)
                continue
            if kind == b"S":
                skipping = False
                self.portals.pop("", None)
                self.send(b"Z", self.txn.encode())
                await self.flush()
                continue
            if kind == b"H":
                await self.flush()
                continue
            if skipping:
                continue
            try:
                if kind == b"P":
                    self.parse(body)
                elif kind == b"B":
                    self.bind(body)
                elif kind == b"D":
                    await self.describe_message(body)
                elif kind == b"E":
                    await self.execute(body)
                elif kind == b"C":
                    target, name = body[:1], _cstr(body[1:])[0]
                    (self.statements if target == b"S" else self.portals).pop(name, None)
                    self.send(b"3")
                elif kind in (b"d", b"c", b"f"):
                    continue
                else:
                    raise WireError("0A000", f"unsupported protocol message {kind!r}")
            except WireError as e:
                self.send_error(e)
                skipping = True
            except (struct.error, UnicodeDecodeError, IndexError):
                self.send_error(WireError("08P01", "malformed protocol message"))
                skipping = True

    async def in_query_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` in the server's query pool, at most PER_PRINCIPAL at a time for this principal; a
        CancelRequest that arrives while the call waits for its turn cancels it before it runs."""
        self.cancelled = False
        async with self.server.principal_slot(self.user):
            if self.cancelled:
                raise WireError("57014", "canceling statement due to user request")
            self.query_gen += 1
            self.active = True
            watch = asyncio.create_task(self._watch_client())
            try:
                return await asyncio.get_running_loop().run_in_executor(self.server.query_pool, fn, *args)
            finally:
                self.active = False
                watch.cancel()

    async def _watch_client(self) -> None:
        """While a query runs, interrupt it if the client goes away (nobody would read the answer)."""
        while True:
            await asyncio.sleep(DISCONNECT_POLL)
            if self.reader.at_eof() or self.writer.is_closing():
                self.interrupt()
                return

    def interrupt(self) -> None:
        """Stop the running query (a CancelRequest, or the server stopping): it ends as the charged E080.

        Called on the event loop.  DuckDB ignores an interrupt that arrives before its query has started,
        so while the same call is still in the pool the interrupt is repeated a few times."""
        self.cancelled = True
        self._stop()
        if self.active:
            gen, loop = self.query_gen, asyncio.get_running_loop()
            for delay in (0.05, 0.25, 1.0, 3.0):
                loop.call_later(delay, lambda: self.active and self.query_gen == gen and self._stop())

    def _stop(self) -> None:
        stop = getattr(self.session, "interrupt", None)
        if stop is not None:
            with contextlib.suppress(Exception):
                stop()

    async def close(self) -> None:
        if self.cancel_key is not None:
            self.server.cancel_keys.pop(self.cancel_key, None)
        if self.session is not None:
            with contextlib.suppress(Exception):
                self.session.interrupt()  # a query still running for a client that left stops now
            with contextlib.suppress(Exception):  # its own pool: a close waits for that query to end
                await asyncio.get_running_loop().run_in_executor(self.server.close_pool, self.session.close)
        with contextlib.suppress(Exception):
            self.writer.close()
            await self.writer.wait_closed()


def _cstr(data: bytes) -> tuple[str, bytes]:
    i = data.index(b"\0")
    return data[:i].decode(), data[i + 1:]


def _format_for(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i]


def _num(v: Any) -> str:
    return format(v.normalize(), "f") if isinstance(v, Decimal) else str(v)


class PgServer:
    """The PostgreSQL-wire front door: ``await server.start()`` then ``await server.serve_forever()``."""

    def __init__(self, session_factory: SessionFactory, *, host: str = "127.0.0.1", port: int = 5433,
                 passwords: PasswordStore | None = None, auth: str = "scram",
                 ssl_context: ssl.SSLContext | None = None, require_tls: bool = True,
                 database_name: str = "dpsql", max_connections: int = MAX_CONNECTIONS,
                 startup_timeout: float = STARTUP_TIMEOUT, max_message: int = MAX_MESSAGE,
                 query_workers: int = QUERY_WORKERS, per_principal: int = PER_PRINCIPAL) -> None:
        if auth not in ("scram", "trust"):
            raise ValueError("auth must be 'scram' or 'trust'")
        self.session_factory = session_factory
        self.host, self.port = host, port
        self.passwords, self.auth = passwords, auth
        self.ssl_context, self.require_tls = ssl_context, require_tls
        self.database_name = database_name
        self.max_connections, self.startup_timeout, self.max_message = max_connections, startup_timeout, max_message
        self.mock_secret = passwords.mock_secret() if passwords is not None else secrets.token_bytes(32)
        self.login_pool = ThreadPoolExecutor(LOGIN_WORKERS, thread_name_prefix="dpsql-login")
        self.query_pool = ThreadPoolExecutor(query_workers, thread_name_prefix="dpsql-query")
        # closing a session waits for its running query to stop: never in the login pool, so a client that
        # leaves in the middle of a slow query cannot hold up anybody's login
        self.close_pool = ThreadPoolExecutor(LOGIN_WORKERS, thread_name_prefix="dpsql-close")
        self.per_principal = per_principal
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.cancel_keys: dict[tuple[int, int], Connection] = {}
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        if len(self.connections) >= self.max_connections:
            conn.send_error(WireError("53300", "too many connections", severity="FATAL"))
            with contextlib.suppress(Exception):
                await conn.flush()
            await conn.close()
            return
        self.connections.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await conn.serve()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError):
            pass
        except Exception:  # noqa: BLE001 - one broken client must not stop the server
            log.exception("connection handler crashed")
        except asyncio.CancelledError:
            pass
        finally:
            self.connections.discard(conn)
            try:
                await conn.close()
            finally:  # only now: a server stopping waits for (or cancels) the close too
                self._tasks.discard(task)  # type: ignore[arg-type]

    async def in_login_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.login_pool, fn, *args)

    @contextlib.asynccontextmanager
    async def principal_slot(self, user: str) -> Any:
        sem = self._slots.setdefault(user, asyncio.Semaphore(self.per_principal))
        async with sem:
            yield

    async def start(self) -> tuple[str, int]:
        """Bind and listen; returns the (host, port) actually bound (port 0 picks a free one)."""
        self._server = await asyncio.start_server(self._client, self.host, self.port)
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]
        return sock[0], sock[1]

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.interrupt()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
        self.query_pool.shutdown(wait=False, cancel_futures=True)
        self.close_pool.shutdown(wait=False, cancel_futures=True)
        self.login_pool.shutdown(wait=False, cancel_futures=True)


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or newer)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


@contextlib.contextmanager
def running(server: PgServer) -> Iterator[tuple[str, int]]:
    """Run ``server`` on a background thread for the duration of a ``with`` block (tests, demos)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    address: list[tuple[str, int]] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        address.append(loop.run_until_complete(server.start()))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, name="dpsql-pgwire", daemon=True)
    thread.start()
    ready.wait()
    try:
        yield address[0]
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def serve(session_factory: SessionFactory, *, on_ready: Callable[[str, int], None] | None = None,
          **kwargs: Any) -> None:
    """Run the server until interrupted or terminated (the ``dpsql serve`` command).

    ``on_ready(host, port)`` is called once the socket is bound (port 0 picks a free port)."""

    async def main() -> None:
        server = PgServer(session_factory, **kwargs)
        host, port = await server.start()
        if on_ready is not None:
            on_ready(host, port)
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stopping.set)
        task = asyncio.create_task(server.serve_forever())
        await stopping.wait()
        await server.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
