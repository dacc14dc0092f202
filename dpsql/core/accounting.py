"""Privacy notions and costs, declared as data.

Every estimator declares one :class:`Privacy` for a given set of parameters; the DuckDB binding, the
guard's cost computation and the ledger all read that same value (docs/methods.md documents it).

Neighbouring datasets differ by adding or removing one privacy unit (one row unless a table declares a
unit column).  Conversions used here are the standard ones:

* pure eps-DP implies (eps**2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4);
* rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke 2016, Prop. 1.3).

Two views of one cost.  :class:`Privacy` holds floats: what a mechanism receives and splits (and what the spending
meter adds up).  :class:`Cost` is the same cost as an exact decimal: what is charged.  Its algebra -- conversion
to the budget's notion, scaling by a contribution bound, sequential composition and the one rounding up to the
ledger's quantum -- lives here and nowhere else; the guard prices every call with :meth:`Cost.charge` and
:func:`total`, and the ledger rounds what it is given with :func:`round_up`.

>>> c = pure(0.1).exact("0.1")
>>> c.charge("pure", 3), c.charge("zcdp", 3)
(Decimal('0.3'), Decimal('0.045'))
>>> total([Decimal("0.1"), Decimal("0.2")]), total([Decimal("1e-30")])
(Decimal('0.300000000000000000'), Decimal('1E-18'))
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

Notion = Literal["pure", "zcdp"]

__all__ = ["Privacy", "Cost", "pure", "zcdp", "rho_to_epsilon", "epsilon_to_rho", "pure_epsilon", "compose",
           "total", "round_up", "AMOUNT_PLACES"]

#: charged amounts are rounded up to this many decimal places (the ledger stores DECIMAL(38, 18))
AMOUNT_PLACES = 18
#: exact arithmetic: +, * and halving never round in this context (and a result that would is an error)
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                         traps=[decimal.InvalidOperation, decimal.Inexact, decimal.Overflow, decimal.DivisionByZero])


@dataclass(frozen=True)
class Privacy:
    """The privacy cost of one release: ``pure`` eps-DP, or ``zcdp`` rho-zCDP."""

    notion: Notion
    epsilon: float = 0.0  # pure: eps
    rho: float = 0.0  # zcdp: rho

    def as_rho(self) -> float:
        """Cost in zCDP (pure eps => eps^2/2)."""
        return self.epsilon**2 / 2.0 if self.notion == "pure" else self.rho

    def as_epsilon(self, delta: float = 0.0) -> float:
        """Cost as eps (pure), or as the eps of (eps, delta)-DP for a zCDP release (needs delta > 0)."""
        if self.notion == "pure":
            return self.epsilon
        if not (0.0 < delta < 1.0):
            raise ValueError("delta must be in (0, 1) to express a zCDP cost as (epsilon, delta)")
        return rho_to_epsilon(self.rho, delta)

    def exact(self, text: str | None = None) -> Cost:
        """This cost as an exact decimal: ``text`` (the parameter's literal, e.g. ``'0.1'``) where it denotes
        this float, else the float's own binary value (e.g. a rho derived from epsilon and delta)."""
        value = self.epsilon if self.notion == "pure" else self.rho
        return Cost(self.notion, Decimal(text) if text and float(text) == value else Decimal(value))

    def describe(self) -> str:
        return f"{self.epsilon:g}-DP (pure)" if self.notion == "pure" else f"{self.rho:g}-zCDP"


def pure(epsilon: float) -> Privacy:
    return Privacy("pure", epsilon=float(epsilon))


def zcdp(rho: float) -> Privacy:
    return Privacy("zcdp", rho=float(rho))


@dataclass(frozen=True)
class Cost:
    """An exact cost: ``amount`` is eps (``pure``) or rho (``zcdp``) as a decimal."""

    notion: Notion
    amount: Decimal

    def as_rho(self) -> Cost:
        """In zCDP: pure eps-DP is (eps**2 / 2)-zCDP."""
        if self.notion == "zcdp":
            return self
        with decimal.localcontext(_EXACT):
            return Cost("zcdp", self.amount * self.amount / 2)

    def scaled(self, k: int) -> Cost:
        """The cost when one privacy unit contributes to ``k`` rows of the input (group privacy: eps scales by k,
        rho by k**2)."""
        with decimal.localcontext(_EXACT):
            m = Decimal(k)
            return Cost(self.notion, self.amount * (m if self.notion == "pure" else m * m))

    def charge(self, accounting: Notion, k: int = 1) -> Decimal:
        """What the release costs a budget kept in ``accounting`` when a unit contributes to ``k`` rows: converted,
        then scaled; exact (not rounded).  A zCDP release cannot be charged to a pure budget (ValueError)."""
        if accounting == "pure" and self.notion != "pure":
            raise ValueError("a zCDP release cannot be charged to a pure-DP budget")
        return (self if accounting == "pure" else self.as_rho()).scaled(k).amount


def round_up(value: Decimal, places: int = AMOUNT_PLACES) -> Decimal:
    """``value`` rounded up (towards +infinity) to ``places`` decimal places: the only rounding of a charge."""
    with decimal.localcontext(_EXACT) as ctx:
        ctx.traps[decimal.Inexact] = False
        return value.quantize(Decimal(1).scaleb(-places), rounding=decimal.ROUND_CEILING)


def total(amounts: Iterable[Decimal]) -> Decimal:
    """Sequential composition of exact charges (one budget's notion): their exact sum, rounded up once to
    :data:`AMOUNT_PLACES` (nothing costs ``Decimal(0)``, unrounded)."""
    with decimal.localcontext(_EXACT):
        exact = sum(amounts, Decimal(0))
    return Decimal(0) if exact == 0 else round_up(exact)


def rho_to_epsilon(rho: float, delta: float) -> float:
    """rho-zCDP => (rho + 2 sqrt(rho ln(1/delta)), delta)-DP."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def epsilon_to_rho(epsilon: float, delta: float) -> float:
    """The largest rho whose (eps, delta) conversion is at most ``epsilon`` (inverse of
    :func:`rho_to_epsilon`): sqrt(rho) = sqrt(L + eps) - sqrt(L) with L = ln(1/delta)."""
    if not (0.0 < delta < 1.0):
        raise ValueError("delta must be in (0, 1)")
    L = -math.log(delta)
    s = epsilon / (math.sqrt(L + epsilon) + math.sqrt(L))  # = sqrt(L + eps) - sqrt(L), without cancellation
    return s * s


def pure_epsilon(rho: float) -> float:
    """sqrt(2 rho): the eps of the pure-DP release whose zCDP cost is rho (the inverse of :meth:`Privacy.as_rho`)."""
    return math.sqrt(2.0 * rho)


def compose(costs: list[Privacy], accounting: Notion) -> float:
    """Sequential composition of ``costs`` in ``accounting`` ('pure': sum of eps, refusing zCDP parts;
    'zcdp': sum of rho), in floats: the spending meter's check.  What is charged is :func:`total` of exact
    :meth:`Cost.charge` amounts."""
    if accounting == "pure":
        if any(c.notion != "pure" for c in costs):
            raise ValueError("a zCDP release cannot be charged to a pure-DP budget")
        return sum(c.epsilon for c in costs)
    return sum(c.as_rho() for c in costs)
