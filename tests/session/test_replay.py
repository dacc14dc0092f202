"""Consistent answers, charged once (issue 19): a guarded session replays the stored release of a query the
analyst already had released on the same data version, at no cost, recorded in the ledger."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from conftest import make_db
from session_fakes import fake_install

import dpsql
import dpsql.ledger
from dpsql.errors import PrivacyError
from dpsql.ledger import Ledger, ledger_path
from dpsql.session import normalize_sql, release_key

REPO = Path(__file__).resolve().parents[2]
Q = "SELECT clinic, dp_mean(cost, epsilon := 0.1) AS m FROM visits GROUP BY clinic ORDER BY clinic"


def log(db: Path) -> list:
    return dpsql.admin(db).log()


def kinds(db: Path) -> list[str]:
    return [e.kind for e in log(db)]


def ledger(db: Path) -> Ledger:
    return Ledger(ledger_path(db), dpsql.admin(db)._dataset_id())


def connect(db: Path, analyst: str = "alice", **kw: object) -> dpsql.session.Session:
    return dpsql.connect(db, analyst=analyst, install=fake_install, **kw)


def test_the_same_query_twice_is_charged_once_with_identical_rows(session, db: Path, tripwire) -> None:
    first = session.sql(Q)
    tripwire.armed = True  # the replay never reaches the executor
    again = session.sql(Q)
    assert again.table.equals(first.table) and again.columns == ["clinic", "m"]
    assert (first.charged, first.replayed_from) == (Decimal("0.3"), None)
    assert (again.charged, again.delta_charged, again.replayed_from) == (0, 0, first.seq)
    assert again.remaining == first.remaining == Decimal("2.7") and session.budget().spent == Decimal("0.3")
    assert again.mechanisms == first.mechanisms
    assert "replayed_from=" in repr(again)
    charge, replay = log(db)
    assert (charge.kind, charge.seq, charge.amount) == ("charge", first.seq, Decimal("0.3"))
    assert (replay.kind, replay.seq, replay.ref_seq, replay.amount, replay.session_id) == (
        "replay", again.seq, first.seq, 0, session.session_id)
    ledger(db).verify()  # the replay entries keep the hash chain verifiable


def test_replays_cross_sessions_and_reopened_ledgers(db: Path) -> None:
    with connect(db) as s:
        first = s.sql(Q)
    with connect(db) as s:  # a new session (a BI refresh on a new connection, a server restart)
        again = s.sql(Q)
    assert (again.replayed_from, again.charged) == (first.seq, 0) and again.table.equals(first.table)
    assert ledger(db).budget("alice").spent == Decimal("0.3")


_CHILD = """
import sys
sys.path.insert(0, sys.argv[3])
import dpsql, dpsql.session
from session_fakes import fake_install, fake_plan
dpsql.session._default_planner = fake_plan
with dpsql.connect(sys.argv[1], analyst="alice", install=fake_install) as s:
    r = s.sql(sys.argv[2])
    print(r.replayed_from, r.charged)
"""


def test_another_process_replays_the_release(session, db: Path) -> None:
    first = session.sql(Q)  # this process keeps its session (and the data file) open meanwhile
    r = subprocess.run([sys.executable, "-c", _CHILD, str(db), Q, str(Path(__file__).parent)],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == [str(first.seq), "0"]


@pytest.mark.parametrize("variant", [
    "select clinic, DP_MEAN(cost, epsilon := 0.1) as m from visits group by clinic order by clinic",
    "SELECT clinic,\n       dp_mean(cost, epsilon := 0.1) AS m  -- mean cost\n  FROM visits\n"
    " GROUP BY clinic /* per clinic */ ORDER BY clinic;",
])
def test_whitespace_comments_and_keyword_case_do_not_matter(session, db: Path, variant: str) -> None:
    first = session.sql(Q)
    assert session.sql(variant).replayed_from == first.seq
    assert normalize_sql(variant.rstrip(";")) == normalize_sql(Q)


@pytest.mark.parametrize("other", [
    Q.replace("0.1", "0.2"),  # another parameter
    Q.replace("AS m", "AS mean"),  # another output name
    Q.replace("visits GROUP", "visits WHERE cost > 1 GROUP"),
    Q.replace("FROM visits", "FROM Visits"),  # identifiers are kept as written
])
def test_a_different_query_is_a_new_release(session, db: Path, other: str) -> None:
    session.sql(Q)
    r = session.sql(other)
    assert r.replayed_from is None and r.charged > 0
    assert release_key(other) != release_key(Q)


def test_a_different_principal_is_charged(db: Path) -> None:
    dpsql.admin(db).grant("bob", epsilon=3)
    with connect(db) as a, connect(db, "bob") as b:
        a.sql(Q)
        r = b.sql(Q)
        assert (r.replayed_from, r.charged) == (None, Decimal("0.3"))
        assert b.sql(Q).replayed_from == r.seq  # bob's own release is his to replay
    assert kinds(db) == ["charge", "charge", "replay"]


def test_a_data_version_bump_makes_the_query_a_new_release(session, db: Path) -> None:
    first = session.sql(Q)
    assert dpsql.admin(db).bump_data_version("reloaded visits") == 2  # while the session runs
    second = session.sql(Q)
    assert (second.replayed_from, second.charged) == (None, Decimal("0.3"))
    assert session.sql(Q).replayed_from == second.seq != first.seq
    assert kinds(db) == ["charge", "data_version", "charge", "replay"]
    assert dpsql.admin(db).data_version() == 2
    ledger(db).verify()


def test_a_refused_query_stays_refused_and_nothing_is_stored(session, db: Path, tripwire) -> None:
    tripwire.armed = True
    for _ in range(2):
        with pytest.raises(PrivacyError) as err:
            session.sql("SELECT * FROM visits")
        assert err.value.code == "DPSQL-E020"
    assert log(db) == [] and ledger(db).releases() == []


def test_budget_exhaustion_is_not_stored_and_a_stored_release_is_still_replayed(tmp_path: Path) -> None:
    db = make_db(tmp_path / "h.duckdb")
    dpsql.admin(db).grant("alice", epsilon=Decimal("0.3"))
    with connect(db) as s:
        first = s.sql(Q)  # spends it all
        for _ in range(2):
            with pytest.raises(PrivacyError) as err:
                s.sql(Q.replace("0.1", "0.2"))
            assert err.value.code == "DPSQL-E070"
        assert s.sql(Q).replayed_from == first.seq  # a refresh still works on an empty budget
    assert len(ledger(db).releases()) == 1


def test_a_failure_after_the_charge_is_never_stored(session, db: Path) -> None:
    bad = "SELECT dp_sum(CAST(note AS INTEGER), epsilon := 0.2) FROM visits"
    for _ in range(2):
        with pytest.raises(PrivacyError) as err:
            session.sql(bad)
        assert err.value.code == "DPSQL-E080"
    assert kinds(db) == ["charge", "charge"] and ledger(db).releases() == []
    assert session.budget().spent == Decimal("1.2")


def test_a_timeout_is_never_stored(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.session as S

    real_run = S.Executor.run

    class Interrupted:  # the relation as a timeout's interrupt leaves it
        def to_arrow_table(self) -> None:
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    def timed_out(self, prepared, cost_text=""):  # noqa: ANN001, ANN202
        prepared._relation = Interrupted()
        return real_run(self, prepared, cost_text)

    with connect(db) as s:
        with monkeypatch.context() as m:
            m.setattr(S.Executor, "run", timed_out)
            with pytest.raises(PrivacyError) as err:
                s.sql(Q)
            assert err.value.code == "DPSQL-E080"
        assert s.sql(Q).replayed_from is None  # charged again, then stored
        assert s.sql(Q).replayed_from is not None
    assert kinds(db) == ["charge", "charge", "replay"]


def test_free_queries_are_neither_stored_nor_replayed(session, db: Path) -> None:
    for _ in range(2):
        r = session.sql("SELECT clinic, name FROM clinics ORDER BY clinic")
        assert (r.charged, r.seq, r.replayed_from) == (0, None, None)
    assert log(db) == [] and ledger(db).releases() == []


def test_replay_false_gives_a_fresh_release_that_later_replays_return(session, db: Path) -> None:
    first = session.sql(Q)
    with connect(db, replay=False) as fresh:
        second = fresh.sql(Q)
        assert (second.replayed_from, second.charged) == (None, Decimal("0.3"))
        fresh.replay = True  # it may change on an open session
        assert fresh.sql(Q).replayed_from == second.seq
    assert session.sql(Q).replayed_from == second.seq != first.seq  # the store keeps the latest release
    assert session.budget().spent == Decimal("0.6")


def test_the_cap_evicts_and_an_evicted_release_is_charged_again(session, db: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dpsql.ledger, "RELEASE_CAP", 2)
    queries = [Q.replace("0.1", e) for e in ("0.1", "0.2", "0.3")]
    for q in queries:
        session.sql(q)
    assert len(ledger(db).releases("alice")) == 2
    assert session.sql(queries[0]).replayed_from is None  # evicted (least recently used): a new release
    assert session.sql(queries[2]).replayed_from is not None


def test_a_release_over_the_byte_cap_is_not_stored(session, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dpsql.ledger, "RELEASE_BYTES", 100)
    session.sql(Q)
    assert session.sql(Q).replayed_from is None
    assert ledger(db).releases() == []


def test_the_replay_keeps_the_latency_quantum(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.session as S

    clock = {"t": 100.0}
    slept: list[float] = []
    monkeypatch.setattr(S, "_clock", lambda: clock["t"])
    monkeypatch.setattr(S, "_sleep", slept.append)
    with connect(db, latency_quantum=0.25) as s:
        s.sql(Q)
        s.sql(Q)
    assert slept == [pytest.approx(0.25), pytest.approx(0.25)]  # the (frozen) clock: a full quantum each


@pytest.mark.real_guard
@pytest.mark.skipif(importlib.util.find_spec("dpsql.guard") is None or importlib.util.find_spec("dpsql.duck")
                    is None, reason="needs dpsql.guard and dpsql.duck")
def test_real_guard_replays_the_same_noise(db: Path) -> None:
    q = "SELECT clinic, dp_count(*, epsilon := 0.1) AS n FROM visits GROUP BY clinic"
    with dpsql.connect(db, analyst="alice") as s:
        first = s.sql(q)
        again = s.sql("select clinic, DP_COUNT(*, epsilon := 0.1) as n -- refresh\n from visits group by clinic")
        assert again.replayed_from == first.seq and again.rows == first.rows and again.charged == 0
        s.replay = False
        fresh = [s.sql(q).rows for _ in range(3)]
    assert any(rows != first.rows for rows in fresh)  # fresh noise (three clinics, three draws each)
    assert kinds(db) == ["charge", "replay", "charge", "charge", "charge"]
    ledger(db).verify()


def test_an_unreadable_stored_release_fails_closed_and_a_fresh_one_can_be_asked(session, db: Path) -> None:
    session.sql(Q)
    con = duckdb.connect(str(ledger_path(db)))
    con.execute("UPDATE releases SET result = 'garbage'::BLOB")
    con.close()
    with pytest.raises(PrivacyError) as err:
        session.sql(Q)
    assert err.value.code == "DPSQL-E090"
    session.replay = False
    assert session.sql(Q).charged == Decimal("0.3")
    session.replay = True
    assert session.sql(Q).replayed_from is not None  # the fresh release replaced the unreadable one
    assert session.budget().spent == Decimal("0.6")
