"""What a run spends, checked against what its method declares (issue 16).

A method declares one cost (:func:`~dpsql.core.registry.budget_of`) and splits it over its steps with share
tables (``SPLIT_*``).  Nothing in those tables proves that the steps spend what the method declares, so every
mechanism that adds noise charges its own cost here, where its noise scale is fixed: the primitives
(:func:`~dpsql.core.primitives.noisy_count_of`, :func:`~dpsql.core.primitives.release_fixed_sum`,
:func:`~dpsql.core.primitives.svt_scan`, :func:`~dpsql.core.primitives.quantile_em`,
:func:`~dpsql.core.primitives.rank_em`) and the few mechanisms that draw their own noise (the smooth-sensitivity
count and release, PrivQuant's comparisons and the Gaussian sums and counts, the asymmetric sensitivity scan,
the piecewise exponential mechanism).  Two scopes transform what is charged inside them:

* :func:`subsampled`: the mechanisms run on a Poisson subsample at public rate eta, so the pure eps spent inside
  costs ``ln(1 + eta (e^eps - 1))`` under add/remove;
* :func:`stable`: the mechanisms run on a k-stable transformation of the data (one added or removed row changes
  at most k of its elements), so they cost k times as much (group privacy).

Metering is off unless a :func:`meter` block is open; charges then go to the meter of the current context
(threads and tasks do not mix).  Charging draws nothing and changes no value, so a metered run releases
exactly what an unmetered one does.  ``tests/core/test_spending.py`` runs every registered method metered and
checks that it spends what it declares.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .accounting import Notion, Privacy, compose, pure, zcdp

__all__ = ["Meter", "meter", "charge", "charge_pure", "charge_zcdp", "subsampled", "stable"]


@dataclass
class Meter:
    """The charges of one run, in order: (what, cost)."""

    charges: list[tuple[str, Privacy]] = field(default_factory=list)

    def spent(self, notion: Notion) -> float:
        """The total by sequential composition: eps for ``'pure'`` (a zCDP charge is an error), rho for
        ``'zcdp'`` (a pure eps step costs eps**2 / 2)."""
        return compose([c for _, c in self.charges], notion)

    def describe(self) -> str:
        return "; ".join(f"{what}: {c.describe()}" for what, c in self.charges)


_CURRENT: ContextVar[Meter | None] = ContextVar("dpsql_meter", default=None)


@contextmanager
def meter() -> Iterator[Meter]:
    """Record the charges of everything run inside the block."""
    m = Meter()
    token = _CURRENT.set(m)
    try:
        yield m
    finally:
        _CURRENT.reset(token)


def charge(cost: Privacy, what: str) -> None:
    """Record that a mechanism spent ``cost`` (a no-op unless a :func:`meter` block is open)."""
    m = _CURRENT.get()
    if m is not None:
        m.charges.append((what, cost))


def charge_pure(epsilon: float, what: str) -> None:
    if _CURRENT.get() is not None:
        charge(pure(epsilon), what)


def charge_zcdp(rho: float, what: str) -> None:
    if _CURRENT.get() is not None:
        charge(zcdp(rho), what)


@contextmanager
def _inner(what: str, convert) -> Iterator[None]:
    parent = _CURRENT.get()
    if parent is None:
        yield
        return
    inner = Meter()
    token = _CURRENT.set(inner)
    try:
        yield
    finally:
        _CURRENT.reset(token)
    parent.charges.append((f"{what} [{inner.describe()}]", convert(inner.spent("pure"))))


def subsampled(eta: float, what: str):
    """Charges inside (pure, summed to eps) cost ``ln(1 + eta (e^eps - 1))``: Poisson subsampling at rate eta."""
    if eta >= 1.0:
        return _inner(what, pure)
    return _inner(f"{what} on a Poisson({eta:g}) subsample", lambda eps: pure(math.log1p(eta * math.expm1(eps))))


def stable(k: int, what: str):
    """Charges inside (pure, summed to eps) cost ``k eps``: the data were transformed k-stably first."""
    return _inner(f"{what} ({k}-stable input)", lambda eps: pure(k * eps))
