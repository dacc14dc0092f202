"""The budget ledger: exact decimals, conditional charges, races, hash chain, anchors."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from dpsql.errors import PrivacyError
from dpsql.ledger import Ledger, entry_hash, ledger_path, round_up, to_decimal

DATASET = "11111111-2222-3333-4444-555555555555"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data.ledger.duckdb"


@pytest.fixture
def ledger(path: Path) -> Ledger:
    led = Ledger(path, DATASET, create=True)
    led.grant("alice", "pure", Decimal("1.0"))
    return led


def spent(led: Ledger, who: str = "alice") -> Decimal:
    return led.budget(who).spent


def test_ledger_path_sits_next_to_the_data_file() -> None:
    assert ledger_path("/srv/hospital.duckdb") == Path("/srv/hospital.ledger.duckdb")
    assert ledger_path("data") == Path("data.ledger.duckdb")


def test_files_are_private(ledger: Ledger, path: Path) -> None:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.with_name(path.name + ".lock").stat().st_mode) == 0o600


def test_ten_charges_of_a_tenth_spend_exactly_one_and_the_eleventh_is_refused(ledger: Ledger) -> None:
    for _ in range(10):
        ledger.charge("alice", Decimal("0.1"))
    assert spent(ledger) == Decimal("1")
    with pytest.raises(PrivacyError) as err:
        ledger.charge("alice", Decimal("0.1"))
    assert err.value.code == "DPSQL-E070"
    assert spent(ledger) == Decimal("1")
    assert len(ledger.entries(kind="charge")) == 10


def test_float_amounts_are_taken_at_their_decimal_repr(ledger: Ledger) -> None:
    for _ in range(10):
        ledger.charge("alice", 0.1)
    assert spent(ledger) == Decimal("1")
    assert to_decimal(0.1) == Decimal("0.1")


def test_costs_are_rounded_up_never_down(ledger: Ledger) -> None:
    c = ledger.charge("alice", Decimal("1e-25"))
    assert c.cost == Decimal("1e-18")
    assert round_up(Decimal("0.1000000000000000001")) == Decimal("0.100000000000000001")


@pytest.mark.parametrize("bad", [Decimal("-0.1"), Decimal("NaN"), float("inf"), float("nan"), "abc", Decimal("1e13")])
def test_invalid_costs_are_refused_and_charge_nothing(ledger: Ledger, bad: object) -> None:
    with pytest.raises(PrivacyError) as err:
        ledger.charge("alice", bad)  # type: ignore[arg-type]
    assert err.value.code == "DPSQL-E060"
    assert spent(ledger) == 0


def test_per_query_cap_is_enforced_by_the_ledger(path: Path) -> None:
    led = Ledger(path, DATASET, create=True)
    led.grant("bob", "pure", 5, per_query_cap=Decimal("0.5"))
    with pytest.raises(PrivacyError) as err:
        led.charge("bob", Decimal("0.6"))
    assert err.value.code == "DPSQL-E061"
    led.charge("bob", Decimal("0.5"))
    assert spent(led, "bob") == Decimal("0.5")


def test_unknown_principal_is_refused(ledger: Ledger) -> None:
    with pytest.raises(PrivacyError) as err:
        ledger.charge("mallory", Decimal("0.1"))
    assert err.value.code == "DPSQL-E070"


def test_delta_budget_is_charged_separately(path: Path) -> None:
    led = Ledger(path, DATASET, create=True)
    led.grant("carol", "pure", 10, delta_limit=Decimal("1e-6"))
    led.charge("carol", 1, Decimal("6e-7"))
    with pytest.raises(PrivacyError) as err:
        led.charge("carol", 1, Decimal("6e-7"))
    assert err.value.code == "DPSQL-E070"
    b = led.budget("carol")
    assert (b.spent, b.delta_spent) == (Decimal(1), Decimal("6e-7"))


def test_delta_per_query_defaults_to_what_remains(path: Path) -> None:
    led = Ledger(path, DATASET, create=True)
    led.grant("d", "pure", 10, delta_limit=Decimal("1e-6"), delta_per_query=Decimal("4e-7"))
    assert led.budget("d").query_delta() == Decimal("4e-7")
    led.charge("d", 1, Decimal("4e-7"))
    led.charge("d", 1, Decimal("4e-7"))
    assert led.budget("d").query_delta() == Decimal("2e-7")  # never more than remains
    led.grant("d", "pure", 10, delta_limit=Decimal("1e-6"))
    assert led.budget("d").query_delta() == Decimal("2e-7")
    Ledger(path, DATASET).verify()


def test_regrant_keeps_spending_and_is_a_log_entry(ledger: Ledger) -> None:
    ledger.charge("alice", Decimal("0.75"))
    ledger.grant("alice", "pure", Decimal("2"))
    b = ledger.budget("alice")
    assert (b.limit, b.spent, b.remaining) == (Decimal(2), Decimal("0.75"), Decimal("1.25"))
    assert [e.kind for e in ledger.entries("alice")] == ["grant", "charge", "grant"]
    with pytest.raises(ValueError):
        ledger.grant("alice", "zcdp", Decimal("1"))  # a principal keeps one accounting


def test_global_limit_bounds_all_principals_together(path: Path) -> None:
    led = Ledger(path, DATASET, create=True)
    led.grant("a", "pure", 1)
    led.grant("b", "pure", 1)
    led.charge("a", Decimal("0.5"))
    led.set_global_limit("pure", Decimal("1.2"))  # counts what was spent before it was set
    led.charge("b", Decimal("0.7"))
    with pytest.raises(PrivacyError) as err:
        led.charge("a", Decimal("0.1"))
    assert err.value.code == "DPSQL-E070"
    assert led.global_limits()["pure"] == (Decimal("1.2"), Decimal("1.2"))
    Ledger(path, DATASET).verify()


def test_many_threads_never_overspend(ledger: Ledger) -> None:
    ok, refused, other = [], [], []

    def worker() -> None:
        for _ in range(3):
            try:
                ledger.charge("alice", Decimal("0.1"))
                ok.append(1)
            except PrivacyError as e:
                (refused if e.code == "DPSQL-E070" else other).append(e.code)

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert other == []
    assert len(ok) == 10 and len(refused) == 26
    assert spent(ledger) == Decimal("1")
    Ledger(ledger.path, DATASET).verify()


_CHILD_CHARGE = """
import sys
from decimal import Decimal
from dpsql.errors import PrivacyError
from dpsql.ledger import Ledger
led = Ledger(sys.argv[1], sys.argv[2], lock_timeout=120)
n = 0
for _ in range(int(sys.argv[3])):
    try:
        led.charge("alice", Decimal("0.1"))
        n += 1
    except PrivacyError as e:
        assert e.code == "DPSQL-E070", e.code
print(n)
"""


def test_processes_racing_never_overspend(ledger: Ledger) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD_CHARGE, str(ledger.path), DATASET, "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
             for _ in range(4)]
    counts = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        counts.append(int(out.split()[-1]))
    assert sum(counts) == 10
    assert spent(ledger) == Decimal("1")
    ledger.verify()


_CHILD_HOLD = """
import sys
from dpsql.ledger import Ledger
led = Ledger(sys.argv[1], sys.argv[2])
with led._locked():
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_second_process_fails_cleanly_then_succeeds_once_the_lock_is_free(ledger: Ledger) -> None:
    child = subprocess.Popen([sys.executable, "-c", _CHILD_HOLD, str(ledger.path), DATASET], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout.readline().strip() == "locked"
        impatient = Ledger.__new__(Ledger)
        impatient.__dict__.update(ledger.__dict__, lock_timeout=0.05)
        with pytest.raises(PrivacyError) as err:
            impatient.charge("alice", Decimal("0.1"))
        assert err.value.code == "DPSQL-E071"
        assert "safe to retry" in err.value.message
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    ledger.charge("alice", Decimal("0.1"))
    assert spent(ledger) == Decimal("0.1")


def _tamper(path: Path, sql: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


@pytest.mark.parametrize("sql", [
    "UPDATE entries SET amount = 0.01 WHERE seq = 2",
    "UPDATE entries SET principal = 'bob' WHERE seq = 2",
    "UPDATE budgets SET spent = 0",
    "UPDATE budgets SET limit_ = 100",
    "DELETE FROM entries WHERE seq = 2",
    "UPDATE meta SET value = 'other' WHERE key = 'dataset_id'",
])
def test_tampering_is_detected_at_open(ledger: Ledger, path: Path, sql: str) -> None:
    ledger.charge("alice", Decimal("0.3"))
    ledger.charge("alice", Decimal("0.2"))
    _tamper(path, sql)
    with pytest.raises(PrivacyError) as err:
        Ledger(path, DATASET)
    assert err.value.code == "DPSQL-E090"


def test_rewriting_a_whole_consistent_tail_is_caught_by_the_anchor(ledger: Ledger, path: Path) -> None:
    ledger.charge("alice", Decimal("0.3"))
    ledger.charge("alice", Decimal("0.2"))
    # drop the last charge and fix the budget so chain and budgets agree: only the anchor knows
    _tamper(path, "DELETE FROM entries WHERE seq = 3; UPDATE budgets SET spent = 0.3")
    with pytest.raises(PrivacyError) as err:
        Ledger(path, DATASET)
    assert err.value.code == "DPSQL-E090"


def test_status_changes_do_not_break_the_chain(ledger: Ledger, path: Path) -> None:
    a = ledger.charge("alice", Decimal("0.3"))
    b = ledger.charge("alice", Decimal("0.2"))
    ledger.finish(a.seq, released=True)
    ledger.finish(b.seq, released=False)
    ledger.finish(b.seq, released=True)  # a failed charge stays failed
    assert [e.status for e in ledger.entries(kind="charge")] == ["released", "failed_after_start"]
    assert spent(Ledger(path, DATASET)) == Decimal("0.5")  # no refund
    c = ledger.charge("alice", Decimal("0.1"))
    ledger.finish(c.seq, released=True, defer=True)
    assert ledger.entries(kind="charge")[-1].status == "reserved"
    ledger.charge("alice", Decimal("0.1"))  # carries the deferred mark
    assert [e.status for e in ledger.entries(kind="charge")][-2:] == ["released", "reserved"]


def test_entry_hash_covers_every_immutable_field(ledger: Ledger) -> None:
    ledger.charge("alice", Decimal("0.3"), query_sha256="ab", mechanisms=[{"agg": "mean"}], session_id="s")
    e = ledger.entries(kind="charge")[0]
    assert entry_hash(e.prev_hash, e) == e.row_hash
    for change in ({"amount": Decimal("0.2")}, {"query_sha256": "ac"}, {"mechanisms": "[]"}, {"session_id": "t"},
                   {"kind": "grant"}, {"accounting": "zcdp"}, {"delta": Decimal("1e-30")}, {"cap": Decimal(1)},
                   {"delta_cap": Decimal("1e-9")}, {"seq": 99}, {"principal": "bob"}):
        forged = type(e)(**{**e.__dict__, **change})
        assert entry_hash(e.prev_hash, forged) != e.row_hash


def test_missing_ledger_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(PrivacyError) as err:
        Ledger(tmp_path / "none.ledger.duckdb", DATASET)
    assert err.value.code == "DPSQL-E090"


def test_ledger_connection_cannot_read_files(ledger: Ledger, tmp_path: Path) -> None:
    secret = tmp_path / "s.csv"
    secret.write_text("a\n1\n")
    with ledger._locked():
        con = ledger._connect()
        try:
            with pytest.raises(duckdb.Error):
                con.execute(f"SELECT * FROM read_csv('{secret}')").fetchall()
        finally:
            con.close()
    assert os.path.exists(secret)
