"""Plans run on the hardened executor with the real dp_* binding and the CSPRNG ``_dpsql_rand()``."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import hospital
from corpus import ALLOWED, hospital_catalog

from dpsql.guard import plan


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    from dpsql.executor import Executor

    path = Path(tmp_path_factory.mktemp("guard")) / "hospital.duckdb"
    con = duckdb.connect(str(path))
    hospital(con)
    con.close()
    ex = Executor(path)
    yield ex
    ex.close() if hasattr(ex, "close") else None


@pytest.mark.parametrize(("sql", "cost"), ALLOWED)
def test_allowed_runs_on_the_executor(sql: str, cost: str, executor) -> None:  # noqa: ANN001
    p = plan(sql, hospital_catalog())
    prepared = executor.prepare(p.sql)
    assert prepared.columns == p.output_columns
    table = executor.run(prepared)
    assert "CANARY" not in repr(table.to_pylist())


def test_public_keys_release_every_declared_key(executor) -> None:  # noqa: ANN001
    p = plan("SELECT clinic, dp_count(*, epsilon := 1) AS n FROM visits WHERE cost < 0 GROUP BY clinic",
             hospital_catalog())
    rows = executor.run(executor.prepare(p.sql)).to_pylist()
    assert sorted(r["clinic"] for r in rows) == ["A", "B", "C"]
    assert all(r["n"] is not None for r in rows)
