"""Pass: group keys of a dp_* aggregation are public, and only dp outputs and keys reach its output.

A key is public when it is a column with a declared public domain (``public_keys``) or a column of a
public table; its domain is then known without reading protected data.  Other keys need the catalog's
delta > 0 (DP partition selection), else E030.  Grouping by the privacy unit is E032.  Outside dp_* calls
the select list may use only keys (E020), HAVING only keys and dp outputs (E022).

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> from dpsql.guard.relations import query_scopes
>>> from dpsql.guard.lineage import analyse_lineage
>>> v = TableInfo("v", "protected", {"uid": "INT", "k": "VARCHAR"}, privacy_unit="uid")
>>> tree = sqlglot.parse_one("SELECT k, dp_count(*) FROM v GROUP BY k")
>>> facts = Facts("", Catalog({"v": v}), tree, tuple(query_scopes(tree)))
>>> facts = facts.add("lineage", analyse_lineage(facts))
>>> try:
...     check_groups(facts)
... except Exception as e:
...     print(e.code)
DPSQL-E030
"""

from __future__ import annotations

from sqlglot import exp

from .context import PREFIX, dp_name, editable, refuse
from .facts import Facts, Grouping, Groups, frozen_map
from .lineage import Sources, is_unit, origin, resolve, unit_expression


def _domain_values(values: tuple, type_: str) -> exp.Expression:
    """``SELECT TRY_CAST(v AS type) AS _dpsql_k FROM (VALUES ...)`` for a declared domain."""
    name = f"{PREFIX}_k"
    try:
        dtype = exp.DataType.build(type_, dialect="duckdb")
    except Exception:  # noqa: BLE001 - an odd type string: leave the literal untyped
        dtype = None
    if not values:
        sel = exp.select(exp.alias_(exp.Null(), name, quoted=True)).where(exp.false())
        return sel
    rows = [exp.Tuple(expressions=[exp.convert(v)]) for v in values]
    vals = exp.Values(expressions=rows, alias=exp.TableAlias(this=exp.to_identifier(f"{PREFIX}_v"),
                                                             columns=[exp.to_identifier("v")]))
    col = exp.column("v", table=f"{PREFIX}_v")
    value = exp.TryCast(this=col, to=dtype) if dtype is not None else col
    return exp.select(exp.alias_(value, name, quoted=True)).from_(vals)


def _domain_public(srcs: Sources, alias: str, column: str) -> exp.Expression:
    """``SELECT DISTINCT col AS _dpsql_k FROM <public relation>``."""
    node, _, source = srcs[alias]
    if isinstance(node, exp.Values):  # an analyst's key list (issue 15): its own distinct literals
        rel = node.copy()
    elif isinstance(source, exp.Table):
        rel = exp.Table(this=exp.to_identifier(source.name))
    elif isinstance(node, exp.Table):  # a CTE reference
        rel = exp.Table(this=exp.to_identifier(node.name))
    else:
        rel = exp.Subquery(this=source.expression.copy(), alias=exp.TableAlias(this=exp.to_identifier(f"{PREFIX}_p")))
    col = exp.column(column, quoted=True)
    return exp.select(exp.alias_(col, f"{PREFIX}_k", quoted=True)).distinct().from_(rel)


def _keys(select: exp.Select, srcs: Sources) -> list[exp.Expression]:
    group = select.args.get("group")
    if group is None:
        return []
    items = select.expressions
    aliases = {p.alias.lower(): p.this for p in items if isinstance(p, exp.Alias)}
    if group.args.get("all"):
        return [p.unalias() for p in items if not any(dp_name(n) for n in p.walk()) and p.find(exp.Column)]
    keys = []
    for k in group.expressions:
        if isinstance(k, exp.Literal) and not k.is_string:
            i = int(k.this) if k.this.isdigit() else 0
            if not 1 <= i <= len(items):
                raise refuse("030", "GROUP BY position out of range")
            k = items[i - 1].unalias()
        elif isinstance(k, exp.Column) and not k.table and resolve(srcs, k) is None and k.name.lower() in aliases:
            k = aliases[k.name.lower()]
        if any(dp_name(n) for n in k.walk()):
            raise refuse("012", "dp_* aggregates may not be group keys")
        keys.append(k)
    return keys


def _same(srcs: Sources, a: exp.Expression, b: exp.Expression) -> bool:
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        ra, rb = resolve(srcs, a), resolve(srcs, b)
        return ra is not None and ra == rb
    return a == b


def _check_output(srcs: Sources, expr: exp.Expression, keys: list, aliases: set, code: str, what: str) -> None:
    """Outside dp_* calls and key occurrences, ``expr`` may hold only literals and output aliases."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if dp_name(node) or any(_same(srcs, node, k) for k in keys):
            continue
        if isinstance(node, exp.Star):
            raise refuse("020", "SELECT * is not allowed in a dp_* aggregation")
        if isinstance(node, exp.Column):
            if node.table or resolve(srcs, node) is not None or node.name.lower() not in aliases:
                raise refuse(code, f"{what} may use only dp_* outputs and public group keys")
        stack.extend(node.iter_expressions())


def _analyse(facts: Facts, select: exp.Select, added: dict) -> Grouping:
    lineage = facts.lineage
    srcs = lineage.sources[id(select)]
    keys = _keys(select, srcs)
    domains: list[exp.Expression | None] = []
    for key in keys:
        refs = [resolve(srcs, c) for c in key.find_all(exp.Column)]
        if isinstance(key, exp.Column) and is_unit(srcs, refs[0]):
            raise refuse("032", "grouping by the privacy unit is not allowed")
        if any(is_unit(srcs, r) for r in refs):
            raise refuse("032", "group keys may not be computed from the privacy unit")
        domain = None
        if isinstance(key, exp.Column) and refs[0] is not None:
            alias, col = refs[0]
            info = srcs[alias][1]
            org = origin(srcs, refs[0])
            if info.kind == "protected" and org is not None:
                ti, c = org
                declared = {k.lower(): v for k, v in ti.public_keys.items()}
                if c.lower() in declared:
                    domain = _domain_values(tuple(declared[c.lower()]), ti.columns.get(c, "VARCHAR"))
            elif info.kind == "public":
                domain = _domain_public(srcs, alias, col)
        domains.append(domain)
    selection = False
    if any(d is None for d in domains):
        if not facts.catalog.delta > 0:
            raise refuse("030", "group keys must have a declared public domain (or use a delta budget)")
        selection = True
    aliases = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}
    for item in select.expressions:
        _check_output(srcs, item.unalias(), keys, aliases, "020", "the select list")
    if select.args.get("having") is not None:
        _check_output(srcs, select.args["having"].this, keys, aliases, "022", "HAVING")
    if select.args.get("order") is not None:
        _check_output(srcs, select.args["order"], keys, aliases, "020", "ORDER BY")
    first = next(k for k, (_, i, _) in srcs.items() if i.kind == "protected")
    unit = unit_expression(lineage, srcs, first, added)
    tables = [t for _, i, _ in srcs.values() for t in i.tables]
    max_rows = max(t.max_rows_per_unit for t in tables)
    max_groups = max(t.max_groups_per_unit for t in tables)
    if max_rows < 1 or max_groups < 1:
        raise refuse("060", "contribution bounds in the catalog must be at least 1")
    return Grouping(tuple(keys), tuple(domains), unit, max_rows, max_groups, selection)


def check_groups(facts: Facts) -> Groups:
    """Resolve keys, domains and contribution bounds of every aggregation over protected data."""
    added: dict = {}
    found = {id(site.select): _analyse(facts, site.select, added) for site in facts.lineage.aggregations
             if site.protected}
    return Groups(frozen_map(found), tuple(added.values()))


def rewrite_units(tree: exp.Expression, facts: Facts) -> exp.Expression:
    """A copy of ``tree`` where each subquery the bounding reads a privacy unit from, and that does not select
    the unit itself, selects it as ``_dpsql_unit`` (``lineage.unit_expression``)."""
    if not facts.groups.units:
        return tree  # nothing to add (a pure rewrite may return its input)
    tree, find = editable(tree)
    for select, item in facts.groups.units:
        find(select).select(item.copy(), copy=False)
    return tree
