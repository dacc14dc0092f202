"""Run one guard pass on a query, for the per-pass fixtures (tests/guard/fixtures/<pass>.sql).

Each runner takes the fixture's query and catalog, lets the passes before it in ``dpsql.guard.plan`` prepare
the input (the parsed tree, the normalised tree, the facts of the analyses), runs its pass alone and returns
what that pass produces: the SQL of the rewritten tree, a one-line summary of the facts found, ``ok`` (an
analysis that only refuses), or ``error DPSQL-E0xx`` (see :func:`outcome`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from corpus import extended_catalog, hospital_catalog
from sqlglot import exp

from dpsql.errors import PrivacyError
from dpsql.guard import ANALYSES, REWRITES, normalise
from dpsql.guard.catalog import Catalog
from dpsql.guard.context import Context, tag_nodes
from dpsql.guard.filters import rewrite_filters
from dpsql.guard.pick_lists import answer_pick_list, pick_list
from dpsql.guard.plain import rewrite_plain_aggregates
from dpsql.guard.probes import answer_probe, empty
from dpsql.guard.relations import check_relations, query_scopes
from dpsql.guard.statement import parse_statement
from dpsql.guard.syntax import check_syntax, rewrite_casts

CATALOGS: dict[str, Callable[[], Catalog]] = {
    "hospital": hospital_catalog,
    "extended": extended_catalog,
    "extended_delta": lambda: extended_catalog(delta=1e-6),
    "capped": lambda: hospital_catalog(cap=1),
    "zcdp": lambda: hospital_catalog(accounting="zcdp"),
    "plain": lambda: dataclasses.replace(hospital_catalog(), plain_aggregate_epsilon="0.1"),
}


def _sql(tree: exp.Expression) -> str:
    return tree.sql(dialect="duckdb")


def _checked(sql: str, catalog: Catalog) -> exp.Expression:
    tree = parse_statement(sql)
    check_relations(tree, catalog)
    check_syntax(tree)
    return tree


def _analysed(sql: str, catalog: Catalog, upto: Callable) -> Context:
    """The context after the analyses before ``upto`` (all of them if ``upto`` is a rewrite)."""
    tree = tag_nodes(normalise(_checked(sql, catalog), catalog))
    ctx = Context(sql, catalog, tree=tree, scopes=query_scopes(tree))
    for analysis in ANALYSES:
        if analysis is upto:
            break
        analysis(ctx)
    return ctx


def _analysis(step: Callable, summary: Callable[[Context], str]) -> Callable[[str, Catalog], str]:
    def run(sql: str, catalog: Catalog) -> str:
        ctx = _analysed(sql, catalog, step)
        step(ctx)
        return summary(ctx)
    return run


def _rewrite(step: Callable) -> Callable[[str, Catalog], str]:
    def run(sql: str, catalog: Catalog) -> str:
        ctx = _analysed(sql, catalog, None)
        tree = ctx.tree
        for rewrite in REWRITES:
            tree = rewrite(tree, ctx)
            if rewrite is step:
                return _sql(tree)
        raise AssertionError(step)
    return run


def _lineage(ctx: Context) -> str:
    root = ctx.info[id(ctx.scopes[-1].expression)]
    aggs = ", ".join("protected" if a.protected else "public" for a in ctx.aggregations) or "none"
    return f"root {root.kind} {root.columns}; private selects {len(ctx.private)}; aggregations: {aggs}"


def _groups(ctx: Context) -> str:
    out = []
    for a in ctx.aggregations:
        if a.protected:
            keys = [_sql(k) for k in a.keys]
            domains = ["declared" if d is not None else "none" for d in a.domains]
            out.append(f"keys {keys} domains {domains} unit {_sql(a.unit)} k={a.max_rows} g={a.max_groups}"
                       f"{' selection' if a.selection else ''}")
    return "; ".join(out) or "no protected aggregation"


def _params(ctx: Context) -> str:
    return "; ".join(f"{c.function} {c.method} {c.notion} {c.value} x{c.multiplier} = {c.cost}" for c in ctx.calls)


def _selection(ctx: Context) -> str:
    out = [f"eps {a.selection_epsilon} threshold {a.threshold!r}" for a in ctx.aggregations if a.selection]
    return f"{'; '.join(out) or 'no selection'}; delta {ctx.delta}"


def _probe(sql: str, catalog: Catalog) -> str:
    tree = normalise(_checked(sql, catalog), catalog)
    return _sql(answer_probe(tree)) if empty(tree) else "not a probe"


def _pick_list(sql: str, catalog: Catalog) -> str:
    tree = normalise(_checked(sql, catalog), catalog)
    facts = pick_list(tree, catalog)
    return "not a pick-list" if facts is None else _sql(answer_pick_list(tree, facts))


def _by_name(name: str) -> Callable:
    return next(f for f in ANALYSES + REWRITES if f.__name__ == name)


#: pass (fixture file name) -> runner(sql, catalog) -> what the pass produces
PASSES: dict[str, Callable[[str, Catalog], str]] = {
    "statement": lambda sql, cat: _sql(parse_statement(sql)),
    "relations": lambda sql, cat: (check_relations(parse_statement(sql), cat), "ok")[1],
    "syntax": lambda sql, cat: (check_syntax(parse_statement(sql)), "ok")[1],
    "casts": lambda sql, cat: _sql(rewrite_casts(_checked(sql, cat))),
    "filters": lambda sql, cat: _sql(rewrite_filters(rewrite_casts(_checked(sql, cat)))),
    "plain": lambda sql, cat: _sql(rewrite_plain_aggregates(rewrite_filters(rewrite_casts(_checked(sql, cat))), cat)),
    "probes": _probe,
    "pick_lists": _pick_list,
    "lineage": _analysis(_by_name("analyse_lineage"), _lineage),
    "joins": _analysis(_by_name("check_joins"), lambda ctx: "ok"),
    "fanout": _analysis(_by_name("check_fanout"), lambda ctx: "ok"),
    "groups": _analysis(_by_name("check_groups"), _groups),
    "params": _analysis(_by_name("check_parameters"), _params),
    "partition": _analysis(_by_name("plan_selection"), _selection),
    "cost": _analysis(_by_name("check_cost"), lambda ctx: f"cost {ctx.cost}"),
    "totality": _rewrite(_by_name("rewrite_totality")),
    "per_unit": _rewrite(_by_name("rewrite_per_unit")),
    "bounding": _rewrite(_by_name("rewrite_bounding")),
    "public_keys": _rewrite(_by_name("rewrite_public_keys")),
    "selection": _rewrite(_by_name("rewrite_selection")),
    "materialize": _rewrite(_by_name("rewrite_materialize")),
}


def outcome(name: str, sql: str, catalog: str) -> str:
    """What pass ``name`` produces for ``sql`` on the named catalog, or ``error <code>`` if it refuses."""
    try:
        return PASSES[name](sql, CATALOGS[catalog]())
    except PrivacyError as e:
        return f"error {e.code}"
