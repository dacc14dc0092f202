"""Fixtures for guarded sessions: a small hospital database, its admin, and an executor tripwire.

By default the session runs with the stand-in guard and binding of ``session_fakes`` (so these tests
exercise the session, ledger and executor on their own); tests marked ``real_guard`` use the real ones.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from session_fakes import fake_install, fake_plan

import dpsql
import dpsql.session
from dpsql.executor import Executor

CANARY = "CANARY_7731"


def make_db(path: Path, extra_patient: bool = False) -> Path:
    """visits(patient_id, clinic, cost, note) with 40 patients x 3 visits; ``extra_patient`` adds
    patient 999 (a neighbouring database)."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE visits AS SELECT (i // 3)::INTEGER AS patient_id, ['A', 'B', 'C'][i % 3 + 1] AS clinic, "
                "((i * 37) % 100)::DOUBLE AS cost, 'n' || i::VARCHAR AS note FROM range(120) r(i)")
    con.execute(f"INSERT INTO visits VALUES (500, 'A', 42.0, '{CANARY}')")
    if extra_patient:
        con.execute("INSERT INTO visits VALUES (999, 'B', 99.0, 'x'), (999, 'C', 1.0, 'y')")
    con.execute("CREATE TABLE clinics AS SELECT * FROM (VALUES ('A', 'North'), ('B', 'South'), ('C', 'East')) "
                "v(clinic, name)")
    con.execute("CREATE TABLE secrets AS SELECT 1 AS x")
    con.close()
    adm = dpsql.admin(path)
    adm.protect("visits", privacy_unit="patient_id", max_rows_per_unit=3)
    adm.public_keys("visits", "clinic", ["A", "B", "C"])
    adm.public_table("clinics")
    adm.grant("alice", epsilon=3)
    return path


@pytest.fixture(autouse=True)
def fake_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "real_guard" not in request.keywords:
        monkeypatch.setattr(dpsql.session, "_default_planner", fake_plan)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_db(tmp_path / "hospital.duckdb")


@pytest.fixture
def session(db: Path):
    s = dpsql.connect(db, analyst="alice", install=fake_install)
    yield s
    s.close()


class Tripwire:
    def __init__(self) -> None:
        self.armed = False
        self.calls = 0


@pytest.fixture
def tripwire(monkeypatch: pytest.MonkeyPatch) -> Tripwire:
    """Fails the test if the executor runs a query while armed (rejections must never reach it)."""
    wire = Tripwire()
    real_run = Executor.run

    def run(self, prepared, cost_text=""):  # noqa: ANN001, ANN202
        wire.calls += 1
        if wire.armed:
            pytest.fail("the executor ran a query that should have been refused")
        return real_run(self, prepared, cost_text)

    monkeypatch.setattr(Executor, "run", run)
    return wire


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_guard: run with the real dpsql.guard and dpsql.install")
