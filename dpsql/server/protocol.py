"""The query protocol of one authenticated connection: simple and extended (Parse, Bind, Describe, Execute,
Close) queries, and where each statement goes.

Every statement goes either to the session (checked and charged by the guard) or, for pure catalog probes, to a
metadata-only catalog (:mod:`dpsql.server.catalog`).  Client session commands (SET, BEGIN, SHOW ...) are
answered here and never forwarded to DuckDB.  A Describe never runs a query through ``session.sql``; an Execute
runs it exactly once.  SQL cursors (:mod:`dpsql.server.cursors`) run their query once, at DECLARE, and FETCH
pages through its rows.  Messages go out through :class:`~dpsql.server.wire.Wire`; blocking work runs through
``in_pool`` (the server's query pool, see :mod:`dpsql.server.pgwire`).
"""

from __future__ import annotations

import logging
import re
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..errors import PrivacyError
from ..sqltext import max_placeholder, split_statements, strip_comments, substitute
from . import types as t
from .catalog import Catalog, CatalogLimit
from .cursors import Close, Cursor, CursorError, Declare, is_cursor_statement
from .cursors import parse as parse_cursor
from .wire import Wire, WireError, cstr, format_for

log = logging.getLogger("dpsql.server.pgwire")  # the server's log, as before the split

MAX_CURSORS = 64  # open SQL cursors per connection (each holds its released rows)
_QUERY = re.compile(r"^\s*\(*\s*(SELECT|WITH|VALUES|TABLE)\b", re.I)

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


class QueryProtocol:
    """Statements and query messages of one connection, after start-up: its prepared statements, portals,
    SQL cursors, transaction status and settings."""

    def __init__(self, wire: Wire, session: Any, *, user: str, database_name: str, settings: dict[str, str],
                 in_pool: Callable[..., Awaitable[Any]]) -> None:
        self.wire = wire
        self.session = session
        self.user = user
        self.database_name = database_name
        self.settings = settings  # shared with the connection (start-up reports them)
        self.in_pool = in_pool
        self.catalog: Catalog | None = None
        self.txn = "I"
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.cursors: dict[str, Cursor] = {}  # SQL cursors (DECLARE ... CURSOR), by name
        self.implicit_block = False  # a simple query of several statements: an implicit transaction block

    # ------------------------------------------------------------------ statement handling
    def _catalog(self) -> Catalog:
        if self.catalog is None:
            self.catalog = Catalog(self.session.tables(), database=self.database_name, user=self.user)
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

    # ------------------------------------------------------------------ simple query protocol
    async def simple_query(self, body: bytes) -> None:
        text = body.rstrip(b"\0").decode()
        statements = split_statements(text)
        if not statements:
            self.wire.send(b"I")
        self.implicit_block = len(statements) > 1
        for sql in statements:
            try:
                outcome = await self.in_pool(self.run, sql)
            except WireError as e:
                self.wire.send_error(e)
                break
            self.finish(outcome, [1] if outcome.binary else [], None, describe=True)
        self.implicit_block = False
        if self.txn == "I":  # the implicit transaction ended: its WITHOUT HOLD cursors with it
            self._end_transaction(commit=True)
        self.wire.send(b"Z", self.txn.encode())
        await self.wire.flush()

    def finish(self, outcome: Outcome, formats: list[int], described: list[tuple[str, int]] | None, *,
               describe: bool, portal: Portal | None = None, max_rows: int = 0) -> None:
        if outcome.empty:
            self.wire.send(b"I")
            return
        if outcome.columns is None:
            if outcome.notice:
                self.wire.send_notice(outcome.notice)
            self.wire.send(b"C", outcome.tag.encode() + b"\0")
            return
        cols = described if described is not None and len(described) == len(outcome.columns) else outcome.columns
        if describe:
            self.wire.send_row_description(cols, formats)
        start = portal.sent if portal else 0
        rows = outcome.rows[start:start + max_rows] if max_rows > 0 else outcome.rows[start:]
        self.wire.send_rows(cols, rows, formats)
        if portal is not None:
            portal.sent = start + len(rows)
            if max_rows > 0 and portal.sent < len(outcome.rows):
                self.wire.send(b"s")
                return
        if outcome.notice and (portal is None or portal.sent >= len(outcome.rows)):
            self.wire.send_notice(outcome.notice)
        self.wire.send(b"C", outcome.tag.encode() + b"\0")

    # ------------------------------------------------------------------ extended query protocol
    def parse(self, body: bytes) -> None:
        name, rest = cstr(body)
        query, rest = cstr(rest)
        (n,) = struct.unpack("!h", rest[:2])
        oids = list(struct.unpack(f"!{n}i", rest[2:2 + 4 * n]))
        statements = split_statements(query)
        if len(statements) > 1:
            raise WireError("42601", "DPSQL-E002: cannot insert multiple commands into a prepared statement")
        sql = statements[0] if statements else ""
        count = max(max_placeholder(sql), len(oids))
        oids += [0] * (count - len(oids))
        self.statements[name] = Prepared(sql, oids)
        self.wire.send(b"1")

    def bind(self, body: bytes) -> None:
        portal_name, rest = cstr(body)
        stmt_name, rest = cstr(rest)
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
            binary = format_for(fmts, i - 1) == 1
            try:
                if value is None:
                    return "NULL"
                if binary:
                    return t.python_literal(t.decode_param_binary(oid, value))
                return t.to_literal(oid, value, True)
            except (ValueError, struct.error, UnicodeDecodeError) as e:
                raise WireError("22P02", f"invalid value for parameter ${i}: {e}") from None

        self.portals[portal_name] = Portal(stmt, substitute(stmt.sql, literal), result_formats)
        self.wire.send(b"2")

    async def describe_message(self, body: bytes) -> None:
        kind, name = body[:1], cstr(body[1:])[0]
        if kind == b"S":
            stmt = self.statements.get(name)
            if stmt is None:
                raise WireError("26000", f'prepared statement "{name}" does not exist')
            self.wire.send(b"t", struct.pack(f"!h{len(stmt.param_oids)}i", len(stmt.param_oids),
                                        *[o or t.TEXT for o in stmt.param_oids]))
            cols = await self.in_pool(self._describe_statement, stmt)
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
                cols = await self.in_pool(self.describe, portal.sql)
                portal.stmt.described = cols
            if portal is not None:
                formats = portal.formats
        if cols is None:
            self.wire.send(b"n")
        else:
            self.wire.send_row_description(cols, formats)

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
        name, rest = cstr(body)
        (max_rows,) = struct.unpack("!i", rest[:4])
        portal = self.portals.get(name)
        if portal is None and name in self.cursors:  # Execute on a SQL cursor: FETCH FORWARD max_rows
            cur = self.cursors[name]
            idx = cur.indices("forward", max_rows if max_rows > 0 else None)
            self.wire.send_rows(cur.columns, [cur.rows[i] for i in idx], [1] if cur.binary else [])
            if max_rows > 0 and cur.pos < len(cur.rows):
                self.wire.send(b"s")
            else:
                self.wire.send(b"C", f"FETCH {len(idx)}".encode() + b"\0")
            return
        if portal is None:
            raise WireError("34000", f'portal "{name}" does not exist')
        if portal.outcome is None:
            portal.outcome = await self.in_pool(self.run, portal.sql)
        self.finish(portal.outcome, portal.formats, portal.stmt.described, describe=False, portal=portal,
                    max_rows=max_rows)

    def sync(self) -> None:
        """Sync: the unnamed portal ends; ReadyForQuery with the transaction status."""
        self.portals.pop("", None)
        self.wire.send(b"Z", self.txn.encode())

    async def extended(self, kind: bytes, body: bytes) -> None:
        """One message of the extended protocol (Parse, Bind, Describe, Execute, Close; COPY data is ignored)."""
        if kind == b"P":
            self.parse(body)
        elif kind == b"B":
            self.bind(body)
        elif kind == b"D":
            await self.describe_message(body)
        elif kind == b"E":
            await self.execute(body)
        elif kind == b"C":
            target, name = body[:1], cstr(body[1:])[0]
            (self.statements if target == b"S" else self.portals).pop(name, None)
            self.wire.send(b"3")
        elif kind in (b"d", b"c", b"f"):
            return
        else:
            raise WireError("0A000", f"unsupported protocol message {kind!r}")


def _num(v: Any) -> str:
    return format(v.normalize(), "f") if isinstance(v, Decimal) else str(v)
