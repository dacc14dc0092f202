"""Rewrite: a CTE holding dp_* aggregates is ``MATERIALIZED``, so it is evaluated (and noised) once.

A CTE referenced twice could otherwise be inlined twice: two independent noisy releases charged as one.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog
>>> q = "WITH n AS NOT MATERIALIZED (SELECT dp_count(x, epsilon := 1) AS c FROM t) SELECT a.c FROM n a, n b"
>>> ctx = Context("", Catalog({}), tree=sqlglot.parse_one(q, read="duckdb"))
>>> rewrite_materialize(ctx); ctx.tree.sql("duckdb")[:24]
'WITH n AS MATERIALIZED ('
"""

from __future__ import annotations

from sqlglot import exp

from .context import Context, dp_name


def rewrite_materialize(ctx: Context) -> None:
    """Force materialization of every CTE whose body calls a dp_* aggregate."""
    for cte in ctx.tree.find_all(exp.CTE):
        if any(dp_name(n) for n in cte.this.find_all(exp.Anonymous)):
            cte.set("materialized", True)
