"""Pass: a join may repeat a protected row only a bounded number of times (E043), so that no person's
data can decide whether a query does a lot of work or none (issue 13's timing oracle).

The attack this closes: ``FROM visits v JOIN big b ON (v.name = 'target' AND v.diag = 'hiv')`` produces
``|big|`` rows when the predicate holds for one person and none otherwise; the noisy answer hides the
bit, the running time does not.  The rule bounds the *fan-out* of every join that attaches a public
relation Q to protected rows: the number of Q rows one protected row can meet.  It is

* the largest number of Q rows sharing one value of ``Q.c``, when the ON (or USING) condition holds a
  conjunct ``Q.c = <column of the other side>`` (the session measures each public table's row count and
  per-column largest multiplicity when it loads the policy: public data, so reading it leaks nothing);
* otherwise (or when smaller) a bound on Q's size computed from the query text and the public tables'
  row counts: a table's rows, a VALUES list's length, a product over a SELECT's FROM and joins, a sum
  over UNION branches, at most a literal LIMIT.

A join whose fan-out bound exceeds ``Catalog.max_fanout`` (default 1,000) is refused before any charge.
With the bound, one person's rows (at most ``max_rows_per_unit`` after bounding, but the raw rows are
joined first) change the join's output by at most ``rows x max_fanout``: microseconds of work at the
default, far inside the latency quantum.  What stays: work linear in the protected table's size and in
one person's raw row count (a scan), which docs/operations.md lists as a residual risk.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> from dpsql.guard.relations import query_scopes
>>> from dpsql.guard.lineage import analyse_lineage
>>> v = TableInfo("v", "protected", {"uid": "INT", "x": "DOUBLE"}, privacy_unit="uid")
>>> big = TableInfo("big", "public", {"k": "INT"}, rows=10**6, multiplicity={"k": 1})
>>> def check(q):
...     tree = sqlglot.parse_one(q, read="duckdb")
...     facts = Facts("", Catalog({"v": v, "big": big}), tree, tuple(query_scopes(tree)))
...     facts = facts.add("lineage", analyse_lineage(facts))
...     try:
...         check_fanout(facts)
...     except Exception as e:
...         return e.code
>>> check("SELECT dp_count(*) FROM v JOIN big b ON v.x > 0")
'DPSQL-E043'
>>> check("SELECT dp_count(*) FROM v JOIN big b ON b.k = v.x") is None
True
"""

from __future__ import annotations

import math

from sqlglot import exp

from .context import refuse
from .facts import Facts
from .joins import _conjuncts, private_joins
from .lineage import Sources, resolve, values_rows

INF = math.inf


def _ctes(facts: Facts) -> dict[str, exp.Expression]:
    out: dict[str, exp.Expression] = {}
    for cte in facts.tree.find_all(exp.CTE):
        out[cte.alias_or_name.lower()] = cte.this
    return out


def _literal_int(node: exp.Expression | None) -> float:
    if isinstance(node, exp.Limit):
        node = node.expression
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return max(float(int(node.this)), 0.0)
        except ValueError:
            return INF
    return INF


def size_bound(facts: Facts, node: exp.Expression, ctes: dict[str, exp.Expression] | None = None,
               depth: int = 0) -> float:
    """An upper bound on the rows of a public relation, from the text and the public row counts."""
    ctes = _ctes(facts) if ctes is None else ctes
    if depth > 50:
        return INF
    if isinstance(node, exp.Subquery):
        return size_bound(facts, node.this, ctes, depth + 1)
    if isinstance(node, exp.Table):
        name = node.name.lower()
        info = facts.catalog.get(name)
        if name in ctes and not node.args.get("db"):
            return size_bound(facts, ctes[name], ctes, depth + 1)
        if info is None or info.rows is None:
            return INF
        return float(info.rows)
    if isinstance(node, exp.Values):
        return float(len(node.expressions))
    if isinstance(node, exp.Union):
        return size_bound(facts, node.left, ctes, depth + 1) + size_bound(facts, node.right, ctes, depth + 1)
    if isinstance(node, exp.Intersect):
        return min(size_bound(facts, node.left, ctes, depth + 1), size_bound(facts, node.right, ctes, depth + 1))
    if isinstance(node, exp.Except):
        return size_bound(facts, node.left, ctes, depth + 1)
    if isinstance(node, exp.Select):
        from_ = node.args.get("from_")
        total = 1.0
        if from_ is not None:
            total = size_bound(facts, from_.this, ctes, depth + 1)
            for join in node.args.get("joins") or []:
                total *= size_bound(facts, join.this, ctes, depth + 1)
        return min(total, _literal_int(node.args.get("limit")))
    return INF


def _multiplicity(facts: Facts, srcs: Sources, alias: str, column: str) -> float:
    node, info, source = srcs[alias]
    if isinstance(node, exp.Values):  # literal rows: the multiplicity is in the text
        idx = [c.lower() for c in info.columns].index(column)
        rows = values_rows(node, [idx])
        return float(max((rows.count(r) for r in set(rows)), default=0))
    if isinstance(source, exp.Table):
        info = facts.catalog.get(source.name)
        name = next((c for c in info.multiplicity if c.lower() == column), None) if info and not info.protected \
            else None
        if name is not None:  # only this column is measured (a session measures on first access)
            return float(info.multiplicity[name])
    return INF


def _fanout(facts: Facts, srcs: Sources, join: exp.Join, public: list[str], other: list[str],
            ctes: dict[str, exp.Expression]) -> float:
    """Bound on the rows of the public side ``public`` that one row of the ``other`` side can meet."""
    bound = 1.0
    for a in public:
        bound *= size_bound(facts, srcs[a][0], ctes)
    if len(public) != 1:
        return bound
    q = public[0]
    using = join.args.get("using")
    if using:
        for ident in using:
            bound = min(bound, _multiplicity(facts, srcs, q, ident.name.lower()))
    on = join.args.get("on")
    for c in _conjuncts(on) if on is not None else []:
        if not (isinstance(c, exp.EQ | exp.NullSafeEQ) and isinstance(c.left, exp.Column)
                and isinstance(c.right, exp.Column)):
            continue
        a, b = resolve(srcs, c.left), resolve(srcs, c.right)
        for x, y in ((a, b), (b, a)):
            if x is not None and y is not None and x[0] == q and y[0] in other:
                bound = min(bound, _multiplicity(facts, srcs, q, x[1]))
    return bound


def check_fanout(facts: Facts) -> None:
    """Refuse joins that can repeat a protected row more than ``catalog.max_fanout`` times (E043; a check: no
    facts)."""
    limit = facts.catalog.max_fanout
    ctes = _ctes(facts)
    for srcs, join, right, seen in private_joins(facts.lineage):
        left_prot = any(srcs[a][1].kind == "protected" for a in seen)
        right_prot = srcs[right][1].kind == "protected"
        if left_prot or right_prot:
            for a in [right, *seen]:
                node = srcs[a][0]
                if isinstance(node, exp.Values) and len(set(rows := values_rows(node))) != len(rows):
                    raise refuse("043", "a VALUES list joined to protected rows must list each row once "
                                        "(a duplicate would repeat a person's rows)")
        bound = 0.0
        if left_prot and not right_prot:
            bound = _fanout(facts, srcs, join, [right], seen, ctes)
        elif right_prot and not left_prot:
            bound = _fanout(facts, srcs, join, seen, [right], ctes)
        if bound > limit:
            size = "unbounded" if bound == INF else f"up to {bound:,.0f}"
            raise refuse("043", f"the join can repeat one protected row {size} times (at most {limit:,} "
                                "allowed, so that one person's data cannot decide how much work a query does): "
                                "join on a column of the public relation whose values repeat at most that "
                                "often, or filter the public relation first")
