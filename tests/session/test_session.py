"""Guarded sessions: charge before release, refusals charge nothing, E080, budgets, kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import CANARY, make_db
from session_fakes import FakePlan, fake_install

import dpsql
from dpsql.errors import PrivacyError
from dpsql.ledger import Ledger, ledger_path

REPO = Path(__file__).resolve().parents[2]
Q = "SELECT clinic, dp_mean(cost, epsilon := 0.1) AS m FROM visits GROUP BY clinic ORDER BY clinic"


def charges(db: Path) -> list:
    return dpsql.admin(db).charges()


def test_query_is_charged_and_released(session, db: Path) -> None:
    r = session.sql(Q)
    assert r.columns == ["clinic", "m"]
    assert [row[0] for row in r.rows] == ["A", "B", "C"]
    assert r.table.num_rows == 3
    assert (r.charged, r.remaining, r.accounting) == (Decimal("0.3"), Decimal("2.7"), "pure")  # 0.1 x 3 rows/unit
    b = session.budget()
    assert (b.limit, b.spent, b.remaining, b.accounting) == (Decimal(3), Decimal("0.3"), Decimal("2.7"), "pure")
    [c] = charges(db)
    assert (c.amount, c.status, c.principal, c.session_id) == (Decimal("0.3"), "released", "alice",
                                                               session.session_id)  # written with the store
    assert (r.seq, r.replayed_from) == (c.seq, None)


def test_describe_charges_nothing_and_runs_nothing(session, db: Path, tripwire) -> None:
    tripwire.armed = True
    assert session.describe(Q) == [("clinic", "VARCHAR"), ("m", "DOUBLE")]
    assert session.budget().spent == 0 and charges(db) == []


@pytest.mark.parametrize(("sql", "code"), [
    ("SELECT * FROM visits", "DPSQL-E020"),
    ("SELECT dp_count(x) FROM secrets", "DPSQL-E010"),
    ("SELECT dp_count(cost) FROM nowhere", "DPSQL-E010"),
])
def test_refusals_charge_nothing_and_never_run(session, db: Path, tripwire, sql: str, code: str) -> None:
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        session.sql(sql)
    assert err.value.code == code
    with pytest.raises(PrivacyError):
        session.describe(sql)
    assert tripwire.calls == 0
    assert session.budget().spent == 0 and charges(db) == []


def test_a_query_duckdb_cannot_bind_is_refused_uncharged(session, db: Path, tripwire,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan DuckDB cannot bind (a guard gap, simulated: the real guard refuses this text itself, E012) is refused
    as E001 before anything is charged or run."""
    monkeypatch.setattr(session, "_planner", lambda sql, catalog: FakePlan(sql, Decimal("0.3")))
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        session.sql("SELECT dp_mean(no_such_column, epsilon := 0.1) FROM visits")
    assert err.value.code == "DPSQL-E001"
    assert session.budget().spent == 0


def test_guard_bug_fails_closed(session, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(sql, catalog):  # noqa: ANN001, ANN202
        raise KeyError("boom")

    monkeypatch.setattr(session, "_planner", broken)
    with pytest.raises(PrivacyError) as err:
        session.sql(Q)
    assert err.value.code == "DPSQL-E001"
    assert session.budget().spent == 0


def test_data_dependent_failure_is_generic_and_charged(session, db: Path) -> None:
    with pytest.raises(PrivacyError) as err:
        session.sql("SELECT dp_sum(CAST(note AS INTEGER), epsilon := 0.2) FROM visits")
    e = err.value
    assert e.code == "DPSQL-E080"
    assert CANARY not in str(e) and "n0" not in str(e) and "Conversion" not in str(e)
    assert "0.6" in e.message  # it names the charge, nothing else
    assert e.__cause__ is None and e.__suppress_context__
    [c] = charges(db)
    assert (c.amount, c.status) == (Decimal("0.6"), "failed_after_start")
    assert session.budget().spent == Decimal("0.6")  # no refund


def test_division_by_zero_is_null_not_an_error(session) -> None:
    r = session.sql("SELECT dp_sum(cost / (patient_id - patient_id), epsilon := 0.1) AS s FROM visits")
    assert r.charged == Decimal("0.3")


def test_budget_exhaustion_refuses_before_running(session, db: Path, tripwire) -> None:
    session.sql("SELECT dp_count(cost, epsilon := 0.9) FROM visits")  # 2.7 of 3
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        session.sql("SELECT dp_count(cost, epsilon := 0.2) FROM visits")  # 0.6 > 0.3 left
    assert err.value.code == "DPSQL-E070"
    assert session.budget().spent == Decimal("2.7")
    assert len(charges(db)) == 1


def test_ten_tenths_then_refused(tmp_path: Path) -> None:
    db = make_db(tmp_path / "h.duckdb")
    dpsql.admin(db).grant("alice", epsilon=Decimal("0.3"))  # each query below costs 0.01 x 3 rows per unit
    with dpsql.connect(db, analyst="alice", install=fake_install, replay=False) as s:  # each run charged
        for _ in range(10):
            s.sql("SELECT dp_count(cost, epsilon := 0.01) FROM visits")
        assert s.budget().spent == Decimal("0.3")
        with pytest.raises(PrivacyError) as err:
            s.sql("SELECT dp_count(cost, epsilon := 0.01) FROM visits")
        assert err.value.code == "DPSQL-E070"


def test_per_query_cap(tmp_path: Path) -> None:
    db = make_db(tmp_path / "h.duckdb")
    dpsql.admin(db).grant("alice", epsilon=3, per_query_cap=Decimal("0.5"))
    with dpsql.connect(db, analyst="alice", install=fake_install) as s:
        assert s.catalog().max_query_epsilon == 0.5
        with pytest.raises(PrivacyError) as err:
            s.sql("SELECT dp_count(cost, epsilon := 0.2) FROM visits")  # 0.6
        assert err.value.code == "DPSQL-E061"
        assert s.budget().spent == 0


def test_zcdp_budget(tmp_path: Path) -> None:
    db = make_db(tmp_path / "h.duckdb")
    dpsql.admin(db).grant("zed", rho=Decimal("0.5"), delta=Decimal("1e-6"))
    with dpsql.connect(db, analyst="zed", install=fake_install) as s:
        assert s.accounting == "zcdp" and s.catalog().accounting == "zcdp"
        assert s.catalog().delta == pytest.approx(1e-6)
        r = s.sql("SELECT dp_count(cost, epsilon := 0.1) FROM visits")
        assert r.accounting == "zcdp" and s.budget().accounting == "zcdp"


def test_tables_come_from_metadata(session) -> None:
    tabs = {t.name: t for t in session.tables()}
    assert set(tabs) == {"visits", "clinics"}  # 'secrets' is not registered
    v = tabs["visits"]
    assert (v.kind, v.privacy_unit, v.max_rows_per_unit, v.public_keys) == ("protected", "patient_id", 3,
                                                                             {"clinic": ("A", "B", "C")})
    assert v.columns == {"patient_id": "INTEGER", "clinic": "VARCHAR", "cost": "DOUBLE", "note": "VARCHAR"}
    assert tabs["clinics"].kind == "public"


def test_unknown_or_revoked_analyst_cannot_connect(db: Path) -> None:
    with pytest.raises(PrivacyError) as err:
        dpsql.connect(db, analyst="mallory", install=fake_install)
    assert err.value.code == "DPSQL-E070"
    dpsql.admin(db).revoke("alice")
    with pytest.raises(PrivacyError) as err:
        dpsql.connect(db, analyst="alice", install=fake_install)
    assert err.value.code == "DPSQL-E070"


def test_database_without_policy_is_refused(tmp_path: Path) -> None:
    import duckdb

    p = tmp_path / "plain.duckdb"
    duckdb.connect(str(p)).close()
    with pytest.raises(PrivacyError) as err:
        dpsql.connect(p, analyst="alice", install=fake_install)
    assert err.value.code == "DPSQL-E090"


def test_tampered_ledger_refuses_to_open(db: Path, tripwire) -> None:
    import duckdb

    with dpsql.connect(db, analyst="alice", install=fake_install) as s:
        s.sql(Q)
    con = duckdb.connect(str(ledger_path(db)))
    con.execute("UPDATE entries SET amount = 0.0001 WHERE kind = 'charge'")
    con.close()
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        dpsql.connect(db, analyst="alice", install=fake_install)
    assert err.value.code == "DPSQL-E090"


def test_closed_session_refuses(session) -> None:
    session.close()
    session.close()
    with pytest.raises(PrivacyError):
        session.sql(Q)


_KILLED_CHILD = """
import os, signal, sys
sys.path.insert(0, sys.argv[3])
import dpsql, dpsql.session
from session_fakes import fake_install, fake_plan
dpsql.session._default_planner = fake_plan
s = dpsql.connect(sys.argv[1], analyst="alice", install=fake_install)
dpsql.session._after_charge = lambda: os.kill(os.getpid(), signal.SIGKILL)
s.sql(sys.argv[2])
print("released")  # never reached
"""


def test_kill_9_between_charge_and_release_keeps_the_charge(db: Path) -> None:
    r = subprocess.run([sys.executable, "-c", _KILLED_CHILD, str(db), Q, str(Path(__file__).parent)],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert "released" not in r.stdout
    adm = dpsql.admin(db)
    adm.verify()
    [c] = adm.charges()
    assert (c.amount, c.status) == (Decimal("0.3"), "reserved")
    assert adm.budgets()[0].spent == Decimal("0.3")
    with dpsql.connect(db, analyst="alice", install=fake_install) as s:  # locks were released by the kernel
        assert s.sql(Q).remaining == Decimal("2.4")


@pytest.mark.parametrize("query", [Q, "SELECT dp_count(cost, epsilon := 0.25) AS n FROM visits WHERE cost > 10"])
def test_cost_is_identical_on_neighbouring_databases(tmp_path: Path, query: str) -> None:
    rows = []
    for name, extra in (("d1.duckdb", False), ("d2.duckdb", True)):
        db = make_db(tmp_path / name, extra_patient=extra)
        with dpsql.connect(db, analyst="alice", install=fake_install) as s:
            s.sql(query)
        [c] = dpsql.admin(db).charges()
        rows.append((c.kind, c.principal, c.accounting, c.amount, c.delta, c.query_sha256, c.mechanisms, c.status))
    assert rows[0] == rows[1]


def test_many_threads_in_one_session_never_overspend(session) -> None:
    import threading

    session.replay = False  # the same query charged every time
    codes = []

    def work() -> None:
        for _ in range(3):
            try:
                session.sql("SELECT dp_count(cost, epsilon := 0.1) FROM visits")  # 0.3 each
                codes.append("ok")
            except PrivacyError as e:
                codes.append(e.code)

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert codes.count("ok") == 10 and codes.count("DPSQL-E070") == 8
    assert session.budget().spent == Decimal(3)


def test_ledger_file_is_private_and_separate(session, db: Path) -> None:
    assert oct(os.stat(ledger_path(db)).st_mode & 0o777) == "0o600"
    names = [r[0] for r in session._executor.con.execute("SELECT database_name FROM duckdb_databases()").fetchall()]
    assert not any("ledger" in n for n in names)
    Ledger(ledger_path(db), dpsql.admin(db)._dataset_id()).verify()


def test_latency_is_padded_to_the_quantum(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.session as S

    clock = {"t": 100.0}
    slept = []
    monkeypatch.setattr(S, "_clock", lambda: clock["t"])

    def run(self, prepared, cost_text=""):  # noqa: ANN001, ANN202
        clock["t"] += 0.37  # pretend the query ran for 0.37 s
        import pyarrow as pa

        return pa.table({"n": [1.0]})

    monkeypatch.setattr(S.Executor, "run", run)
    monkeypatch.setattr(S, "_sleep", slept.append)
    with dpsql.connect(db, analyst="alice", install=fake_install, latency_quantum=0.25) as s:
        s.sql("SELECT dp_count(cost, epsilon := 0.1) AS n FROM visits")
    assert slept == [pytest.approx(0.13)]  # 0.37 s padded to 0.5 s
    with pytest.raises(ValueError):
        dpsql.connect(db, analyst="alice", install=fake_install, latency_quantum=0)


def test_the_quantum_covers_the_guard_and_the_charge(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: time spent before the run (guard, prepare, ledger) is inside the padded time too."""
    import dpsql.session as S

    clock = {"t": 100.0}
    slept = []
    monkeypatch.setattr(S, "_clock", lambda: clock["t"])
    planner = S._default_planner

    def slow_plan(sql, catalog):  # noqa: ANN001, ANN202
        clock["t"] += 0.2
        return planner(sql, catalog)

    def run(self, prepared, cost_text=""):  # noqa: ANN001, ANN202
        clock["t"] += 0.1
        import pyarrow as pa

        return pa.table({"n": [1.0]})

    monkeypatch.setattr(S, "_default_planner", slow_plan)
    monkeypatch.setattr(S.Executor, "run", run)
    monkeypatch.setattr(S, "_sleep", slept.append)
    with dpsql.connect(db, analyst="alice", install=fake_install, latency_quantum=0.25) as s:
        s.sql("SELECT dp_count(cost, epsilon := 0.1) AS n FROM visits")
    assert slept == [pytest.approx(0.2)]  # 0.2 s guard + 0.1 s run padded to 0.5 s


_OTHER_PROCESS = """
import sys
sys.path.insert(0, sys.argv[3])
import dpsql, dpsql.session
from session_fakes import fake_install, fake_plan
dpsql.session._default_planner = fake_plan
with dpsql.connect(sys.argv[1], analyst="alice", install=fake_install, replay=sys.argv[4] == "replay") as s:
    r = s.sql(sys.argv[2])
    print(r.replayed_from, r.charged)
"""


def test_sessions_in_two_processes_share_the_budget(session, db: Path) -> None:
    session.replay = False
    session.sql(Q)  # this process holds a session (and the data file) open meanwhile
    r = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(db), Q, str(Path(__file__).parent), "fresh"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == ["None", "0.3"]
    assert session.budget().spent == Decimal("0.6")
    assert session.sql(Q).remaining == Decimal("2.1")
