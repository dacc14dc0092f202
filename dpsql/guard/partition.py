"""DP partition selection for group keys without a declared domain (only when the catalog's delta > 0).

Laplace thresholding: a group is released only if a noisy count of its bounded rows exceeds

    tau = k + ln(g / delta) / eps_sel

where k = max rows per unit and group, g = max groups per unit.  The count ``dp_count`` adds discrete
Laplace noise Z with P(Z >= t) <= exp(-eps_sel * t).  A group that exists only because of one unit has
at most k rows, so it is released with probability at most delta / g; one unit creates at most g groups,
so the selection is (k g eps_sel, delta)-DP and the released statistics compose with it as usual.
eps_sel is the smallest epsilon among the aggregation's dp_* calls (sqrt(2 rho) for a rho call).

>>> round(threshold(1, 1, 1.0, 1e-6), 3)
14.816
"""

from __future__ import annotations

import decimal
import math

from sqlglot import exp

from ..core.accounting import pure_epsilon
from .context import DP_FUNCTIONS, PREFIX, editable, refuse
from .facts import DpCall, Facts, Selected, Selection, frozen_map
from .params import cost_call


def threshold(max_rows: int, max_groups: int, epsilon: float, delta: float) -> float:
    """The noisy-count threshold above which a data-derived group is released."""
    return max_rows + math.log(max_groups / delta) / epsilon


def plan_selection(facts: Facts) -> Selection:
    """The selection's count mechanism and threshold of each aggregation that needs one."""
    found = {}
    delta = decimal.Decimal(0)
    for site in facts.lineage.aggregations:
        grouping = facts.grouping(site)
        if grouping is None or not grouping.selection:
            continue
        choices = []
        for call in facts.calls_of(site):
            if "epsilon" in call.params:
                choices.append((float(call.params["epsilon"]), call.texts["epsilon"]))
            elif "rho" in call.params:
                e = pure_epsilon(float(call.params["rho"]))
                choices.append((e, repr(e)))
        if not choices:
            raise refuse("060", "partition selection needs an epsilon")
        eps, text = min(choices)
        call = DpCall(exp.Anonymous(this="dp_count"), "dp_count", DP_FUNCTIONS["dp_count"],
                      frozen_map({"epsilon": eps}), frozen_map({"epsilon": text}), multiplier=grouping.multiplier,
                      purpose="partition selection")
        call = cost_call(call, facts.catalog.accounting)
        if call.notion != "pure":
            raise refuse("060", "partition selection needs a pure-DP count method")
        found[id(site.select)] = Selected(call, text, threshold(grouping.max_rows, grouping.max_groups, eps,
                                                                 facts.catalog.delta))
        delta += decimal.Decimal(repr(float(facts.catalog.delta)))
    return Selection(frozen_map(found), delta)


def rewrite_selection(tree: exp.Expression, facts: Facts) -> exp.Expression:
    """A copy of ``tree`` with ``HAVING dp_count(_dpsql_b._dpsql_one, epsilon := eps) > tau`` on each selecting
    aggregation."""
    if not facts.selection.by_select:
        return tree
    tree, find = editable(tree)
    for site in facts.lineage.aggregations:
        selected = facts.selected(site)
        if selected is None:
            continue
        count = exp.Anonymous(this="dp_count", expressions=[
            exp.column(f"{PREFIX}_one", table=f"{PREFIX}_b", quoted=True),
            exp.PropertyEQ(this=exp.to_identifier("epsilon"), expression=exp.Literal.number(selected.epsilon)),
        ])
        cond = exp.GT(this=count, expression=exp.Literal.number(repr(selected.threshold)))
        select = find(site.select)
        having = select.args.get("having")
        new = cond if having is None else exp.and_(exp.paren(having.this.copy()), cond)
        select.set("having", exp.Having(this=new))
    return tree
