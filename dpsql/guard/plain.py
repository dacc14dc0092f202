"""Pass: the data owner's opt-in maps plain aggregates over protected rows to dp_* calls (issue 19).

BI tools write ``COUNT(*)``, ``SUM(x)``, ``AVG(x)``.  Without an opt-in they stay refused (E021, whose
message names the dp_* form: :func:`dp_alternative`).  With ``Catalog.plain_aggregate_epsilon`` set for
the principal (``admin.plain_aggregates(principal, epsilon=...)``), each of them in a SELECT that reads
protected rows is rewritten before the analysis:

==============  =========================================
``COUNT(*)``    ``dp_count_star(epsilon := e)``
``COUNT(x)``    ``dp_count(x, epsilon := e)``
``SUM(x)``      ``dp_sum(x, epsilon := e)``
``AVG(x)``      ``dp_mean(x, epsilon := e)``
==============  =========================================

(before the probe and pick-list passes too, so a probe reports the rewritten query's types), and the
rewritten query goes through every other pass like one the analyst wrote: its cost is computed
from the rewritten text (``e`` per call times the contribution bound) and charged visibly.  An unaliased
select item keeps the name written (``count(*)``).  ``ORDER BY COUNT(*)`` repeating a select item orders
by that item's position and ``HAVING AVG(x) > 5`` by its alias, so the value is released (and charged)
once.  ``COUNT(DISTINCT x)``, MIN, MAX, windowed aggregates and the like are left alone (refused).  A
per-unit aggregation (``GROUP BY uid``, issue 15) keeps its plain aggregates; the aggregate around it is
rewritten.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> v = TableInfo("v", "protected", {"uid": "INT", "x": "DOUBLE"}, privacy_unit="uid")
>>> tree = sqlglot.parse_one("SELECT avg(x) AS m FROM v", read="duckdb")
>>> rewrite_plain_aggregates(tree, Catalog({"v": v}, plain_aggregate_epsilon="0.1")).sql("duckdb")
'SELECT DP_MEAN(x, epsilon := 0.1) AS "m" FROM v'
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from .catalog import Catalog
from .context import dp_name, own_nodes
from .relations import query_scopes
from .syntax import group_keys

#: plain aggregate -> its dp_* form (COUNT(*) is dp_count_star)
DP_FORMS: dict[type[exp.Expression], str] = {exp.Count: "dp_count", exp.Sum: "dp_sum", exp.Avg: "dp_mean"}
#: the dp_* alternatives named by refusals (E021) of other plain aggregates
_ALTERNATIVES: dict[type[exp.Expression], str] = {
    exp.Median: "dp_median({x}, epsilon := ...)",
    exp.Stddev: "dp_stddev({x}, epsilon := ...)", exp.StddevSamp: "dp_stddev({x}, epsilon := ...)",
    exp.StddevPop: "dp_stddev({x}, epsilon := ...)", exp.Variance: "dp_var({x}, epsilon := ...)",
    exp.VariancePop: "dp_var({x}, epsilon := ...)",
    exp.Min: "a low quantile, e.g. dp_quantile({x}, 0.05, epsilon := ...)",
    exp.Max: "a high quantile, e.g. dp_quantile({x}, 0.95, epsilon := ...)",
}


def _argument(node: exp.Expression) -> exp.Expression | None:
    """The one plain argument of COUNT/SUM/AVG (a Star for ``COUNT(*)``), or None (DISTINCT, extra options)."""
    arg = node.this
    extra = [k for k, v in node.args.items() if k not in ("this", "big_int") and v not in (None, False, [])]
    if arg is None or extra or isinstance(arg, exp.Distinct):
        return None
    return arg


def dp_alternative(node: exp.Expression) -> str:
    """What a refusal of plain aggregate ``node`` suggests instead, e.g. ``dp_mean(cost, epsilon := ...)``
    (the argument is the query's own text, shortened)."""
    arg = node.this
    text = "x" if arg is None else arg.sql("duckdb")
    x = text if len(text) <= 40 else "x"
    if type(node) in DP_FORMS:
        if isinstance(arg, exp.Distinct):
            return "dp_count over a GROUP BY of a column with declared public keys (COUNT(DISTINCT) has no dp_* form)"
        fn = DP_FORMS[type(node)]
        form = f"{fn}(*, epsilon := ...)" if isinstance(arg, exp.Star) else f"{fn}({x}, epsilon := ...)"
        return form + " (or ask the data owner to map plain aggregates: dpsql admin plain-aggregates)"
    template = _ALTERNATIVES.get(type(node))
    return template.format(x=x) if template else "a dp_* aggregate"


def _dp_call(node: exp.Expression, epsilon: str) -> exp.Expression | None:
    arg = _argument(node) if type(node) in DP_FORMS else None
    if arg is None or isinstance(node.parent, exp.Window):
        return None
    eps = exp.PropertyEQ(this=exp.to_identifier("epsilon"), expression=exp.Literal.number(epsilon))
    if isinstance(arg, exp.Star):
        return exp.Anonymous(this="dp_count_star", expressions=[eps])
    return exp.Anonymous(this=DP_FORMS[type(node)], expressions=[arg.copy(), eps])


def _rewrite(select: exp.Select, epsilon: str) -> None:
    """Rewrite the plain aggregates of one SELECT (not of the queries nested in it)."""
    repeated: dict[str, tuple[int, str]] = {}  # text of a select item's aggregate -> (position, alias)
    for i, item in enumerate(list(select.expressions)):
        body = item.unalias()
        call = _dp_call(body, epsilon) if type(body) in DP_FORMS else None
        if call is not None:
            name = item.alias if isinstance(item, exp.Alias) else body.sql("duckdb", normalize_functions="lower")
            repeated[body.sql("duckdb")] = (i + 1, name)
            item.replace(exp.alias_(call, name, quoted=True))
    for node in list(own_nodes(select)):
        if type(node) not in DP_FORMS or node.parent is None:
            continue
        seen = repeated.get(node.sql("duckdb"))
        if seen is not None and isinstance(node.parent, exp.Ordered) and node.find_ancestor(exp.Order):
            node.replace(exp.Literal.number(seen[0]))
        elif seen is not None and node.find_ancestor(exp.Having):
            node.replace(exp.column(seen[1], quoted=True))
        else:
            call = _dp_call(node, epsilon)
            if call is not None:
                node.replace(call)


def _per_unit(catalog: Catalog, select: exp.Select) -> bool:
    """Whether ``select`` looks like a per-unit aggregation (``guard.per_unit``: GROUP BY one column named like
    a privacy unit of the catalog).  Its plain aggregates are not rewritten (the lineage pass decides; if the
    column is not the unit they stay E021) and an aggregate around it is (``avg(total)`` -> ``dp_mean``)."""
    keys = group_keys(select)
    units = {t.privacy_unit.lower() for t in catalog.tables.values() if t.protected and t.privacy_unit}
    return len(keys) == 1 and isinstance(keys[0], exp.Column) and keys[0].name.lower() in units


def rewrite_plain_aggregates(tree: exp.Expression, catalog: Catalog) -> exp.Expression:
    """With the catalog's opt-in, a copy of ``tree`` where plain COUNT/SUM/AVG in every SELECT that reads
    protected rows are dp_* calls."""
    epsilon = catalog.plain_aggregate_epsilon
    if not epsilon:
        return tree
    tree = tree.copy()
    rows: dict[int, bool] = {}  # id(scope expression) -> it passes protected rows on, row by row
    for scope in query_scopes(tree):  # children first
        expr = scope.expression
        if not isinstance(expr, exp.Select):
            rows[id(expr)] = any(rows.get(id(s.expression), False) for s in scope.set_operation_scopes)
            continue
        reads = False
        for _, (_, source) in scope.selected_sources.items():
            if isinstance(source, exp.Table):
                info = catalog.get(source.name)
                reads = reads or bool(info and info.protected)
            elif isinstance(source, Scope):
                reads = reads or rows.get(id(source.expression), False)
        if reads and _per_unit(catalog, expr):  # issue 15: left to guard.per_unit; its rows stay protected rows
            rows[id(expr)] = True
            continue
        if reads:
            _rewrite(expr, epsilon)
        rows[id(expr)] = reads and not any(dp_name(n) or isinstance(n, exp.AggFunc) for n in own_nodes(expr))
    return tree
