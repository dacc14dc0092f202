"""Rewrite: row-level expressions over protected rows are made total with DuckDB's ``TRY(...)``.

A data-dependent runtime error (division by zero, overflow, a failed cast, ln(0)) would otherwise be a
one-bit oracle on a single row.  Under TRY it becomes NULL, and NULLs are dropped by the dp_* aggregates.
Expression subqueries, which TRY cannot wrap, are allowed over protected data only as public ``[NOT] IN`` /
``[NOT] EXISTS`` filters reached from WHERE through AND / OR / NOT (``lineage.check_filter_subquery``):
:func:`total_filter` wraps everything around them, and the left operand of IN, under TRY instead.

>>> import sqlglot
>>> e = sqlglot.parse_one("SELECT 1 WHERE x / y > 1").args["where"].this
>>> total_expression(e).sql("duckdb")
'TRY(x / y > 1)'
"""

from __future__ import annotations

from sqlglot import exp

from .catalog import Catalog
from .context import dp_name, editable, own_nodes
from .facts import Facts
from .joins import _conjuncts
from .lineage import Sources, column_type, is_numeric_type, per_unit_of


def _safe_equality(catalog: Catalog, srcs: Sources, cond: exp.Expression) -> bool:
    """``a = b`` between two table columns whose types compare without a runtime cast that can fail (the
    same type, or both numeric: DuckDB widens numbers losslessly or to DOUBLE, never raising).  Left
    outside TRY so DuckDB can plan a hash join; any other comparison (``VARCHAR = INTEGER`` casts the
    string at run time and raises on 'x') stays under TRY."""
    if not (isinstance(cond, exp.EQ) and isinstance(cond.left, exp.Column) and isinstance(cond.right, exp.Column)):
        return False
    a, b = column_type(catalog, srcs, cond.left), column_type(catalog, srcs, cond.right)
    if a is None or b is None:
        return False
    return a == b or (is_numeric_type(a) and is_numeric_type(b))


def total_condition(catalog: Catalog, srcs: Sources, cond: exp.Expression) -> exp.Expression:
    """A join condition made total conjunct by conjunct: safe column equalities stay bare (hash joins),
    the rest goes under TRY.  For filtering the two forms agree: ``TRY(a AND b)`` and ``TRY(a) AND TRY(b)``
    are both NULL or FALSE exactly when a row is dropped."""
    parts = [c if _safe_equality(catalog, srcs, c) else total_expression(c) for c in _conjuncts(cond)]
    out = parts[0]
    for p in parts[1:]:
        out = exp.And(this=out, expression=p)
    return out


def total_expression(expr: exp.Expression) -> exp.Expression:
    """``TRY(expr)`` unless ``expr`` cannot raise (a column, a literal) or is already wrapped."""
    if isinstance(expr, exp.Column | exp.Literal | exp.Null | exp.Boolean | exp.Star | exp.Try):
        return expr
    return exp.Try(this=expr)


def total_filter(expr: exp.Expression) -> exp.Expression:
    """A WHERE condition made total; around an expression subquery (a public filter) the connectives are
    kept and their other operands (and the left operand of IN) wrapped one by one.  Under WHERE a NULL drops
    the row like FALSE, so a raising operand still drops its row (or, under OR, lets the other side decide)."""
    if not expr.find(exp.Subquery, exp.Exists):
        return total_expression(expr)
    if isinstance(expr, exp.Paren):
        return exp.Paren(this=total_filter(expr.this))
    if isinstance(expr, exp.Not):
        return exp.Not(this=total_filter(expr.this))
    if isinstance(expr, exp.And | exp.Or):
        return type(expr)(this=total_filter(expr.this), expression=total_filter(expr.expression))
    if isinstance(expr, exp.In) and expr.args.get("query") is not None:
        left = expr.this
        items = left.expressions if isinstance(left, exp.Tuple) else [left]
        for item in list(items):
            item.replace(total_expression(item.copy()))
        return expr
    return expr  # EXISTS over public data: nothing of the protected row is evaluated


def rewrite_totality(tree: exp.Expression, facts: Facts) -> exp.Expression:
    """A copy of ``tree`` where the WHERE and ON conditions of every scope over protected data, and its row-level
    projections, are total."""
    if not facts.lineage.private:
        return tree
    tree, find = editable(tree)
    for analysed in facts.lineage.private:
        select = find(analysed)
        where = select.args.get("where")
        if where is not None:
            where.set("this", total_filter(where.this))
        srcs = facts.lineage.sources.get(id(analysed)) or {}
        for join in select.args.get("joins") or []:
            if join.args.get("on") is not None:
                join.set("on", total_condition(facts.catalog, srcs, join.args["on"]))
        if any(dp_name(n) for n in own_nodes(select)):
            continue  # a dp_* aggregation: its arguments and keys are wrapped by the bounding rewrite
        if per_unit_of(facts.lineage, analysed) is not None:
            continue  # a per-unit aggregation: TRY cannot hold an aggregate (guard.per_unit wraps it)
        for proj in list(select.expressions):
            if isinstance(proj, exp.Alias):
                proj.set("this", total_expression(proj.this))
            elif not isinstance(proj, exp.Column | exp.Star):
                proj.replace(exp.Try(this=proj.copy()))
    return tree
