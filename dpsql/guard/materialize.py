"""Rewrite: a CTE holding dp_* aggregates is ``MATERIALIZED``, so it is evaluated (and noised) once.

A CTE referenced twice could otherwise be inlined twice: two independent noisy releases charged as one.

>>> import sqlglot
>>> q = "WITH n AS NOT MATERIALIZED (SELECT dp_count(x, epsilon := 1) AS c FROM t) SELECT a.c FROM n a, n b"
>>> rewrite_materialize(sqlglot.parse_one(q, read="duckdb")).sql("duckdb")[:24]
'WITH n AS MATERIALIZED ('
"""

from __future__ import annotations

from sqlglot import exp

from .context import dp_name
from .facts import Facts


def rewrite_materialize(tree: exp.Expression, facts: Facts | None = None) -> exp.Expression:
    """A copy of ``tree`` where every CTE whose body calls a dp_* aggregate is materialized (no facts needed)."""
    if not any(any(dp_name(n) for n in cte.this.find_all(exp.Anonymous)) for cte in tree.find_all(exp.CTE)):
        return tree
    tree = tree.copy()
    for cte in tree.find_all(exp.CTE):
        if any(dp_name(n) for n in cte.this.find_all(exp.Anonymous)):
            cte.set("materialized", True)
    return tree
