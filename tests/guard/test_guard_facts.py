"""The guard's passes are sqlglot style (issue 16, item 6): every analysis returns a frozen fact (or None, a check
that only refuses), every rewrite is a pure ``(tree, facts) -> tree`` that leaves its input as it was.

The per-pass fixtures (test_passes.py) check what each pass produces; this checks the shape on the corpus."""

from __future__ import annotations

import dataclasses

import pytest
from corpus import ALLOWED, extended_catalog
from sqlglot import exp

from dpsql.guard import ANALYSES, REWRITES, analyse, facts, normalise, plan
from dpsql.guard.relations import check_relations
from dpsql.guard.statement import parse_statement
from dpsql.guard.syntax import check_syntax

FACT_TYPES = [obj for obj in vars(facts).values()
              if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == facts.__name__]


def test_every_fact_type_is_frozen() -> None:
    assert {t.__name__ for t in FACT_TYPES} >= {"Facts", "Lineage", "Groups", "Parameters", "Selection", "Cost"}
    for t in FACT_TYPES:
        assert t.__dataclass_params__.frozen, t.__name__


def _facts(sql: str):
    catalog = extended_catalog(delta=1e-6)
    tree = parse_statement(sql)
    check_relations(tree, catalog)
    check_syntax(tree)
    return analyse(sql, normalise(tree, catalog), catalog)


@pytest.mark.parametrize("sql", [q for q, _ in ALLOWED][::3])
def test_analyses_return_frozen_facts_and_rewrites_do_not_edit_their_input(sql: str) -> None:
    found = _facts(sql)
    for name, analysis in ANALYSES:
        fact = analysis(found)
        assert (fact is None) == (name is None)
        assert fact is None or fact == getattr(found, name)
        assert fact is None or type(fact).__dataclass_params__.frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.cost = None  # type: ignore[misc]
    tree = found.tree
    for rewrite in REWRITES:
        before = tree.sql("duckdb")
        new = rewrite(tree, found)
        assert isinstance(new, exp.Expression)  # the input itself when there is nothing to rewrite
        assert tree.sql("duckdb") == before, rewrite.__name__
        tree = new
    assert new.sql("duckdb") != found.tree.sql("duckdb") or not found.calls
    assert plan(sql, extended_catalog(delta=1e-6)).cost == found.cost.total
