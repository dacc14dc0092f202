"""Pass: every relation is a registered table of the main schema (E010); one privacy unit (E042).

An analysis that finds nothing but refusals; :func:`query_scopes` gives the query's scopes (sqlglot's own
scope machinery) to the later analyses.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog
>>> try:
...     check_relations(sqlglot.parse_one("SELECT * FROM duckdb_tables()", read="duckdb"), Catalog({}))
... except Exception as e:
...     print(e.code)
DPSQL-E010
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from .catalog import Catalog
from .context import refuse


def _check_table(catalog: Catalog, table: exp.Table) -> None:
    if not isinstance(table.this, exp.Identifier):
        raise refuse("010", "table functions are not allowed as relations")
    if table.args.get("catalog") is not None:
        raise refuse("010", "catalog-qualified relations are not allowed")
    db = table.args.get("db")
    if db is not None and str(db.name).lower() != "main":
        raise refuse("010", "only tables of the main schema are allowed")
    info = catalog.get(table.name)
    if info is None:
        raise refuse("010", f"relation {table.name!r} is not a registered table")


def query_scopes(tree: exp.Expression) -> list[Scope]:
    """The scopes of ``tree``, children first (E012 when sqlglot cannot resolve them)."""
    try:
        scopes = list(traverse_scope(tree))
    except (SqlglotError, RecursionError, KeyError, ValueError):
        raise refuse("012", "the query's relations could not be resolved") from None
    if not scopes:
        raise refuse("012", "the query's relations could not be resolved")
    return scopes


def check_relations(tree: exp.Expression, catalog: Catalog) -> None:
    """Refuse relations that are not registered tables, nested or lateral joins, and several privacy units."""
    for join in tree.find_all(exp.Join):
        if not isinstance(join.parent, exp.Select):
            raise refuse("040", "parenthesized (nested) joins are not allowed")
    for sub in tree.find_all(exp.Subquery):
        if not isinstance(sub.this, exp.Query):
            raise refuse("040", "parenthesized (nested) joins are not allowed")
    for node in tree.find_all(exp.From, exp.Join):
        item = node.this
        if isinstance(item, exp.Lateral):
            raise refuse("040", "LATERAL joins are not allowed")
        if isinstance(node, exp.Join) and str(node.args.get("kind") or "").upper() in ("SEMI", "ANTI"):
            raise refuse("040", "SEMI and ANTI joins are not allowed")
        if not isinstance(item, exp.Table | exp.Subquery | exp.Values):
            raise refuse("010", f"{item.key.upper()} is not allowed as a relation")
    scopes = query_scopes(tree)
    seen: set[int] = set()
    units: set[str] = set()
    for scope in scopes:
        for _name, (node, source) in scope.selected_sources.items():
            if isinstance(source, exp.Table):
                _check_table(catalog, source)
                info = catalog.get(source.name)
                if info.protected:
                    units.add(info.unit_identity())
                seen.add(id(source))
            elif isinstance(source, Scope) and isinstance(node, exp.Table):
                seen.add(id(node))  # a CTE reference
    for table in tree.find_all(exp.Table):
        if id(table) not in seen:
            raise refuse("010", f"relation {table.name!r} is not allowed here")
    if len(units) > 1:
        raise refuse("042", "the query reads tables with different privacy units")
