"""Rewrite: contribution bounding just before each dp_* aggregation over protected rows.

The aggregation's FROM, joins and WHERE move into a subquery that projects the dp_* arguments
(``_dpsql_a<i>``), the group keys (``_dpsql_k<j>``) and the privacy unit (``_dpsql_u``), then keeps, per
unit, at most ``max_groups_per_unit`` groups and per (unit, group) at most ``max_rows_per_unit`` rows,
chosen at random.  Rows whose unit is NULL are dropped.  The aggregation then reads only
``_dpsql_b``.  One unit therefore changes at most k rows in each of at most g groups, which is what the
cost multiplier k * g (k without GROUP BY) pays for.

Randomness: the executor connection must provide a scalar ``_dpsql_rand()`` returning a random BIGINT
per row drawn from the OS CSPRNG (``dpsql.noise.system_rng``; registered by ``dpsql.executor``).  The guard
registers nothing itself, and DuckDB's own ``random()`` is never used.

>>> sql = bounded_relation_sql(3, 1, 0)
>>> sql[:80]
'SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY _dpsql_u ORDER BY _dpsq'
>>> sql[-20:]
'WHERE _dpsql_rn <= 3'
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from ..surface import CI_SUFFIX, plain_function
from .context import PREFIX, dp_name, editable
from .facts import Facts, Site
from .groups import _same
from .totality import total_expression

B = f"{PREFIX}_b"


def bounded_relation_sql(max_rows: int, max_groups: int, n_keys: int) -> str:
    """The fixed scaffolding of the bounding subquery (``(SELECT 1) AS _dpsql_i0`` is replaced by the
    analyst's relation).  Only generated identifiers and integers appear in it."""
    keys = "".join(f", {PREFIX}_k{j}" for j in range(n_keys))
    part = f"PARTITION BY {PREFIX}_u{keys}"
    gr = f", min({PREFIX}_r) OVER ({part}) AS {PREFIX}_gr" if n_keys else ""
    gn = (f", dense_rank() OVER (PARTITION BY {PREFIX}_u ORDER BY {PREFIX}_gr{keys}) AS {PREFIX}_gn"
          if n_keys else "")
    cond = f" AND {PREFIX}_gn <= {int(max_groups)}" if n_keys else ""
    sql = (f"SELECT * FROM (SELECT *, row_number() OVER ({part} ORDER BY {PREFIX}_r) AS {PREFIX}_rn{gn} "
           f"FROM (SELECT *{gr} FROM (SELECT 1) AS {PREFIX}_i0) AS {PREFIX}_i1) AS {PREFIX}_i2 "
           f"WHERE {PREFIX}_rn <= {int(max_rows)}{cond}")
    return sqlglot.parse_one(sql, read="duckdb").sql("duckdb")


def _replace_keys(expr: exp.Expression, srcs, keys: list, refs: list) -> exp.Expression:
    """Replace occurrences of group keys (outside dp_* calls) by their bounded columns."""
    def walk(node: exp.Expression) -> exp.Expression:
        if dp_name(node):
            return node
        for j, k in enumerate(keys):
            if _same(srcs, node, k):
                return refs[j].copy()
        for child in list(node.iter_expressions()):
            new = walk(child)
            if new is not child:
                child.replace(new)
        return node
    return walk(expr)


def _value(call: exp.Anonymous) -> exp.Expression | None:
    """The value argument of a dp_* call, or None for ``dp_count(*)`` / ``dp_count_star()``."""
    first = call.expressions[0] if call.expressions else None
    if first is None or isinstance(first, exp.Star | exp.PropertyEQ | exp.Kwarg):
        return None
    return first


def count_star(call: exp.Anonymous) -> None:
    """``dp_count(*, ...)`` -> ``dp_count_star(...)``, and ``dp_count_ci(*, ...)`` -> ``dp_count_star_ci(...)``
    (DuckDB macros take no ``*``)."""
    fn = dp_name(call)
    if fn in ("dp_count", "dp_count" + CI_SUFFIX) and call.expressions and isinstance(call.expressions[0], exp.Star):
        named = [a.copy() for a in call.expressions[1:]]
        call.replace(exp.Anonymous(this=fn.replace("dp_count", "dp_count_star", 1), expressions=named))


def output_name(item: exp.Expression) -> str:
    """The column name DuckDB would give a select item (approximately, for unaliased expressions)."""
    if isinstance(item, exp.Alias | exp.Column):
        return item.alias_or_name
    return item.sql("duckdb", normalize_functions="lower")


def bound(facts: Facts, site: Site, find: Callable[[exp.Expression], exp.Expression]) -> None:
    """Bound the aggregation ``site`` in the tree being rewritten (``find`` maps the analysed tree's nodes to
    it)."""
    agg = facts.grouping(site)
    select = find(site.select)
    srcs = facts.lineage.sources[id(site.select)]
    calls = [c for c in facts.calls_of(site) if c.purpose == "release"]
    names = [output_name(item) for item in select.expressions]
    # 1. the analyst's relation, projecting only what the aggregation needs (each expression once:
    #    DuckDB 2.0 fails internally on duplicate projections next to a rowid unit)
    inner = exp.Select()
    projected: dict[str, str] = {}

    def project(expr: exp.Expression, name: str) -> str:
        nonlocal inner
        text = expr.sql("duckdb")
        if text not in projected:
            projected[text] = name
            inner = inner.select(exp.alias_(total_expression(expr.copy()), name, quoted=True), copy=False)
        return projected[text]

    key_cols = [project(key, f"{PREFIX}_k{j}") for j, key in enumerate(agg.keys)]
    arg_cols = []
    for i, call in enumerate(calls):
        arg = _value(find(call.node))
        arg_cols.append(f"{PREFIX}_one" if arg is None else project(arg, f"{PREFIX}_a{i}"))
    inner = inner.select(
        exp.alias_(agg.unit.copy(), f"{PREFIX}_u", quoted=True),
        exp.alias_(exp.Anonymous(this=f"{PREFIX}_rand"), f"{PREFIX}_r", quoted=True),
        exp.alias_(exp.Literal.number(1), f"{PREFIX}_one", quoted=True),
        copy=False,
    )
    inner.set("from_", select.args["from_"].copy())
    if select.args.get("joins"):
        inner.set("joins", [j.copy() for j in select.args["joins"]])
    cond = exp.Not(this=exp.Is(this=agg.unit.copy(), expression=exp.Null()))
    where = select.args.get("where")
    inner.set("where", exp.Where(this=exp.and_(exp.paren(where.this.copy()), cond) if where else cond))
    # 2. the bounding scaffolding around it
    bounded = sqlglot.parse_one(bounded_relation_sql(agg.max_rows, agg.max_groups, len(agg.keys)), read="duckdb")
    slot = next(s for s in bounded.find_all(exp.Subquery) if s.alias == f"{PREFIX}_i0")
    slot.set("this", inner)
    # 3. dp_* calls read the bounded argument columns (dp_count(*) counts bounded rows)
    for call, col in zip(calls, arg_cols, strict=True):
        node = find(call.node)
        named = [a.copy() for a in node.expressions if isinstance(a, exp.PropertyEQ | exp.Kwarg)]
        rest = [a.copy() for a in node.expressions if not isinstance(a, exp.PropertyEQ | exp.Kwarg)][1:]
        name = str(node.name)
        if plain_function(call.function) == "dp_count_star":  # bounded rows are counted through the ones column
            name = call.function.replace("dp_count_star", "dp_count", 1)
        new = exp.Anonymous(this=name, expressions=[exp.column(col, table=B, quoted=True), *rest, *named])
        node.replace(new)
    # 4. group keys become the bounded key columns; output names are kept
    refs = [exp.column(c, table=B, quoted=True) for c in key_cols]
    items = []
    for item, name in zip(list(select.expressions), names, strict=True):
        body = item.this if isinstance(item, exp.Alias) else item
        body = _replace_keys(body.copy(), srcs, agg.keys, refs)
        items.append(exp.alias_(body, name, quoted=True))
    for arg in ("having", "order"):
        if select.args.get(arg) is not None:
            select.set(arg, _replace_keys(select.args[arg], srcs, agg.keys, refs))
    select.set("expressions", items)
    if agg.keys:
        select.set("group", exp.Group(expressions=[r.copy() for r in refs]))
    select.set("from_", exp.From(this=exp.Subquery(this=bounded, alias=exp.TableAlias(this=exp.to_identifier(B)))))
    select.set("joins", None)
    select.set("where", None)


def rewrite_bounding(tree: exp.Expression, facts: Facts) -> exp.Expression:
    """A copy of ``tree`` where contributions are bounded in every aggregation over protected rows (children
    first); elsewhere only ``dp_count(*)`` is spelled ``dp_count_star()``."""
    if not facts.lineage.aggregations:
        return tree
    tree, find = editable(tree)
    for site in facts.lineage.aggregations:
        if site.protected:
            bound(facts, site, find)
        else:
            for call in facts.calls_of(site):
                count_star(find(call.node))
    return tree
