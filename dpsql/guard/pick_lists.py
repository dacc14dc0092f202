"""Pass: pick-lists of columns with declared public keys are answered from the keys (issue 19).

BI tools fill filter pick-lists with ``SELECT DISTINCT carrier FROM flights`` or Superset's
``SELECT carrier FROM main.flights GROUP BY carrier ORDER BY carrier LIMIT 1000``.  When every selected
column of the one protected table has a declared public domain (``admin.public_keys``), the answer is that
domain, not the data: the table is replaced by the cross product of the selected columns' declared keys,
and the analyst's DISTINCT / GROUP BY, WHERE, ORDER BY, LIMIT and OFFSET run over it.  Nothing protected is
read, nothing is charged.  If the declared domain and the data differ, the answer is the declared domain:
a key with no rows still appears, a value not declared (NULL included) does not.

The shape is narrow, and anything else goes on to the other passes (which refuse DISTINCT or GROUP BY
without dp_* over protected rows, E050):

* one SELECT (no CTE, set operation or subquery anywhere) from one protected table, no join;
* DISTINCT (not DISTINCT ON) or GROUP BY exactly the selected columns; no aggregate, window, HAVING,
  QUALIFY or sample;
* the select list is columns of that table, each with declared keys and none the privacy unit (aliases
  allowed, no ``*``, no expressions);
* WHERE, GROUP BY and ORDER BY name only those selected columns (or output aliases and positions): a
  filter on any other column would select keys by the data, so it is refused.

>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> import sqlglot
>>> f = TableInfo("flights", "protected", {"carrier": "VARCHAR", "x": "DOUBLE"}, public_keys={"carrier": ("AA", "DL")})
>>> tree = sqlglot.parse_one("SELECT DISTINCT carrier FROM flights")
>>> pick_list(tree, Catalog({"flights": f}))
PickList(info=TableInfo(name='flights', ...), columns=('carrier',), alias='flights')
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .catalog import Catalog, TableInfo
from .context import PREFIX, dp_name
from .groups import _domain_values


def _key_columns(select: exp.Select, info: TableInfo, alias: str) -> dict[str, str] | None:
    """``{output name: table column}`` of a select list made only of declared-key columns, else None."""
    declared = {c.lower() for c in info.public_keys}
    unit = (info.privacy_unit or "").lower()
    columns = {c.lower(): c for c in info.columns}
    out: dict[str, str] = {}
    for item in select.expressions:
        col = item.unalias()
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star) or col.args.get("db"):
            return None
        name = col.name.lower()
        if col.table and col.table.lower() != alias.lower():
            return None
        if name not in declared or name == unit or name not in columns:
            return None
        out[item.alias_or_name.lower()] = columns[name]
    return out


def _only_keys(node: exp.Expression | None, keys: set[str], aliases: set[str], alias: str) -> bool:
    """Whether every column under ``node`` is a selected key column (or, if ``aliases``, an output alias)."""
    if node is None:
        return True
    for col in node.find_all(exp.Column):
        if isinstance(col.this, exp.Star) or (col.table and col.table.lower() != alias.lower()):
            return False
        if col.name.lower() not in keys and (col.table or col.name.lower() not in aliases):
            return False
    return True


def _group_matches(select: exp.Select, names: dict[str, str], keys: set[str]) -> bool:
    """GROUP BY lists exactly the selected columns (by name, output alias or position)."""
    group = select.args["group"]
    if group.args.get("all"):
        return True
    grouped: set[str] = set()
    items = select.expressions
    for g in group.expressions:
        if isinstance(g, exp.Literal) and not g.is_string and str(g.this).isdigit() and 1 <= int(g.this) <= len(items):
            g = items[int(g.this) - 1].unalias()
        if not isinstance(g, exp.Column):
            return False
        name = g.name.lower()
        if name in keys:
            grouped.add(name)
        elif name in names and not g.table:
            grouped.add(names[name].lower())
        else:
            return False
    return grouped == keys


def _domain(info: TableInfo, columns: list[str], alias: str) -> exp.Subquery:
    """``(SELECT d0.k AS c0, ... FROM (keys of c0) AS d0 CROSS JOIN ...) AS alias``."""
    declared = {c.lower(): v for c, v in info.public_keys.items()}
    sel = exp.Select()
    for j, c in enumerate(columns):
        dom = exp.Subquery(this=_domain_values(tuple(declared[c.lower()]), info.columns[c]),
                           alias=exp.TableAlias(this=exp.to_identifier(f"{PREFIX}_d{j}")))
        sel = sel.select(exp.alias_(exp.column(f"{PREFIX}_k", table=f"{PREFIX}_d{j}", quoted=True), c, quoted=True),
                         copy=False)
        if j == 0:
            sel.set("from_", exp.From(this=dom))
        else:
            sel.append("joins", exp.Join(this=dom, kind="CROSS"))
    return exp.Subquery(this=sel, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))


@dataclass(frozen=True)
class PickList:
    """A public-key pick-list: the protected table it reads, the selected key columns, the table's alias."""

    info: TableInfo
    columns: tuple[str, ...]
    alias: str


def pick_list(tree: exp.Expression, catalog: Catalog) -> PickList | None:
    """The pick-list ``tree`` is (see the module's rules), or None."""
    select = tree
    if not isinstance(select, exp.Select) or select.args.get("with") or select.args.get("joins"):
        return None
    source = select.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    info = catalog.get(table.name)
    if info is None or not info.protected or not info.public_keys:
        return None
    alias_node = table.args.get("alias")
    if alias_node is not None and alias_node.columns:  # renamed columns: names would no longer mean the keys
        return None
    distinct, group = select.args.get("distinct"), select.args.get("group")
    if (distinct is None) == (group is None) or (distinct is not None and distinct.args.get("on") is not None):
        return None
    if any(select.args.get(a) is not None for a in ("having", "qualify", "sample")) or table.args.get("sample"):
        return None
    for node in select.walk():
        if node is not select and isinstance(node, exp.Query | exp.Subquery | exp.Window | exp.AggFunc | exp.Star):
            return None
        if dp_name(node):
            return None
    alias = table.alias_or_name
    names = _key_columns(select, info, alias)
    if not names:
        return None
    keys = {c.lower() for c in names.values()}
    aliases = set(names)
    if not _only_keys(select.args.get("where"), keys, set(), alias):
        return None
    if group is not None and not (_only_keys(group, keys, aliases, alias) and _group_matches(select, names, keys)):
        return None
    if not _only_keys(select.args.get("order"), keys, aliases, alias):
        return None
    return PickList(info, tuple(dict.fromkeys(names.values())), alias)


def answer_pick_list(tree: exp.Expression, facts: PickList) -> exp.Expression:
    """A copy of ``tree`` whose protected table is replaced by the cross product of the declared keys."""
    tree = tree.copy()
    tree.args["from_"].this.replace(_domain(facts.info, list(facts.columns), facts.alias))
    return tree
