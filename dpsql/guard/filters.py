"""Pass: ``dp_f(x) FILTER (WHERE c)`` becomes ``dp_f(CASE WHEN c THEN x END)``.

DuckDB macros do not accept FILTER; the dp_* aggregates drop NULLs, so both forms release the same
statistic.  ``dp_count(*)`` counts the rows where ``c`` holds.

>>> import sqlglot
>>> q = sqlglot.parse_one("SELECT dp_count(*) FILTER (WHERE y > 1) AS n FROM t", read="duckdb")
>>> rewrite_filters(q).sql("duckdb")
'SELECT DP_COUNT(CASE WHEN y > 1 THEN 1 END) AS n FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from ..surface import CI_SUFFIX, plain_function
from .context import dp_name, refuse


def rewrite_filters(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` where every FILTER clause of a dp_* call is moved into its first argument."""
    tree = tree.copy()
    for node in list(tree.find_all(exp.Filter)):
        call = node.this
        if dp_name(call) is None:
            raise refuse("012", "FILTER is only allowed on dp_* aggregates")
        args = call.expressions
        named = [a.copy() for a in args if isinstance(a, exp.PropertyEQ | exp.Kwarg)]
        positional = [a for a in args if not isinstance(a, exp.PropertyEQ | exp.Kwarg)]
        cond = node.expression.this.copy()
        fn = dp_name(call)
        if plain_function(fn) == "dp_count_star" or (positional and isinstance(positional[0], exp.Star)):
            if plain_function(fn) == "dp_count_star" and positional:
                raise refuse("060", f"{fn}: takes no value argument")
            case = exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.number(1))])
            count = "dp_count" + (CI_SUFFIX if fn.endswith(CI_SUFFIX) else "")
            new_call = exp.Anonymous(this=count, expressions=[case, *named])
        else:
            if not positional:
                raise refuse("060", f"{fn}: missing the value argument")
            case = exp.Case(ifs=[exp.If(this=cond, true=positional[0].copy())])
            new_call = call.copy()
            new_call.expressions[0].replace(case)
        if isinstance(node.parent, exp.Select) and node in node.parent.expressions:
            # an unaliased select item keeps the name the analyst wrote
            new_call = exp.alias_(new_call, node.sql("duckdb", normalize_functions="lower"), quoted=True)
        node.replace(new_call)
    return tree
