"""Pass: dp_* parameters are finite literals (E060); each call's cost comes from the method registry.

Which arguments each dp_* function takes (positional and named, numeric or string, their defaults) is read from
:mod:`dpsql.surface`, the one declaration the binding's macros are generated from.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog
>>> call = sqlglot.parse_one("SELECT dp_quantile(x, 0.9, epsilon := 0.25, method := 'em')").expressions[0]
>>> parse_call(call)[1:]
({'p': 0.9, 'epsilon': 0.25, 'method': 'em'}, {'p': '0.9', 'epsilon': '0.25', 'method': 'em'})
"""

from __future__ import annotations

import dataclasses
import decimal
import math

from sqlglot import exp

from ..surface import FUNCTIONS, PARAMETERS, VALUE
from .context import DP_FUNCTIONS, dp_name, own_nodes, refuse
from .facts import DpCall, Facts, Parameters, frozen_map
from .lineage import column_type, is_numeric_type
from .value_types import type_error


def _number(name: str, node: exp.Expression, fn: str) -> tuple[float, str]:
    sign = ""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        sign, node = "-", node.this
    if not (isinstance(node, exp.Literal) and not node.is_string):
        raise refuse("060", f"{fn}: {name} must be a numeric literal")
    text = sign + str(node.this)
    try:
        value, dec = float(text), decimal.Decimal(text)
    except (ValueError, decimal.InvalidOperation):
        raise refuse("060", f"{fn}: {name} must be a numeric literal") from None
    if not (math.isfinite(value) and dec.is_finite()):
        raise refuse("060", f"{fn}: {name} must be finite")
    return value, text


def parse_call(call: exp.Anonymous) -> tuple[str, dict[str, object], dict[str, str]]:
    """(function, parameter values, literal texts) of one dp_* call; refuses non-literal parameters."""
    fn = dp_name(call)
    spec = FUNCTIONS[fn]  # dp_f_ci: dp_f's arguments plus level
    params: dict[str, object] = {}
    texts: dict[str, str] = {}
    positional = [a for a in call.expressions if not isinstance(a, exp.PropertyEQ | exp.Kwarg)]
    named = [a for a in call.expressions if isinstance(a, exp.PropertyEQ | exp.Kwarg)]
    if call.expressions[: len(positional)] != positional:
        raise refuse("060", f"{fn}: positional arguments must come before named ones")
    if len(positional) != len(spec.positional):
        raise refuse("060", f"{fn}: wrong number of positional arguments")
    if positional and isinstance(positional[0], exp.Star) and spec.value != "ANY":
        raise refuse("060", f"{fn}: * is only allowed in dp_count")
    if positional and not isinstance(positional[0], exp.Star) and positional[0].find(exp.Star):
        raise refuse("012", f"{fn}: stars are not allowed inside the value argument")
    if positional and isinstance(positional[0], exp.Distinct):
        raise refuse("050", f"{fn}: DISTINCT is not allowed in dp_* aggregates")
    for name, value in zip(spec.positional, positional, strict=True):  # dp_quantile's p
        if name != VALUE:
            params[name], texts[name] = _literal(name, value, fn)
    for name, value in spec.fixed:  # dp_median: p = 0.5
        params[name], texts[name] = value, repr(value)
    for arg in named:
        name = str(arg.this.name if isinstance(arg.this, exp.Expression) else arg.this).lower()
        if name not in spec.named:
            raise refuse("060", f"{fn}: unknown parameter {name!r}")
        if name in params:
            raise refuse("060", f"{fn}: parameter {name!r} given twice")
        params[name], texts[name] = _literal(name, arg.expression, fn)
    for name in spec.named:  # a default that is not NULL (level := 0.95) is what the call uses
        if name not in params and PARAMETERS[name].default is not None:
            params[name] = PARAMETERS[name].default
    return fn, params, texts


def _literal(name: str, node: exp.Expression, fn: str) -> tuple[object, str]:
    """(value, text) of the parameter ``name``: a string literal (``method``) or a finite numeric literal."""
    if PARAMETERS[name].sql_type == "VARCHAR":
        if not (isinstance(node, exp.Literal) and node.is_string):
            raise refuse("060", f"{fn}: {name} must be a string literal")
        return str(node.this), str(node.this)
    return _number(name, node, fn)


def cost_call(call: DpCall, accounting: str) -> DpCall:
    """``call`` with its method, notion, value and cost: the registry's declaration, priced exactly by
    :mod:`dpsql.core.accounting` from the literal's own text (converted to the budget's notion, scaled by the
    contribution bound)."""
    from ..core.registry import ParameterError, get_method, privacy_cost

    kw = {k: v for k, v in call.params.items() if k not in ("method", "level")}
    try:
        # the cost never depends on level: it is computed without it (dp_f_ci costs what dp_f costs) ...
        priv = privacy_cost(call.aggregate, call.params.get("method"), **kw)
        if "level" in call.params:  # ... and level is checked on its own (range; the method has an interval)
            privacy_cost(call.aggregate, call.params.get("method"), level=call.params["level"], **kw)
        method = get_method(call.aggregate, call.params.get("method")).name
    except (ParameterError, ValueError, TypeError) as e:
        raise refuse("060", str(e) or f"{call.function}: invalid parameters") from None
    value = priv.epsilon if priv.notion == "pure" else priv.rho
    try:
        cost = priv.exact(call.texts.get("epsilon" if priv.notion == "pure" else "rho")).charge(
            accounting, call.multiplier)
    except ValueError:  # a zCDP method under a pure budget
        raise refuse("060", f"{call.function}: method {method!r} is zCDP; "
                            "this budget is pure epsilon-DP") from None
    return dataclasses.replace(call, method=method, notion=priv.notion, value=value, cost=cost)


def _check_placement(select: exp.Select, node: exp.Anonymous) -> None:
    parent = node.parent
    while parent is not None and parent is not select:
        if dp_name(parent):
            raise refuse("012", "dp_* aggregates may not be nested")
        if isinstance(parent, exp.Window):
            raise refuse("012", "dp_* aggregates may not be used as window functions")
        if isinstance(parent, exp.Where | exp.Join | exp.From | exp.Group | exp.Qualify):
            raise refuse("012", "dp_* aggregates are allowed only in the select list, HAVING and ORDER BY")
        parent = parent.parent


def _check_value_type(facts: Facts, select: exp.Select, node: exp.Anonymous, fn: str) -> None:
    """A dp_* value argument that is a table column of a non-numeric type is refused here with a message
    that says why (issue 14: it used to fail as "the checked query could not be bound by DuckDB").  The
    type comes from the catalog (metadata), so the refusal depends on the text and the schema only."""
    if FUNCTIONS[fn].value != "NUMERIC" or not node.expressions:
        return
    col = node.expressions[0]
    if not isinstance(col, exp.Column):
        return
    typ = column_type(facts.catalog, facts.lineage.sources.get(id(select)) or {}, col)
    if typ is not None and not is_numeric_type(typ):
        raise type_error(fn, col.sql("duckdb"), typ)


def check_parameters(facts: Facts) -> Parameters:
    """Parse and cost every dp_* call of every aggregation."""
    found = {}
    for site in facts.lineage.aggregations:
        calls = []
        for node in own_nodes(site.select):
            fn = dp_name(node)
            if fn is None:
                continue
            _check_placement(site.select, node)
            name, params, texts = parse_call(node)
            _check_value_type(facts, site.select, node, name)
            call = DpCall(node, name, DP_FUNCTIONS[name], frozen_map(params), frozen_map(texts),
                          multiplier=facts.multiplier(site))
            calls.append(cost_call(call, facts.catalog.accounting))
        found[id(site.select)] = tuple(calls)
    return Parameters(frozen_map(found))
