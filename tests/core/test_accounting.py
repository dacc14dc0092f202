"""The exact cost algebra (dpsql.core.accounting): one conversion, one scaling, one composition, one rounding,
shared by the guard and the ledger (issue 16)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dpsql.core import accounting
from dpsql.core.accounting import Cost, epsilon_to_rho, pure, round_up, total, zcdp


def test_literal_text_is_used_where_it_denotes_the_float() -> None:
    assert pure(0.1).exact("0.1") == Cost("pure", Decimal("0.1"))
    assert pure(0.1).exact() == Cost("pure", Decimal(0.1))  # no text: the float's own binary value
    assert pure(0.1).exact("0.2") == Cost("pure", Decimal(0.1))  # a text for another value is ignored
    rho = epsilon_to_rho(1.0, 1e-6)
    assert zcdp(rho).exact() == Cost("zcdp", Decimal(rho))


@pytest.mark.parametrize(("cost", "accounting_", "k", "expected"), [
    (pure(0.5).exact("0.5"), "pure", 3, "1.5"),  # group privacy: eps k
    (pure(0.1).exact("0.1"), "zcdp", 3, "0.045"),  # (eps^2 / 2) k^2
    (zcdp(0.01).exact("0.01"), "zcdp", 3, "0.09"),  # rho k^2
    (pure(0.30000000000000004).exact("0.30000000000000004"), "zcdp", 3, "0.4050000000000001080000000000000072"),
])
def test_charge_is_exact(cost: Cost, accounting_: str, k: int, expected: str) -> None:
    assert str(cost.charge(accounting_, k)) == expected


def test_zcdp_cannot_be_charged_to_a_pure_budget() -> None:
    with pytest.raises(ValueError, match="pure-DP budget"):
        zcdp(0.1).exact().charge("pure")


def test_total_rounds_up_once_after_the_exact_sum() -> None:
    third = Decimal(1) / Decimal(3)  # 0.333... (28 digits)
    assert total([third, third, third]) == Decimal("1.000000000000000000")  # not 3 x ceil(1/3) = 1.000...002
    assert total([Decimal("1e-40")]) == Decimal("1e-18")  # never rounded to zero
    assert total([]) == 0 and str(total([Decimal(0)])) == "0"
    assert round_up(Decimal("0.1000000000000000001")) == Decimal("0.100000000000000001")


def test_guard_and_ledger_round_with_the_algebra() -> None:
    """One rounding: the guard's total and the ledger's amounts are the algebra's functions, not copies."""
    from dpsql import ledger
    from dpsql.guard import cost

    assert cost.total is accounting.total
    assert ledger.round_up is accounting.round_up
