"""Executor hardening: read-only data, locked configuration, no files, no extensions, CSPRNG _dpsql_rand."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from session_fakes import fake_install

from dpsql.errors import PrivacyError
from dpsql.executor import HARDENING, Executor


@pytest.fixture
def ex(db: Path):
    e = Executor(db, install=fake_install)
    yield e
    e.close()


def setting(ex: Executor, name: str) -> str:
    return str(ex.call(lambda con: con.execute(f"SELECT current_setting('{name}')").fetchone()[0]))


@pytest.mark.parametrize(("name", "value"), [
    ("enable_external_access", "False"),
    ("lock_configuration", "True"),
    ("autoload_known_extensions", "False"),
    ("autoinstall_known_extensions", "False"),
    ("python_enable_replacements", "False"),
    ("allow_community_extensions", "False"),
    ("error_on_division_by_zero", "False"),
])
def test_settings(ex: Executor, name: str, value: str) -> None:
    assert setting(ex, name) == value


def test_hardening_names_exist_on_this_duckdb() -> None:
    """Every hardening setting is known to this DuckDB: it can be set and read back (DuckDB 2.0.1 no longer
    lists error_on_division_by_zero in duckdb_settings(), but still accepts and reports it)."""
    con = duckdb.connect()
    for name, value in HARDENING:
        if name == "lock_configuration":
            continue  # locking is checked on the executor itself (test_settings)
        con.execute(f"SET {name} = {value}")
        got = con.execute(f"SELECT current_setting('{name}')").fetchall()[0][0]
        assert str(got).lower() == value, (name, got)


@pytest.mark.parametrize("sql", [
    "SET lock_configuration = false",
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SELECT * FROM read_csv('/etc/passwd')",
    "ATTACH '/tmp/dpsql-other.duckdb' AS o",
    "COPY (SELECT 1) TO '/tmp/dpsql-out.csv'",
    "LOAD httpfs",
    "INSTALL httpfs",
    "CREATE TABLE visits2 AS SELECT * FROM visits",
    "INSERT INTO visits VALUES (1, 'A', 1.0, 'x')",
    "UPDATE dpsql.protected_tables SET max_rows_per_unit = 1000",
])
def test_the_connection_itself_refuses(ex: Executor, sql: str) -> None:
    with pytest.raises(duckdb.Error):
        ex.call(lambda con: con.execute(sql).fetchall())


def test_data_is_attached_read_only_and_the_ledger_is_not_attached(ex: Executor) -> None:
    rows = ex.call(lambda con: con.execute(
        "SELECT database_name, readonly FROM duckdb_databases() WHERE NOT internal").fetchall())
    assert (ex.alias, True) in rows
    assert not any("ledger" in name for name, _ in rows)


def test_dpsql_rand_is_random_per_row(ex: Executor) -> None:
    n, distinct = ex.call(lambda con: con.execute(
        "SELECT count(r), count(DISTINCT r) FROM (SELECT _dpsql_rand() AS r FROM range(5000))").fetchone())
    assert n == distinct == 5000  # 64-bit collisions among 5000 words: probability < 1e-12


def test_run_turns_any_failure_into_generic_e080(ex: Executor) -> None:
    prepared = ex.prepare("SELECT CAST(note AS INTEGER) FROM visits")
    with pytest.raises(PrivacyError) as err:
        ex.run(prepared, "charged 0.5 epsilon")
    assert err.value.code == "DPSQL-E080"
    assert "n0" not in str(err.value) and "CANARY" not in str(err.value)
    assert "0.5" in str(err.value)


def test_prepare_reads_no_data(ex: Executor, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def spy(x):  # noqa: ANN001, ANN202
        calls.append(len(x))
        return x

    def register(con):  # noqa: ANN001, ANN202
        con.create_function("spy", spy, ["DOUBLE"], "DOUBLE", type="arrow", side_effects=True)

    ex.call(register)
    prepared = ex.prepare("SELECT spy(cost) FROM visits")
    assert prepared.types == ["DOUBLE"] and calls == []
    ex.run(prepared)
    assert calls


def test_timeout_is_charged_e080(db: Path) -> None:
    e = Executor(db, install=fake_install, timeout=0.01)
    try:
        slow = e.prepare("SELECT count(*) FROM range(100000000000) a")
        with pytest.raises(PrivacyError) as err:
            e.run(slow)
        assert err.value.code == "DPSQL-E080"
    finally:
        e.close()


def test_two_executors_on_one_file_are_independent(db: Path) -> None:
    a, b = Executor(db, install=fake_install), Executor(db, install=fake_install)
    try:
        assert a.call(lambda con: con.execute("SELECT count(*) FROM visits").fetchone()) == \
            b.call(lambda con: con.execute("SELECT count(*) FROM visits").fetchone())
    finally:
        a.close()
        b.close()


def test_closed_executor_refuses(ex: Executor) -> None:
    ex.close()
    ex.close()
    with pytest.raises(PrivacyError):
        ex.prepare("SELECT 1")


def test_real_binding_installs(db: Path) -> None:
    pytest.importorskip("dpsql.duck")
    e = Executor(db)
    try:
        [(v,)] = e.call(lambda con: con.execute("SELECT dp_count(cost, epsilon := 1.0) FROM visits").fetchall())
        assert v is not None
    finally:
        e.close()
