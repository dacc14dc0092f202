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
from dpsql.guard import ANALYSES, REWRITES, analyse, normalise
from dpsql.guard.catalog import Catalog
from dpsql.guard.facts import Facts
from dpsql.guard.filters import rewrite_filters
from dpsql.guard.pick_lists import answer_pick_list, pick_list
from dpsql.guard.plain import rewrite_plain_aggregates
from dpsql.guard.probes import answer_probe, empty
from dpsql.guard.relations import check_relations
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


def _analysed(sql: str, catalog: Catalog, upto: Callable | None) -> Facts:
    """The facts of the analyses before ``upto`` (all of them if ``upto`` is a rewrite)."""
    return analyse(sql, normalise(_checked(sql, catalog), catalog), catalog, upto)


def _analysis(name: str, summary: Callable[[Facts], str]) -> Callable[[str, Catalog], str]:
    field, step = next((f, a) for f, a in ANALYSES if a.__name__ == name)

    def run(sql: str, catalog: Catalog) -> str:
        facts = _analysed(sql, catalog, step)
        return summary(facts.add(field, step(facts)))
    return run


def _rewrite(name: str) -> Callable[[str, Catalog], str]:
    step = next(r for r in REWRITES if r.__name__ == name)

    def run(sql: str, catalog: Catalog) -> str:
        facts = _analysed(sql, catalog, None)
        tree = facts.tree
        for each in REWRITES:  # as guard.rewrite(facts, upto=step), checking that no rewrite edits its input
            before = _sql(tree)
            new = each(tree, facts)
            assert _sql(tree) == before, f"{each.__name__} edited its input"
            tree = new
            if each is step:
                return _sql(tree)
        raise AssertionError(name)
    return run


def _lineage(facts: Facts) -> str:
    lineage = facts.lineage
    root = lineage.info[id(facts.scopes[-1].expression)]
    aggs = ", ".join("protected" if a.protected else "public" for a in lineage.aggregations) or "none"
    return f"root {root.kind} {root.columns}; private selects {len(lineage.private)}; aggregations: {aggs}"


def _groups(facts: Facts) -> str:
    out = []
    for site in facts.lineage.aggregations:
        a = facts.grouping(site)
        if a is not None:
            keys = [_sql(k) for k in a.keys]
            domains = ["declared" if d is not None else "none" for d in a.domains]
            out.append(f"keys {keys} domains {domains} unit {_sql(a.unit)} k={a.max_rows} g={a.max_groups}"
                       f"{' selection' if a.selection else ''}")
    return "; ".join(out) or "no protected aggregation"


def _params(facts: Facts) -> str:
    return "; ".join(f"{c.function} {c.method} {c.notion} {c.value} x{c.multiplier} = {c.cost}" for c in facts.calls)


def _selection(facts: Facts) -> str:
    out = [f"eps {s.epsilon} threshold {s.threshold!r}" for site in facts.lineage.aggregations
           if (s := facts.selected(site)) is not None]
    return f"{'; '.join(out) or 'no selection'}; delta {facts.selection.delta}"


def _probe(sql: str, catalog: Catalog) -> str:
    tree = normalise(_checked(sql, catalog), catalog)
    return _sql(answer_probe(tree)) if empty(tree) else "not a probe"


def _pick_list(sql: str, catalog: Catalog) -> str:
    tree = normalise(_checked(sql, catalog), catalog)
    facts = pick_list(tree, catalog)
    return "not a pick-list" if facts is None else _sql(answer_pick_list(tree, facts))


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
    "lineage": _analysis("analyse_lineage", _lineage),
    "joins": _analysis("check_joins", lambda facts: "ok"),
    "fanout": _analysis("check_fanout", lambda facts: "ok"),
    "groups": _analysis("check_groups", _groups),
    "params": _analysis("check_parameters", _params),
    "partition": _analysis("plan_selection", _selection),
    "cost": _analysis("check_cost", lambda facts: f"cost {facts.cost.total}"),
    "units": _rewrite("rewrite_units"),
    "totality": _rewrite("rewrite_totality"),
    "per_unit": _rewrite("rewrite_per_unit"),
    "bounding": _rewrite("rewrite_bounding"),
    "public_keys": _rewrite("rewrite_public_keys"),
    "selection": _rewrite("rewrite_selection"),
    "materialize": _rewrite("rewrite_materialize"),
}


def outcome(name: str, sql: str, catalog: str) -> str:
    """What pass ``name`` produces for ``sql`` on the named catalog, or ``error <code>`` if it refuses."""
    try:
        return PASSES[name](sql, CATALOGS[catalog]())
    except PrivacyError as e:
        return f"error {e.code}"
