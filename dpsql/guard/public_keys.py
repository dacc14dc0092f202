"""Rewrite: every declared key appears in the output, empty groups included.

The bounded rows are LEFT JOINed from the cross product of the keys' public domains, so a key without
rows still forms a group (whose dp_* arguments are all NULL: the aggregates release a DP answer for an
empty group), and rows whose key is outside the domain are dropped.

>>> from sqlglot import exp
>>> on_condition(["_dpsql_k0"]).sql("duckdb")
'_dpsql_b._dpsql_k0 = _dpsql_d0._dpsql_k'
"""

from __future__ import annotations

from sqlglot import exp

from .context import PREFIX, dp_name, editable
from .facts import Facts

B = f"{PREFIX}_b"


def on_condition(key_columns: list[str]) -> exp.Expression:
    """``_dpsql_b.<key j> = _dpsql_d<j>._dpsql_k`` for every key."""
    conds = [exp.EQ(this=exp.column(c, table=B), expression=exp.column(f"{PREFIX}_k", table=f"{PREFIX}_d{j}"))
             for j, c in enumerate(key_columns)]
    return exp.and_(*conds) if len(conds) > 1 else conds[0]


def _directly_in(node: exp.Expression, select: exp.Select) -> bool:
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, exp.Subquery | exp.Query) or dp_name(parent):
            return False
        parent = parent.parent
    return parent is select


def rewrite_public_keys(tree: exp.Expression, facts: Facts) -> exp.Expression:
    """A copy of ``tree`` where each fully public-keyed aggregation is driven from its key domains."""
    todo = [(site, agg) for site in facts.lineage.aggregations
            if (agg := facts.grouping(site)) is not None and agg.keys and not agg.selection]
    if not todo:
        return tree
    tree, find = editable(tree)
    for site, agg in todo:
        select = find(site.select)
        key_columns = [g.name for g in select.args["group"].expressions]
        mapping = {c: f"{PREFIX}_d{j}" for j, c in enumerate(key_columns)}
        for col in list(select.find_all(exp.Column)):
            if col.table == B and col.name in mapping and _directly_in(col, select):
                col.replace(exp.column(f"{PREFIX}_k", table=mapping[col.name], quoted=True))
        bounded = select.args["from_"].this
        doms = [exp.Subquery(this=d.copy(), alias=exp.TableAlias(this=exp.to_identifier(f"{PREFIX}_d{j}")))
                for j, d in enumerate(agg.domains)]
        select.set("from_", exp.From(this=doms[0]))
        joins = [exp.Join(this=d, kind="CROSS") for d in doms[1:]]
        joins.append(exp.Join(this=bounded, side="LEFT", on=on_condition(key_columns)))
        select.set("joins", joins)
    return tree
