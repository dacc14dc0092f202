"""Stored releases in the ledger (issue 19): replay entries in the hash chain, data versions, the bounded
store, and the migration of a schema-version-1 ledger."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

import dpsql.ledger as L
from dpsql.errors import PrivacyError
from dpsql.ledger import Ledger, entry_hash

DATASET = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data.ledger.duckdb"


@pytest.fixture
def ledger(path: Path) -> Ledger:
    led = Ledger(path, DATASET, create=True)
    led.grant("alice", "pure", Decimal("1.0"))
    led.grant("bob", "pure", Decimal("1.0"))
    return led


def release(led: Ledger, key: str, data: bytes = b"rows", who: str = "alice", cost: str = "0.1",
            fresh: bool = False) -> L.Charge:
    """A charge under ``key`` whose rows are then released and stored (what a session does; ``fresh``:
    what a session with replay=False does)."""
    c = led.charge(who, Decimal(cost), release_key=None if fresh else key, query_sha256="q" + key)
    assert c.replayed_from is None
    led.finish(c.seq, released=True, defer=True)
    assert led.store_release(who, c.seq, key, c.data_version, data)
    return c


def _tamper(path: Path, sql: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def test_a_stored_release_is_replayed_at_no_cost_and_recorded_in_the_chain(ledger: Ledger, path: Path) -> None:
    first = release(ledger, "k1", b"the rows")
    again = ledger.charge("alice", Decimal("0.1"), release_key="k1", query_sha256="qk1", session_id="s2")
    assert (again.replayed_from, again.stored, again.cost, again.delta) == (first.seq, b"the rows", 0, 0)
    assert again.budget.spent == Decimal("0.1")
    e = ledger.entries("alice")[-1]
    assert (e.kind, e.seq, e.ref_seq, e.amount, e.status, e.session_id) == ("replay", again.seq, first.seq, 0,
                                                                            "released", "s2")
    assert entry_hash(e.prev_hash, e) == e.row_hash
    forged = type(e)(**{**e.__dict__, "ref_seq": first.seq + 1})
    assert entry_hash(e.prev_hash, forged) != e.row_hash  # the reference is hashed
    Ledger(path, DATASET).verify()
    assert [r.seq for r in ledger.releases("alice")] == [first.seq]


def test_a_replay_needs_no_budget_left(ledger: Ledger) -> None:
    first = release(ledger, "k1", cost="1.0")
    with pytest.raises(PrivacyError) as err:
        ledger.charge("alice", Decimal("0.1"), release_key="other")
    assert err.value.code == "DPSQL-E070"
    assert ledger.charge("alice", Decimal("1.0"), release_key="k1").replayed_from == first.seq


def test_other_keys_and_principals_are_charged(ledger: Ledger) -> None:
    release(ledger, "k1")
    assert ledger.charge("alice", Decimal("0.1"), release_key="k2").replayed_from is None
    assert ledger.charge("bob", Decimal("0.1"), release_key="k1").replayed_from is None
    assert ledger.charge("alice", Decimal("0.1")).replayed_from is None  # no key: a plain charge
    assert ledger.budget("alice").spent == Decimal("0.3") and ledger.budget("bob").spent == Decimal("0.1")


def test_a_data_version_bump_is_a_log_entry_and_ends_replays(ledger: Ledger, path: Path) -> None:
    assert ledger.data_version() == 1
    stale = ledger.charge("alice", Decimal("0.1"), release_key="k0")  # charged at version 1 ...
    release(ledger, "k1")
    assert ledger.bump_data_version(note="June load") == 2
    e = ledger.entries()[-1]
    assert (e.kind, e.principal, e.accounting, e.amount, e.mechanisms) == ("data_version", "*", "none", 2,
                                                                           '{"note":"June load"}')
    assert ledger.releases() == []  # older versions' releases are dropped
    assert not ledger.store_release("alice", stale.seq, "k0", stale.data_version, b"x")  # ... stored too late
    c = ledger.charge("alice", Decimal("0.1"), release_key="k1")
    assert (c.replayed_from, c.data_version) == (None, 2)
    reopened = Ledger(path, DATASET)
    assert reopened.data_version() == 2
    reopened.verify()


def test_a_newer_release_of_the_same_key_replaces_the_stored_one(ledger: Ledger) -> None:
    release(ledger, "k1", b"old")
    newer = release(ledger, "k1", b"new", fresh=True)  # a session with replay=False
    assert [r.seq for r in ledger.releases()] == [newer.seq]
    assert ledger.charge("alice", Decimal("0.1"), release_key="k1").stored == b"new"
    assert ledger.store_release("alice", newer.seq, "k1", 1, b"again")  # storing a charge twice: one row
    assert [(r.seq, r.nbytes) for r in ledger.releases()] == [(newer.seq, 5)]


def test_the_store_is_capped_per_principal_least_recently_used_first(ledger: Ledger,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "RELEASE_CAP", 2)
    a = release(ledger, "a")
    release(ledger, "b")
    ledger.charge("alice", Decimal("0.1"), release_key="a")  # a is now used more recently than b
    release(ledger, "b2", who="bob")  # another principal's store does not count
    release(ledger, "c")
    assert {r.query_key for r in ledger.releases("alice")} == {"a", "c"}
    assert ledger.charge("alice", Decimal("0.1"), release_key="b").replayed_from is None  # evicted: charged
    assert ledger.charge("alice", Decimal("0.1"), release_key="a").replayed_from == a.seq


def test_the_store_is_capped_in_bytes(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "RELEASE_BYTES", 10)
    c = ledger.charge("alice", Decimal("0.1"), release_key="big")
    assert not ledger.store_release("alice", c.seq, "big", 1, b"x" * 11)  # larger than the cap: never stored
    release(ledger, "a", b"123456")
    release(ledger, "b", b"123456")  # 12 bytes together: a goes
    assert [r.query_key for r in ledger.releases()] == ["b"]


@pytest.mark.parametrize("sql", [
    "UPDATE entries SET ref_seq = 2 WHERE kind = 'replay'",
    "UPDATE entries SET amount = 0.1 WHERE kind = 'replay'",
    "UPDATE entries SET principal = 'bob' WHERE kind = 'replay'",
    "UPDATE meta SET value = '1' WHERE key = 'data_version'",
    "UPDATE entries SET amount = 3 WHERE kind = 'data_version'",
])
def test_tampered_replays_and_versions_are_detected_at_open(ledger: Ledger, path: Path, sql: str) -> None:
    release(ledger, "k1")
    ledger.charge("alice", Decimal("0.1"), release_key="k1")
    ledger.bump_data_version()
    _tamper(path, sql)
    with pytest.raises(PrivacyError) as err:
        Ledger(path, DATASET)
    assert err.value.code == "DPSQL-E090"


def test_a_replay_across_a_data_version_does_not_verify(ledger: Ledger, path: Path) -> None:
    """Even a consistent forgery (re-hashed chain) of a replay that crosses a version is caught."""
    first = release(ledger, "k1")
    ledger.bump_data_version()
    con = duckdb.connect(str(path))  # insert the release back under version 2, as if it had not been dropped
    con.execute("INSERT INTO releases VALUES (?, 'alice', 2, 'k1', now(), now(), 1, 'x'::BLOB)", [first.seq])
    con.close()
    ledger.charge("alice", Decimal("0.1"), release_key="k1")  # the (forged) store is trusted ...
    with pytest.raises(PrivacyError) as err:  # ... but the chain shows a replay of a version-1 charge
        Ledger(path, DATASET)
    assert err.value.code == "DPSQL-E090"


_V1_ENTRIES = """CREATE TABLE entries (seq BIGINT PRIMARY KEY, entry_id VARCHAR NOT NULL UNIQUE,
  kind VARCHAR NOT NULL CHECK (kind IN ('grant', 'global_limit', 'charge')), ts TIMESTAMP NOT NULL,
  principal VARCHAR NOT NULL, session_id VARCHAR,
  accounting VARCHAR NOT NULL CHECK (accounting IN ('pure', 'zcdp')),
  amount DECIMAL(38, 18) NOT NULL CHECK (amount >= 0), delta DECIMAL(38, 30) NOT NULL DEFAULT 0,
  cap DECIMAL(38, 18), delta_cap DECIMAL(38, 30), query_sha256 VARCHAR, mechanisms VARCHAR,
  status VARCHAR NOT NULL CHECK (status IN ('granted', 'reserved', 'released', 'failed_after_start')),
  prev_hash VARCHAR NOT NULL, row_hash VARCHAR NOT NULL)"""


def test_a_version_1_ledger_is_migrated_when_opened(ledger: Ledger, path: Path) -> None:
    ledger.charge("alice", Decimal("0.25"), query_sha256="ab", mechanisms=[{"agg": "mean"}])
    before = ledger.entries()
    cols = L._ENTRY_COLS.removesuffix(", ref_seq")
    con = duckdb.connect(str(path))  # turn the file back into what dpsql wrote before replays existed
    con.execute("DROP TABLE releases")
    con.execute("CREATE TABLE old AS SELECT * FROM entries")
    con.execute("DROP TABLE entries")
    con.execute(_V1_ENTRIES)
    con.execute(f"INSERT INTO entries SELECT {cols} FROM old")
    con.execute("DROP TABLE old")
    con.execute("DELETE FROM meta WHERE key = 'data_version'")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(duckdb.Error):  # really version 1: no replay kind
        _tamper(path, "INSERT INTO entries SELECT seq + 100, entry_id || 'x', 'replay', ts, principal, session_id, "
                      "accounting, amount, delta, cap, delta_cap, query_sha256, mechanisms, status, prev_hash, "
                      "row_hash FROM entries LIMIT 1")
    led = Ledger(path, DATASET)  # a session's open: migrates, then verifies the old hashes
    assert led.entries() == before
    assert led.data_version() == 1
    first = release(led, "k1")
    assert led.charge("alice", Decimal("0.1"), release_key="k1").replayed_from == first.seq
    Ledger(path, DATASET).verify()
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
    con.close()


def test_a_ledger_from_a_newer_dpsql_is_refused(ledger: Ledger, path: Path) -> None:
    _tamper(path, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(PrivacyError) as err:
        Ledger(path, DATASET)
    assert err.value.code == "DPSQL-E090"
