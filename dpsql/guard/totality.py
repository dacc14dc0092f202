"""Rewrite: row-level expressions over protected rows are made total with DuckDB's ``TRY(...)``.

A data-dependent runtime error (division by zero, overflow, a failed cast, ln(0)) would otherwise be a
one-bit oracle on a single row.  Under TRY it becomes NULL, and NULLs are dropped by the dp_* aggregates.
(Expression subqueries, which TRY cannot wrap, are already refused in queries over protected data.)

>>> import sqlglot
>>> e = sqlglot.parse_one("SELECT 1 WHERE x / y > 1").args["where"].this
>>> total_expression(e).sql("duckdb")
'TRY(x / y > 1)'
"""

from __future__ import annotations

from sqlglot import exp

from .context import Context, dp_name, own_nodes


def total_expression(expr: exp.Expression) -> exp.Expression:
    """``TRY(expr)`` unless ``expr`` cannot raise (a column, a literal) or is already wrapped."""
    if isinstance(expr, exp.Column | exp.Literal | exp.Null | exp.Boolean | exp.Star | exp.Try):
        return expr
    return exp.Try(this=expr)


def rewrite_totality(ctx: Context) -> None:
    """Wrap WHERE and ON conditions of every scope over protected data, and its row-level projections."""
    for select in ctx.private:
        where = select.args.get("where")
        if where is not None:
            where.set("this", total_expression(where.this))
        for join in select.args.get("joins") or []:
            if join.args.get("on") is not None:
                join.set("on", total_expression(join.args["on"]))
        if any(dp_name(n) for n in own_nodes(select)):
            continue  # a dp_* aggregation: its arguments and keys are wrapped by the bounding rewrite
        for proj in list(select.expressions):
            if isinstance(proj, exp.Alias):
                proj.set("this", total_expression(proj.this))
            elif not isinstance(proj, exp.Column | exp.Star):
                proj.replace(exp.Try(this=proj.copy()))
