"""Policy metadata: what is protected, how, and which keys are public (DDL in ``sql/policy.sql``).

The metadata lives in the protected database itself, in schema ``dpsql``.  Only the admin writes it
(:mod:`dpsql.administration`); guarded sessions read it through the executor's read-only connection and turn it
into the guard's :class:`~dpsql.guard.catalog.Catalog`.  Column names and types come from DuckDB's
schema (``duckdb_columns``), never from its statistics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .sqltext import quote_ident, script

if TYPE_CHECKING:
    import duckdb

    from .guard.catalog import Catalog, TableInfo

__all__ = [
    "SCHEMA_VERSION",
    "ensure_schema",
    "dataset_id",
    "load_tables",
    "has_policy_table",
    "plain_aggregate_epsilon",
    "build_catalog",
]

SCHEMA_VERSION = "1"


def ensure_schema(con: duckdb.DuckDBPyConnection) -> str:
    """Create the ``dpsql`` schema if needed and return the dataset id (created once, a UUID)."""
    for stmt in script("policy.sql"):
        con.execute(stmt)
    row = con.execute("SELECT value FROM dpsql.meta WHERE key = 'dataset_id'").fetchone()
    if row is None:
        con.execute("INSERT INTO dpsql.meta VALUES ('dataset_id', ?), ('schema_version', ?)",
                    [str(uuid.uuid4()), SCHEMA_VERSION])
        row = con.execute("SELECT value FROM dpsql.meta WHERE key = 'dataset_id'").fetchone()
    return str(row[0])


def _has_schema(con: duckdb.DuckDBPyConnection, catalog: str | None) -> bool:
    where = "schema_name = 'dpsql'" + (" AND database_name = ?" if catalog else "")
    params = [catalog] if catalog else []
    return con.execute(f"SELECT count(*) FROM duckdb_schemas() WHERE {where}", params).fetchone()[0] > 0


def _prefix(catalog: str | None) -> str:
    return f"{quote_ident(catalog)}.dpsql" if catalog else "dpsql"


def dataset_id(con: duckdb.DuckDBPyConnection, catalog: str | None = None) -> str | None:
    """The dataset id recorded in the data file, or None if it has no dpsql metadata."""
    if not _has_schema(con, catalog):
        return None
    row = con.execute(f"SELECT value FROM {_prefix(catalog)}.meta WHERE key = 'dataset_id'").fetchone()
    return None if row is None else str(row[0])


def table_columns(con: duckdb.DuckDBPyConnection, table: str, catalog: str | None = None) -> dict[str, str]:
    """``{column: duckdb type}`` of ``main.<table>`` in declaration order (schema only, no statistics)."""
    sql = ("SELECT column_name, data_type FROM duckdb_columns() "
           "WHERE schema_name = 'main' AND lower(table_name) = lower(?)"
           + (" AND database_name = ?" if catalog else "") + " ORDER BY column_index")
    rows = con.execute(sql, [table, catalog] if catalog else [table]).fetchall()
    return {str(name): str(typ) for name, typ in rows}


def _typed_keys(con: duckdb.DuckDBPyConnection, values: list[str], typ: str) -> tuple[Any, ...]:
    if not values:
        return ()
    rows = con.execute(f"SELECT CAST(v AS {typ}) FROM unnest(CAST(? AS VARCHAR[])) WITH ORDINALITY AS u(v, i) "
                       "ORDER BY i", [values]).fetchall()
    return tuple(r[0] for r in rows)


def load_tables(con: duckdb.DuckDBPyConnection, catalog: str | None = None,
                measure: Callable[[str, str], int] | None = None) -> dict[str, TableInfo]:
    """All protected and public tables declared in the metadata, as the guard's ``TableInfo``.

    Tables declared but since dropped from the database are left out (the guard then refuses them).
    A public table's per-column multiplicities are measured here, or, given ``measure(table, column)``,
    only when the guard first asks for one (a session: a login does not scan public tables)."""
    from .guard.catalog import TableInfo

    if not _has_schema(con, catalog):
        return {}
    p = _prefix(catalog)
    keys: dict[tuple[str, str], list[str]] = {}
    for table, column, value in con.execute(
            f"SELECT table_name, column_name, key_value FROM {p}.public_keys ORDER BY 1, 2, ordinal").fetchall():
        keys.setdefault((table, column), []).append(value)
    out: dict[str, TableInfo] = {}
    protected = con.execute(f"SELECT table_name, privacy_unit, max_rows_per_unit, max_groups_per_unit "
                            f"FROM {p}.protected_tables ORDER BY table_name").fetchall()
    for name, unit, max_rows, max_groups in protected:
        cols = table_columns(con, name, catalog)
        if not cols:
            continue
        pk = {c: _typed_keys(con, v, cols[c]) for (t, c), v in keys.items() if t == name and c in cols}
        out[name.lower()] = TableInfo(name=name, kind="protected", columns=cols, privacy_unit=unit,
                              max_rows_per_unit=int(max_rows), max_groups_per_unit=int(max_groups), public_keys=pk)
    for (name,) in con.execute(f"SELECT table_name FROM {p}.public_tables ORDER BY table_name").fetchall():
        cols = table_columns(con, name, catalog)
        if not cols or name.lower() in out:
            continue
        rows, mult = _public_stats(con, name, list(cols), catalog, measure)
        out[name.lower()] = TableInfo(name=name, kind="public", columns=cols, privacy_unit=None,
                              max_rows_per_unit=1, max_groups_per_unit=1, public_keys={}, rows=rows,
                              multiplicity=mult)
    return out


#: public tables above this many rows get a row count but no per-column multiplicities (joins to them
#: then need a small public side or are refused, E043)
STATS_MAX_ROWS = 10_000_000


def _table_ref(name: str, catalog: str | None) -> str:
    return f"{quote_ident(catalog)}.main.{quote_ident(name)}" if catalog else f"main.{quote_ident(name)}"


def _multiplicity_sql(t: str, column: str) -> str:
    return f"(SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM {t} GROUP BY {quote_ident(column)}))"


def max_multiplicity(con: duckdb.DuckDBPyConnection, name: str, column: str, catalog: str | None = None) -> int:
    """The largest number of rows of public table ``name`` sharing one value of ``column``."""
    return int(con.execute("SELECT " + _multiplicity_sql(_table_ref(name, catalog), column)).fetchall()[0][0])


class LazyMultiplicity(Mapping[str, int]):
    """``{column: largest multiplicity}`` of one public table, each measured on first access and kept."""

    def __init__(self, columns: list[str], measure: Callable[[str], int]) -> None:
        self._columns, self._measure, self._known = list(columns), measure, {}

    def __getitem__(self, column: str) -> int:
        if column not in self._columns:
            raise KeyError(column)
        if column not in self._known:
            self._known[column] = int(self._measure(column))
        return self._known[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


def _public_stats(con: duckdb.DuckDBPyConnection, name: str, cols: list[str], catalog: str | None,
                  measure: Callable[[str, str], int] | None) -> tuple[int, Mapping[str, int]]:
    """Row count and per-column largest multiplicity of a public table (public data: reading it is free)."""
    t = _table_ref(name, catalog)
    rows = int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
    if rows > STATS_MAX_ROWS or not cols:
        return rows, {}
    if measure is not None:
        return rows, LazyMultiplicity(cols, lambda c: measure(name, c))
    vals = con.execute("SELECT " + ", ".join(_multiplicity_sql(t, c) for c in cols)).fetchall()[0]
    return rows, {c: int(v) for c, v in zip(cols, vals, strict=True)}


def has_policy_table(con: duckdb.DuckDBPyConnection, table: str, catalog: str | None = None) -> bool:
    """Whether ``dpsql.<table>`` exists (a data file written by an older dpsql may lack newer tables)."""
    where = "schema_name = 'dpsql' AND table_name = ?" + (" AND database_name = ?" if catalog else "")
    params = [table, catalog] if catalog else [table]
    return con.execute(f"SELECT count(*) FROM duckdb_tables() WHERE {where}", params).fetchone()[0] > 0


def plain_aggregate_epsilon(con: duckdb.DuckDBPyConnection, principal: str, catalog: str | None = None) -> str | None:
    """The data owner's opt-in for ``principal``: the epsilon per call (decimal text) that plain COUNT/SUM/AVG
    over protected rows are rewritten with, or None (they are refused)."""
    if not has_policy_table(con, "plain_aggregates", catalog):
        return None
    row = con.execute(f"SELECT epsilon FROM {_prefix(catalog)}.plain_aggregates WHERE principal = ?",
                      [principal]).fetchone()
    return None if row is None else str(row[0])


def build_catalog(tables: dict[str, TableInfo], accounting: str = "pure", delta: Decimal | float = 0,
                  max_query_epsilon: Decimal | float | None = None,
                  plain_aggregate_epsilon: str | None = None) -> Catalog:
    """The guard's catalog for one principal's budget (and its opt-in for plain aggregates, if any)."""
    from .guard.catalog import Catalog

    cap = None if max_query_epsilon is None else float(max_query_epsilon)
    return Catalog(tables=tables, accounting=accounting, delta=float(delta), max_query_epsilon=cap,
                   plain_aggregate_epsilon=plain_aggregate_epsilon)
