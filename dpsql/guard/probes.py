"""Pass: zero-row probes are answered from the schema, uncharged, without running (issue 19).

BI tools learn a query's columns by asking for no rows: ``SELECT * FROM t WHERE 1=0``, jupysql's
``LIMIT 0``, SQLAlchemy's and Superset's ``SELECT * FROM (<query>) AS q LIMIT 0``.  A query is a *probe*
when its text alone guarantees an empty result, whatever the data:

* ``LIMIT 0`` on the outermost query (with any OFFSET), or
* a literally false WHERE on the outermost SELECT (``false``, ``1 = 0``, ``NOT true``, ``'a' <> 'a'``, a
  false conjunct of an AND, an OR of false terms, in parentheses or not) when that SELECT has GROUP BY
  expressions or no aggregate at all (an aggregate over no rows still returns one row: not a probe);
* a UNION whose branches are all probes, an INTERSECT with one, an EXCEPT whose left side is one.

Nothing else counts (``WHERE cost < 0`` may well be empty, but only the data can say).

A probe releases its result's column names and types, nothing else; they follow from the text and the
schema, which the analyst may see anyway (``.schema``, the server's catalog).  So after the passes that
keep the text within what a session may name at all (one SELECT, E001-E003; registered tables of main,
one privacy unit, E010 E042; the allow-list of syntax and functions, E011 E012 E031) the privacy checks
are skipped: the inner query may be one the guard would refuse (E020, E021, E050, E061 ...).  The plan is
``schema_only``: the session binds its SQL (a probe around a query that does not bind is still refused,
E001), charges nothing, runs nothing and returns an empty table of those columns.

>>> import sqlglot
>>> empty(sqlglot.parse_one("SELECT * FROM (SELECT x FROM t) AS q WHERE (1 = 0)", read="duckdb"))
True
>>> empty(sqlglot.parse_one("SELECT count(*) FROM t WHERE false", read="duckdb"))
False
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

from .bounding import count_star, output_name
from .context import dp_name, own_nodes

_COMPARE = {exp.EQ: lambda c: c == 0, exp.NEQ: lambda c: c != 0, exp.GT: lambda c: c > 0,
            exp.GTE: lambda c: c >= 0, exp.LT: lambda c: c < 0, exp.LTE: lambda c: c <= 0}


def _unwrap(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _literal_truth(node: exp.Expression) -> bool | None:
    """True or False when ``node`` is a constant condition made of literals only, else None."""
    node = _unwrap(node)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Not):
        inner = _literal_truth(node.this)
        return None if inner is None else not inner
    if isinstance(node, exp.And | exp.Or):
        left, right = _literal_truth(node.this), _literal_truth(node.expression)
        if isinstance(node, exp.And):
            return False if False in (left, right) else (True if left is right is True else None)
        return True if True in (left, right) else (False if left is right is False else None)
    test = _COMPARE.get(type(node))
    a, b = _unwrap(node.this) if test else None, _unwrap(node.expression) if test else None
    if not (isinstance(a, exp.Literal) and isinstance(b, exp.Literal)):
        return None
    if a.is_string and b.is_string:  # strings: equality only (ordering depends on a collation)
        return (a.this == b.this) == (type(node) is exp.EQ) if type(node) in (exp.EQ, exp.NEQ) else None
    if a.is_string or b.is_string:
        return None
    try:
        diff = Decimal(str(a.this)) - Decimal(str(b.this))
    except InvalidOperation:
        return None
    return test(diff.compare(Decimal(0)))


def _limit_zero(query: exp.Expression) -> bool:
    limit = query.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(value, exp.Literal) and not value.is_string and str(value.this).strip() == "0"


def _groups_or_aggregates_nothing(select: exp.Select) -> bool:
    """Whether no input rows means no output rows: explicit GROUP BY expressions, or no aggregate at all."""
    group = select.args.get("group")
    if group is not None and not group.args.get("all") and group.expressions \
            and not any(isinstance(g, exp.Tuple) for g in group.expressions):
        return True
    if select.args.get("having") is not None or group is not None:
        return False
    return not any(isinstance(n, exp.AggFunc) or dp_name(n) for n in own_nodes(select))


def empty(query: exp.Expression) -> bool:
    """Whether the text of ``query`` guarantees that it returns no rows (see the module's rules)."""
    while isinstance(query, exp.Subquery) and not _limit_zero(query):
        query = query.this
    if _limit_zero(query):
        return True
    if isinstance(query, exp.Select):
        where = query.args.get("where")
        return where is not None and _literal_truth(where.this) is False and _groups_or_aggregates_nothing(query)
    if isinstance(query, exp.Union):
        return empty(query.this) and empty(query.expression)
    if isinstance(query, exp.Intersect):
        return empty(query.this) or empty(query.expression)
    if isinstance(query, exp.Except):
        return empty(query.this)
    return False


def _outermost(tree: exp.Expression) -> exp.Expression:
    while not isinstance(tree, exp.Select):
        tree = tree.this if isinstance(tree, exp.Subquery) else tree.left
    return tree


def answer_probe(tree: exp.Expression) -> exp.Expression:
    """The SQL bound for a probe (``empty(tree)``): a copy of ``tree`` that spells ``dp_count(*)`` as the
    macros take it, so it binds.

    Unaliased dp_* items are named first as the full plan names them (the outermost by their text, the
    inner ones, seen through ``*``, by the function), so a probe reports the columns the query returns."""
    tree = tree.copy()
    root = _outermost(tree)
    for select in list(tree.find_all(exp.Select)):
        for item in list(select.expressions):
            if dp_name(item):
                name = output_name(item) if select is root else item.alias_or_name
                item.replace(exp.alias_(item.copy(), name, quoted=True))
    for node in list(tree.find_all(exp.Anonymous)):
        count_star(node)
    return tree
