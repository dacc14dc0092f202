"""Pass: the query's total cost (sequential composition over its dp_* calls) and the per-query cap.

Each call costs its method's declared eps (pure) or rho (zCDP) times the contribution bound, as an
exact decimal; the total is rounded up to 1e-18.

>>> total([decimal.Decimal("0.1"), decimal.Decimal("0.2")])
Decimal('0.300000000000000000')
"""

from __future__ import annotations

import decimal

from .context import Context, refuse

QUANTUM = decimal.Decimal("1e-18")


def total(costs: list[decimal.Decimal]) -> decimal.Decimal:
    """Exact sum, rounded up to the ledger's quantum."""
    with decimal.localcontext(decimal.Context(prec=120)):
        exact = sum(costs, decimal.Decimal(0))
        if exact == 0:
            return decimal.Decimal(0)
        return exact.quantize(QUANTUM, rounding=decimal.ROUND_CEILING)


def check_cost(ctx: Context) -> None:
    """Compute ``ctx.cost``; refuse a query over the catalog's per-query cap (E061)."""
    ctx.cost = total([c.cost for c in ctx.calls])
    cap = ctx.catalog.max_query_epsilon
    if cap is not None and ctx.cost > decimal.Decimal(repr(float(cap))):
        raise refuse("061", "the query's total privacy cost exceeds the per-query cap")
