"""The guard: check, rewrite and cost one analyst query, failing closed.

``plan(sql, catalog)`` parses the query, runs the checks (a tuple of small passes, each raising
:class:`~dpsql.errors.PrivacyError` with a stable ``DPSQL-E0xx`` code), runs the rewrites, and returns a
:class:`Plan` whose SQL is regenerated from the checked and rewritten tree.  Nothing here reads data: the
cost is a function of the query text and the catalog only.

The passes are sqlglot style: the analyses (``ANALYSES``) are functions ``analysis(facts) -> fact`` of the
frozen :class:`~dpsql.guard.facts.Facts` found so far, returning their own frozen fact (or ``None``: a check
that only refuses), and the rewrites (``REWRITES``) are pure functions ``rewrite(tree, facts) -> tree`` that
edit a copy of their input; :func:`analyse` and :func:`rewrite` thread them.  Each pass has its own fixture
file, ``tests/guard/fixtures/<pass>.sql``.

>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> v = TableInfo("visits", "protected", {"pid": "INTEGER", "cost": "DOUBLE"}, privacy_unit="pid",
...               max_rows_per_unit=5)
>>> p = plan("SELECT dp_count(*, epsilon := 0.1) AS n FROM visits", Catalog({"visits": v}))
>>> p.cost, p.output_columns
(Decimal('0.500000000000000000'), ['n'])
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field

from sqlglot import exp

from .bounding import output_name, rewrite_bounding
from .catalog import Catalog, TableInfo
from .context import tag_nodes
from .cost import check_cost
from .facts import Facts
from .fanout import check_fanout
from .filters import rewrite_filters
from .groups import check_groups, rewrite_units
from .joins import check_joins
from .lineage import analyse_lineage
from .materialize import rewrite_materialize
from .params import check_parameters
from .partition import plan_selection, rewrite_selection
from .per_unit import rewrite_per_unit
from .pick_lists import answer_pick_list, pick_list
from .plain import rewrite_plain_aggregates
from .probes import answer_probe, empty
from .public_keys import rewrite_public_keys
from .relations import check_relations, query_scopes
from .statement import parse_statement
from .syntax import check_syntax, rewrite_casts
from .totality import rewrite_totality

__all__ = ["plan", "Plan", "Catalog", "TableInfo", "ANALYSES", "REWRITES", "Facts", "analyse", "rewrite"]

#: the analyses of a query that is neither a probe nor a pick-list, in order: ``(name, analysis)``; each
#: ``analysis(facts)`` returns the frozen fact stored as ``Facts.<name>`` (name None: a check, it returns None)
#: or raises PrivacyError
ANALYSES = (
    ("lineage", analyse_lineage),  # E020 E021 E022 E050 E051: protected rows reach the output only through dp_*
    (None, check_joins),  # E040 E041: protected joins keep a unit's rows together
    (None, check_fanout),  # E043: a join repeats a protected row at most max_fanout times (no timing oracle)
    ("groups", check_groups),  # E020 E022 E030 E032: public keys, outputs, contribution bounds
    ("parameters", check_parameters),  # E060: literal, finite parameters; per-call cost from the method registry
    ("selection", plan_selection),  # delta > 0: partition selection for undeclared keys
    ("cost", check_cost),  # E061: sequential composition, per-query cap
)
#: the rewrites ``rewrite(tree, facts) -> tree``, in order, applied only after every analysis passed
REWRITES = (
    rewrite_units,  # the privacy unit selected out of subqueries that do not select it
    rewrite_totality,  # row-level expressions under TRY()
    rewrite_per_unit,  # per-unit aggregations: aggregates in an inner grouped query, expressions under TRY()
    rewrite_bounding,  # k rows per (unit, group), g groups per unit, at random
    rewrite_public_keys,  # declared domains drive the groups (empty groups included)
    rewrite_selection,  # noisy-count threshold for undeclared keys
    rewrite_materialize,  # CTEs with dp_* calls are evaluated (and noised) once
)


@dataclass(frozen=True)
class Plan:
    """What to execute and what it costs.  ``cost`` is eps (pure) or rho (zcdp), rounded up to 1e-18."""

    sql: str
    cost: decimal.Decimal
    delta: decimal.Decimal
    mechanisms: list[dict] = field(default_factory=list)
    output_columns: list[str] = field(default_factory=list)
    #: a zero-row probe: ``sql`` is only bound for its columns, never run; it costs nothing
    schema_only: bool = False


def _outermost(tree: exp.Expression) -> exp.Select:
    while not isinstance(tree, exp.Select):
        tree = tree.this if isinstance(tree, exp.Subquery) else tree.left
    return tree


def _output_columns(tree: exp.Expression, star: list[str]) -> tuple[exp.Expression, list[str]]:
    """Names of the result columns (``star`` for a ``SELECT *``), and a copy of ``tree`` where unaliased
    expressions get an explicit alias (their own text)."""
    tree = tree.copy()
    select = _outermost(tree)
    names: list[str] = []
    for item in list(select.expressions):
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return tree, list(star)
        if not isinstance(item, exp.Alias | exp.Column):
            name = output_name(item)
            item.replace(exp.alias_(item.copy(), name, quoted=True))
        names.append(select.expressions[len(names)].alias_or_name)
    return tree, names


def _mechanisms(calls) -> list[dict]:
    out = []
    for call in calls:
        m = {"function": call.function, "aggregate": call.aggregate, "method": call.method,
             "notion": call.notion, "multiplier": call.multiplier, "cost": str(call.cost)}
        m["epsilon" if call.notion == "pure" else "rho"] = call.value
        if call.purpose != "release":
            m["purpose"] = call.purpose
        out.append(m)
    return out


def analyse(sql: str, tree: exp.Expression, catalog: Catalog, upto=None) -> Facts:
    """The facts of the analyses (those before the analysis ``upto`` only, if given) of the normalised ``tree``,
    numbered for the rewrites (``Facts.tree``)."""
    tree = tag_nodes(tree)
    facts = Facts(sql, catalog, tree, tuple(query_scopes(tree)))
    for name, analysis in ANALYSES:
        if analysis is upto:
            break
        facts = facts.add(name, analysis(facts))
    return facts


def rewrite(facts: Facts, upto=None) -> exp.Expression:
    """The analysed tree after the rewrites (up to and including ``upto`` only, if given)."""
    tree = facts.tree
    for step in REWRITES:
        tree = step(tree, facts)
        if step is upto:
            break
    return tree


def normalise(tree: exp.Expression, catalog: Catalog) -> exp.Expression:
    """The rewrites before the analysis: TRY_CAST, FILTER into CASE, the owner's plain-aggregate opt-in."""
    tree = rewrite_casts(tree)  # CAST -> TRY_CAST
    tree = rewrite_filters(tree)  # dp_f(x) FILTER (WHERE c) -> dp_f(CASE WHEN c THEN x END)
    return rewrite_plain_aggregates(tree, catalog)  # opt-in: COUNT/SUM/AVG over protected rows -> dp_*


def plan(sql: str, catalog: Catalog) -> Plan:
    """Check, rewrite and cost ``sql`` against ``catalog``; raise PrivacyError(code, message) on refusal."""
    tree = parse_statement(sql)  # E001 E002 E003: one plain query, by sqlglot and by DuckDB
    check_relations(tree, catalog)  # E010 E040 E042: registered tables of main only, one privacy unit
    check_syntax(tree)  # E011 E012 E031 E050: closed allow-list of nodes and functions
    tree = normalise(tree, catalog)
    # answered without the privacy analysis, at no cost: zero-row probes (from the schema, never run) and
    # DISTINCT/GROUP BY of declared-key columns only (from the keys)
    if empty(tree):
        return _final(answer_probe(tree), schema_only=True)
    pick = pick_list(tree, catalog)
    if pick is not None:
        return _final(answer_pick_list(tree, pick))
    facts = analyse(sql, tree, catalog)
    root = facts.lineage.info.get(id(_outermost(facts.tree)))
    tree, columns = _output_columns(rewrite(facts), root.columns if root else [])
    return Plan(sql=tree.sql(dialect="duckdb"), cost=facts.cost.total, delta=facts.selection.delta,
                mechanisms=_mechanisms(facts.calls), output_columns=columns)


def _final(tree: exp.Expression, schema_only: bool = False) -> Plan:
    tree, columns = _output_columns(tree, [])
    return Plan(sql=tree.sql(dialect="duckdb"), cost=decimal.Decimal(0), delta=decimal.Decimal(0),
                output_columns=columns, schema_only=schema_only)
