"""Stand-ins for the binding's noise, so session tests exercise the session, ledger and executor on their own.

``fake_plan`` follows the guard's contract (``plan(sql, catalog) -> Plan``) and takes everything about privacy
from the real guard (:func:`dpsql.guard.plan`): its refusals (codes and messages), its cost, delta and
mechanisms -- so a charge in these tests is the charge a real session would make.  It differs in one thing only:
it executes the analyst's text unchanged instead of the guard's rewrite, because ``fake_install`` registers dp_*
macros that are NOT private (plain aggregates, no noise).  Why that fake is still needed: the session tests
assert on released values (``A``, ``B``, ``C`` in order, row counts), kill a child process between charge and
release, and run threads and two processes against one ledger, which needs fast, exact, seed-free answers; the
real binding's answers are noisy and its rewrite adds bounding subqueries.  Tests marked ``real_guard`` use
the real guard and binding end to end (``tests/session/test_real_guard.py`` and others).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import duckdb

from dpsql.guard import plan as guard_plan


@dataclass
class FakePlan:
    sql: str
    cost: Decimal
    delta: Decimal = Decimal(0)
    mechanisms: list = field(default_factory=list)
    output_columns: list = field(default_factory=list)


def fake_plan(sql: str, catalog) -> FakePlan:  # noqa: ANN001
    """The real guard's verdict and price for ``sql``; the text itself is what runs (on ``fake_install``)."""
    real = guard_plan(sql, catalog)  # refuses with the real code and message, or prices the query
    return FakePlan(sql=sql.strip().rstrip(";"), cost=real.cost, delta=real.delta, mechanisms=real.mechanisms)


def fake_install(con: duckdb.DuckDBPyConnection) -> None:
    for name, body in (("dp_count", "count(x)"), ("dp_sum", "sum(x)"), ("dp_mean", "avg(x)"),
                       ("dp_median", "median(x)")):
        con.execute(f"CREATE MACRO {name}(x, epsilon := 1.0) AS {body}")
