"""The ledger's values: exact amounts, budgets, log entries, charges and stored releases, and the two errors
every part of the ledger raises (DPSQL-E090 unavailable, DPSQL-E071 busy)."""

from __future__ import annotations

import decimal
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from ..core.accounting import AMOUNT_PLACES as AMOUNT_PLACES  # amounts: DECIMAL(38, 18), the cost algebra's quantum
from ..errors import PrivacyError

Accounting = Literal["pure", "zcdp"]
DELTA_PLACES = 30
_MAX_AMOUNT = Decimal(10) ** 12
# DECIMAL(38, 18) needs more than the default 28 significant digits: do all ledger arithmetic in this context
_CTX = decimal.Context(prec=100, traps=[decimal.InvalidOperation, decimal.Inexact, decimal.Overflow])


def ledger_path(database: str | os.PathLike[str]) -> Path:
    """The ledger file of a data file: ``hospital.duckdb`` -> ``hospital.ledger.duckdb``."""
    p = Path(database)
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return p.with_name(f"{stem}.ledger.duckdb")


def to_decimal(value: Decimal | float | int | str, what: str = "amount") -> Decimal:
    """An exact decimal from a user value; refuses NaN, infinities and negatives.

    Floats go through ``repr`` (``0.1`` becomes ``Decimal('0.1')``, not its binary expansion)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} must be finite")
        value = repr(value)
    try:
        d = Decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise ValueError(f"{what} must be a number") from None
    if not d.is_finite() or d < 0:
        raise ValueError(f"{what} must be a finite, non-negative number")
    if d > _MAX_AMOUNT:
        raise ValueError(f"{what} is too large")
    return d


def _fmt(d: Decimal | None, places: int) -> str:
    if d is None:
        return ""
    with decimal.localcontext(_CTX):
        return format(d.quantize(Decimal(1).scaleb(-places)), "f")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Budget:
    """A principal's budget: ``limit``/``spent``/``remaining`` in ε ('pure') or ρ ('zcdp')."""

    principal: str
    accounting: Accounting
    limit: Decimal
    spent: Decimal
    remaining: Decimal
    delta_limit: Decimal
    delta_spent: Decimal
    per_query_cap: Decimal | None = None
    delta_per_query: Decimal | None = None

    def query_delta(self) -> Decimal:
        """The delta one query may spend now: the per-query delta (default: all of it), at most what remains."""
        left = max(self.delta_limit - self.delta_spent, Decimal(0))
        return left if self.delta_per_query is None else min(self.delta_per_query, left)


@dataclass(frozen=True)
class Entry:
    """One row of the hash-chained log (a grant, a global limit, a charge, a replay or a data version)."""

    seq: int
    entry_id: str
    kind: str
    ts: datetime
    principal: str
    session_id: str | None
    accounting: str
    amount: Decimal
    delta: Decimal
    cap: Decimal | None
    delta_cap: Decimal | None
    query_sha256: str | None
    mechanisms: str | None
    status: str
    prev_hash: str = ""
    row_hash: str = ""
    ref_seq: int | None = None


@dataclass(frozen=True)
class Charge:
    """A committed charge: the log entry's ``seq`` and the principal's budget right after it.

    For a replay (see :meth:`Ledger.charge`'s ``release_key``) ``seq`` is the replay entry, ``cost``
    and ``delta`` are 0, ``replayed_from`` is the original charge and ``stored`` its released rows."""

    seq: int
    cost: Decimal
    delta: Decimal
    budget: Budget
    data_version: int = 1
    replayed_from: int | None = None
    stored: bytes | None = None


@dataclass(frozen=True)
class StoredRelease:
    """A release kept for replay (its rows stay in the ledger file)."""

    seq: int
    principal: str
    data_version: int
    query_key: str
    stored_at: datetime
    used_at: datetime
    nbytes: int


_BUDGET_COLS = "principal, accounting, limit_, spent, delta_limit, delta_spent, per_query_cap, delta_per_query"
_ENTRY_COLS = ("seq, entry_id, kind, ts, principal, session_id, accounting, amount, delta, cap, delta_cap, "
               "query_sha256, mechanisms, status, prev_hash, row_hash, ref_seq")


def _entry(row: tuple[Any, ...]) -> Entry:
    return Entry(int(row[0]), str(row[1]), *row[2:])


def clean(d: Decimal) -> Decimal:
    """The same value without trailing zeros or exponent notation (``3.000`` -> ``3``, ``0E-18`` -> ``0``)."""
    with decimal.localcontext(_CTX):
        return d.quantize(Decimal(1)) if d == d.to_integral_value() else d.normalize()


def _budget(row: tuple[Any, ...]) -> Budget:
    principal, accounting, limit, spent, dl, ds, cap, dq = row
    with decimal.localcontext(_CTX):
        return Budget(principal, accounting, clean(limit), clean(spent), clean(max(limit - spent, Decimal(0))),
                      clean(dl), clean(ds), None if cap is None else clean(cap), None if dq is None else clean(dq))


def _unavailable(what: str) -> PrivacyError:
    return PrivacyError("DPSQL-E090", f"ledger unavailable: {what}; nothing was run or charged")


def _contention() -> PrivacyError:
    return PrivacyError("DPSQL-E071", "the budget ledger is busy; nothing was charged, the query is safe to retry")
