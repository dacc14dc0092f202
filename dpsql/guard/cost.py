"""Pass: the query's total cost (sequential composition over its dp_* calls) and the per-query cap.

Each call costs its method's declared eps (pure) or rho (zCDP), scaled by the contribution bound, as an
exact decimal (:mod:`dpsql.guard.params`); the total is their exact sum rounded up once to 1e-18
(:func:`dpsql.core.accounting.total`).

>>> total([decimal.Decimal("0.1"), decimal.Decimal("0.2")])
Decimal('0.300000000000000000')
"""

from __future__ import annotations

import decimal

from ..core.accounting import total
from .context import refuse
from .facts import Cost, Facts


def check_cost(facts: Facts) -> Cost:
    """The query's total cost; refuse a query over the catalog's per-query cap (E061)."""
    cost = total([c.cost for c in facts.calls])
    cap = facts.catalog.max_query_epsilon
    if cap is not None and cost > decimal.Decimal(repr(float(cap))):
        raise refuse("061", "the query's total privacy cost exceeds the per-query cap")
    return Cost(cost)
