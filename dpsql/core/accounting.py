"""Privacy notions and costs, declared as data.

Every estimator declares one :class:`Privacy` for a given set of parameters; the DuckDB binding, the
guard's cost computation and the ledger all read that same value (docs/methods.md documents it).

Neighbouring datasets differ by adding or removing one privacy unit (one row unless a table declares a
unit column).  Conversions used here are the standard ones:

* pure eps-DP implies (eps**2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4);
* rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke 2016, Prop. 1.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Notion = Literal["pure", "zcdp"]

__all__ = ["Privacy", "pure", "zcdp", "rho_to_epsilon", "epsilon_to_rho", "compose"]


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

    def scaled(self, k: float) -> Privacy:
        """The cost of a release whose sensitivity is multiplied by ``k`` (group privacy for pure DP
        scales eps by k; for zCDP, rho scales by k**2)."""
        if self.notion == "pure":
            return Privacy("pure", epsilon=self.epsilon * k)
        return Privacy("zcdp", rho=self.rho * k * k)

    def describe(self) -> str:
        return f"{self.epsilon:g}-DP (pure)" if self.notion == "pure" else f"{self.rho:g}-zCDP"


def pure(epsilon: float) -> Privacy:
    return Privacy("pure", epsilon=float(epsilon))


def zcdp(rho: float) -> Privacy:
    return Privacy("zcdp", rho=float(rho))


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


def compose(costs: list[Privacy], accounting: Notion) -> float:
    """Sequential composition of ``costs`` in ``accounting`` ('pure': sum of eps, refusing zCDP parts;
    'zcdp': sum of rho)."""
    if accounting == "pure":
        if any(c.notion != "pure" for c in costs):
            raise ValueError("a zCDP release cannot be charged to a pure-DP budget")
        return sum(c.epsilon for c in costs)
    return sum(c.as_rho() for c in costs)
