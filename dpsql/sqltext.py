"""SQL text helpers, the one home for them: the lexer, statement splitting, comment stripping, safe parameter
substitution, identifier quoting, and the project's ``sql/`` files.

The scanner knows PostgreSQL/DuckDB quoting ('...', E'...', "...", $tag$...$tag$, -- and /* */ comments), so a
``$1`` or ``;`` inside a string, identifier or comment is never touched.  Text only: no dpsql, duckdb or sqlglot
import, so every layer may use it (the shell, the server, the ledger, the binding).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["segments", "split_statements", "strip_comments", "max_placeholder", "substitute", "quote_ident",
           "sql_dir", "read_sql", "script"]

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_PARAM = re.compile(r"(?<![\w$])\$(\d+)")


def segments(sql: str) -> Iterator[tuple[str, int, int]]:
    """Yield (kind, start, end) where kind is 'code', 'quoted' or 'comment'."""
    i, n, start = 0, len(sql), 0
    while i < n:
        ch = sql[i]
        end = -1
        if ch == "'" or (ch in "eE" and sql[i + 1:i + 2] == "'" and (i == 0 or not _word(sql[i - 1]))):
            j = i + (2 if ch != "'" else 1)
            backslash = ch != "'"
            while j < n:
                if backslash and sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == "'":
                    if sql[j + 1:j + 2] == "'":
                        j += 2
                        continue
                    break
                j += 1
            end, kind = min(j + 1, n), "quoted"
        elif ch == '"':
            j = sql.find('"', i + 1)
            while j != -1 and sql[j + 1:j + 2] == '"':
                j = sql.find('"', j + 2)
            end, kind = (n if j == -1 else j + 1), "quoted"
        elif ch == "-" and sql[i + 1:i + 2] == "-":
            j = sql.find("\n", i)
            end, kind = (n if j == -1 else j + 1), "comment"
        elif ch == "/" and sql[i + 1:i + 2] == "*":
            j = sql.find("*/", i + 2)
            end, kind = (n if j == -1 else j + 2), "comment"
        elif ch == "$" and (i == 0 or not _word(sql[i - 1])):
            m = _DOLLAR_TAG.match(sql, i)
            if m:
                j = sql.find(m.group(0), m.end())
                end, kind = (n if j == -1 else j + len(m.group(0))), "quoted"
        if end == -1:
            i += 1
            continue
        if start < i:
            yield "code", start, i
        yield kind, i, end
        i = start = end
    if start < n:
        yield "code", start, n


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def split_statements(sql: str) -> list[str]:
    """Split on top-level semicolons; empty statements (only blanks or comments) are dropped."""
    parts: list[str] = []
    current: list[str] = []
    for kind, a, b in segments(sql):
        chunk = sql[a:b]
        if kind != "code":
            current.append(chunk)
            continue
        pieces = chunk.split(";")
        for k, piece in enumerate(pieces):
            current.append(piece)
            if k < len(pieces) - 1:
                parts.append("".join(current))
                current = []
    parts.append("".join(current))
    return [p.strip() for p in parts if strip_comments(p).strip()]


def strip_comments(sql: str) -> str:
    """The statement with comments replaced by a blank."""
    return "".join(" " if kind == "comment" else sql[a:b] for kind, a, b in segments(sql))


def max_placeholder(sql: str) -> int:
    """The highest ``$n`` used outside quotes and comments (0 when there is none)."""
    found = [int(m.group(1)) for kind, a, b in segments(sql) if kind == "code"
             for m in _PARAM.finditer(sql, a, b)]
    return max(found, default=0)


def substitute(sql: str, literal: Callable[[int], str]) -> str:
    """Replace each ``$n`` outside quotes and comments by ``literal(n)`` (1-based)."""
    out: list[str] = []
    for kind, a, b in segments(sql):
        if kind != "code":
            out.append(sql[a:b])
            continue
        out.append(_PARAM.sub(lambda m: literal(int(m.group(1))), sql[a:b]))
    return "".join(out)


def quote_ident(name: str) -> str:
    """A DuckDB identifier in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def sql_dir() -> Path:
    """The project's ``sql/`` directory (repo checkout / editable install, or a wheel's data files)."""
    here = Path(__file__).resolve().parent.parent / "sql"
    if here.is_dir():
        return here
    return Path(sys.prefix) / "share" / "dpsql" / "sql"


def read_sql(name: str) -> str:
    """The text of ``sql/<name>``."""
    return (sql_dir() / name).read_text(encoding="utf-8")


def script(name: str) -> list[str]:
    """``sql/<name>`` split into its statements (by :func:`split_statements`), comments blanked out."""
    return [strip_comments(s).strip() for s in split_statements(read_sql(name))]
