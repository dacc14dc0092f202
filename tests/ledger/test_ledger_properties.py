"""Property: any sequence of grants and charges keeps every budget within its limit, replays exactly, and
refuses a charge only when it would overspend (or exceed the cap)."""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsql.errors import PrivacyError
from dpsql.ledger import Ledger

amounts = st.decimals(min_value=Decimal("0"), max_value=Decimal("2"), places=3, allow_nan=False)
ops = st.lists(st.one_of(
    st.tuples(st.just("charge"), st.sampled_from(["a", "b"]), amounts),
    st.tuples(st.just("grant"), st.sampled_from(["a", "b"]), amounts),
), min_size=1, max_size=8)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_histories_never_overspend_and_replay_exactly(history: list[tuple[str, str, Decimal]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.ledger.duckdb"
        led = Ledger(path, "prop", create=True)
        model = {"a": [Decimal(1), Decimal(0)], "b": [Decimal(1), Decimal(0)]}  # [limit, spent]
        for who, (limit, _) in model.items():
            led.grant(who, "pure", limit)
        for op, who, x in history:
            if op == "grant":
                led.grant(who, "pure", x)
                model[who][0] = x
                continue
            fits = model[who][1] + x <= model[who][0]
            try:
                led.charge(who, x)
                assert fits
                model[who][1] += x
            except PrivacyError as e:
                assert e.code == "DPSQL-E070" and not fits
        for who, (limit, spent) in model.items():
            b = led.budget(who)
            assert (b.limit, b.spent) == (limit, spent)
        Ledger(path, "prop").verify()
