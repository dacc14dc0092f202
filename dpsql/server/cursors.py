"""SQL-level cursors of the wire server: ``DECLARE``, ``FETCH``, ``MOVE`` and ``CLOSE`` (PostgreSQL syntax).

psycopg2 named cursors, psycopg 3 ``ServerCursor`` and SQLAlchemy's ``stream_results`` (pandas ``read_sql(...,
chunksize=...)``) page through a result with them.  The query of a DECLARE is answered once, exactly as the same
plain query (checked, charged, released); the cursor then holds the released rows and FETCH/MOVE only move
through them, so paging never charges again and never runs anything.  This module parses the statements and
keeps the position; :mod:`dpsql.server.pgwire` runs the query and sends the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NAME = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_COUNT = r"[+-]?\d+"

_DECLARE = re.compile(
    rf"^DECLARE\s+(?P<name>{_NAME})\s+(?P<opts>(?:(?:BINARY|INSENSITIVE|ASENSITIVE|NO\s+SCROLL|SCROLL)\s+)*)"
    rf"CURSOR\s+(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.+)$", re.I | re.S)
_FETCH = re.compile(
    rf"^(?P<verb>FETCH|MOVE)(?:\s+(?P<dir>NEXT|PRIOR|FIRST|LAST|(?:ABSOLUTE|RELATIVE)\s+{_COUNT}|{_COUNT}|ALL"
    rf"|(?:FORWARD|BACKWARD)(?:\s+(?:{_COUNT}|ALL))?))?(?:\s+(?:FROM|IN))?\s+(?P<name>{_NAME})$", re.I | re.S)
_CLOSE = re.compile(rf"^CLOSE\s+(?P<name>{_NAME})$", re.I | re.S)
_CURSOR_VERB = re.compile(r"^(DECLARE|FETCH|MOVE|CLOSE)\b", re.I)


class CursorError(Exception):
    """A cursor statement that cannot be carried out, with its SQLSTATE."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate, self.message = sqlstate, message


def identifier(name: str) -> str:
    """A cursor name as PostgreSQL folds it: quoted names keep their case, bare names are lower-cased."""
    if name.startswith('"'):
        return name[1:-1].replace('""', '"')
    return name.lower()


@dataclass(frozen=True)
class Declare:
    name: str
    query: str
    binary: bool
    scroll: bool | None  # None: neither SCROLL nor NO SCROLL (backward fetches allowed, rows are held)
    hold: bool


@dataclass(frozen=True)
class Fetch:
    name: str
    move: bool  # MOVE: position only, no rows
    kind: str  # forward, backward, absolute, relative
    count: int | None  # None: ALL


@dataclass(frozen=True)
class Close:
    name: str | None  # None: CLOSE ALL


def is_cursor_statement(sql: str) -> bool:
    """True for a statement this module parses (DECLARE, FETCH, MOVE, CLOSE)."""
    return bool(_CURSOR_VERB.match(sql))


def parse(sql: str) -> Declare | Fetch | Close:
    """The cursor statement ``sql`` (comments stripped, no trailing semicolon); CursorError 42601 otherwise."""
    m = _DECLARE.match(sql)
    if m:
        opts = re.sub(r"\s+", " ", m.group("opts").upper()).split()
        scroll = None
        if "SCROLL" in opts:
            scroll = not (opts.index("SCROLL") > 0 and opts[opts.index("SCROLL") - 1] == "NO")
        return Declare(identifier(m.group("name")), m.group("query").strip(), "BINARY" in opts, scroll,
                       (m.group("hold") or "").upper() == "WITH")
    m = _FETCH.match(sql)
    if m:
        kind, count = _direction(m.group("dir"))
        return Fetch(identifier(m.group("name")), m.group("verb").upper() == "MOVE", kind, count)
    m = _CLOSE.match(sql)
    if m:
        return Close(None if m.group("name").upper() == "ALL" else identifier(m.group("name")))
    verb = sql.split(None, 1)[0].upper() if sql.strip() else "statement"
    raise CursorError("42601", f"syntax error in {verb}: dpsql reads DECLARE name [BINARY] [[NO] SCROLL] CURSOR "
                               "[WITH|WITHOUT HOLD] FOR query, FETCH/MOVE [direction] [FROM|IN] name, CLOSE name|ALL")


def _direction(text: str | None) -> tuple[str, int | None]:
    words = (text or "NEXT").upper().split()
    head = words[0]
    arg = words[1] if len(words) > 1 else None
    if head == "NEXT":
        return "forward", 1
    if head == "PRIOR":
        return "backward", 1
    if head == "FIRST":
        return "absolute", 1
    if head == "LAST":
        return "absolute", -1
    if head in ("ABSOLUTE", "RELATIVE"):
        return head.lower(), int(arg or 0)
    if head == "ALL":
        return "forward", None
    if head in ("FORWARD", "BACKWARD"):
        n = None if arg == "ALL" else int(arg) if arg is not None else 1
        if n is not None and n < 0:  # FORWARD -3 is BACKWARD 3
            return ("backward" if head == "FORWARD" else "forward"), -n
        return head.lower(), n
    n = int(head)
    return ("forward", n) if n >= 0 else ("backward", -n)


@dataclass
class Cursor:
    """An open cursor over released rows.  ``pos`` follows PostgreSQL: 0 is before the first row, 1..n on a
    row, n + 1 after the last."""

    name: str
    statement: str
    columns: list[tuple[str, int]]
    rows: list[tuple[Any, ...]]
    binary: bool = False
    scroll: bool | None = None
    hold: bool = False
    in_transaction: bool = False  # declared inside the open transaction block (ROLLBACK drops it)
    pos: int = 0
    notice: str | None = field(default=None, repr=False)

    def indices(self, kind: str, count: int | None) -> list[int]:
        """Move as FETCH/MOVE ``kind count`` does; the 0-based indices of the rows it passes, in order.
        CursorError 55000 for a backward move on a NO SCROLL cursor."""
        n, pos = len(self.rows), self.pos
        if kind in ("absolute", "relative"):
            k = count or 0
            target = (k if k >= 0 else n + 1 + k) if kind == "absolute" else pos + k
            target = max(0, min(target, n + 1))
            if kind == "relative" and k == 0:
                target = pos
            self._forward_only(target < pos)
            self.pos = target
            return [target - 1] if 1 <= target <= n else []
        k = n + 1 if count is None else count
        if k == 0:  # FORWARD 0 / BACKWARD 0 fetch the current row again
            return [pos - 1] if 1 <= pos <= n else []
        if kind == "forward":
            end = min(pos + k, n + 1)
            self.pos = end
            return list(range(pos, min(end, n)))
        self._forward_only(True)
        start = max(pos - k, 0)
        self.pos = start
        return list(range(min(pos - 1, n) - 1, max(start, 1) - 2, -1))

    def _forward_only(self, backward: bool) -> None:
        if backward and self.scroll is False:
            raise CursorError("55000", "cursor can only scan forward: declare it with SCROLL to move backward")
