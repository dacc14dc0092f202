"""Pass 1: exactly one plain SELECT/WITH statement, according to sqlglot *and* DuckDB's own splitter.

>>> try:
...     parse_statement("SELECT 1; DROP TABLE t")
... except Exception as e:
...     print(e.code)
DPSQL-E002

DuckDB is imported when the pass runs, not with the guard: importing :mod:`dpsql.guard` loads neither DuckDB
nor Arrow (tests/test_surface.py), and DuckDB's parser is its only use of DuckDB.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..sqltext import strip_comments
from .context import refuse

MAX_SQL_LENGTH = 100_000


def _duckdb_types(sql: str) -> list[str]:
    """The statement types DuckDB's parser sees (it only parses; nothing is executed or read)."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        return [_type_name(s) for s in con.extract_statements(sql)]
    finally:
        con.close()


def _type_name(statement: object) -> str:
    """The statement's type name; a type DuckDB's Python enum does not know (e.g. ``CONNECT``, whose
    ``.type`` raises ValueError) is ``UNKNOWN``, which parse_statement refuses like any non-SELECT."""
    try:
        return str(statement.type).rsplit(".", 1)[-1].upper()
    except ValueError:
        return "UNKNOWN"


#: statements that ask DuckDB's catalog or statistics (refused, E003; the shell answers some from dpsql's metadata)
CATALOG_STATEMENTS = ("describe", "desc", "show", "summarize", "pragma")


def _metadata_hint(sql: str) -> str:
    """Where the schema is, for a refused catalog statement (DESCRIBE, SHOW, SUMMARIZE, PRAGMA): dpsql answers
    those from its own metadata, never from DuckDB's statistics of the data.  Depends on the text only."""
    words = strip_comments(sql).split(None, 1)
    if not words or words[0].lower() not in CATALOG_STATEMENTS:
        return ""
    return (" (table and column metadata: `.schema` / DESCRIBE t in `dpsql shell`, information_schema.columns "
            "through `dpsql serve`, Session.tables() in Python; summaries: dp_* aggregates)")


def _position(message: str) -> str:
    """DuckDB's parser diagnosis (its first line and the ``LINE n: ...`` excerpt with its caret): it quotes
    only the query text, never data, and says where the error is (issue 14)."""
    lines = message.splitlines()
    head = lines[0].split("Error: ", 1)[-1].strip() if lines else ""
    caret = [ln for ln in lines if ln.startswith("LINE ")]
    if not head:
        return ""
    out = f": {head}"
    if caret:
        i = lines.index(caret[0])
        out += "\n" + "\n".join(lines[i: i + 2])
    return out


def parse_statement(sql: str) -> exp.Expression:
    """The query's tree; refuse parse failures (E001), several statements (E002) and anything but a query
    (E003)."""
    import duckdb

    if not isinstance(sql, str) or not sql.strip():
        raise refuse("001", "empty query")
    if len(sql) > MAX_SQL_LENGTH:
        raise refuse("001", "query text too long")
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except SqlglotError:
        trees = None
    except RecursionError:
        raise refuse("001", "query nested too deeply") from None
    where = ""
    try:
        types = _duckdb_types(sql)
        n_duck = len(types)
    except duckdb.Error as exc:
        types, n_duck = [], None
        where = _position(str(exc))
    if (trees is not None and len(trees) > 1) or (n_duck is not None and n_duck > 1):
        raise refuse("002", "exactly one statement is allowed")
    if n_duck == 1 and types[0] != "SELECT":
        raise refuse("003", f"statement {types[0]} is not allowed; only SELECT queries are" + _metadata_hint(sql))
    if not trees or n_duck is None:
        raise refuse("001", "the query could not be parsed as DuckDB SQL" + where)
    if n_duck != 1:
        raise refuse("001", "the query could not be parsed as one DuckDB statement")
    tree = trees[0]
    if isinstance(tree, exp.Command):
        raise refuse("003", f"statement {str(tree.this).upper()!r} is not allowed" + _metadata_hint(sql))
    if not isinstance(tree, exp.Select | exp.Union | exp.Intersect | exp.Except):
        raise refuse("003", f"only SELECT or WITH ... SELECT queries are allowed, not {tree.key.upper()}"
                     + _metadata_hint(sql))
    return tree
