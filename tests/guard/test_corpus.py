"""Every hostile query is refused with its exact code, statically, with a message free of data."""

from __future__ import annotations

import re

import duckdb
import pytest
from corpus import CAPPED, EXTENDED, HOSPITAL, HOSTILE, extended_catalog, hospital_catalog

from dpsql.errors import PrivacyError
from dpsql.guard import plan

THREAT_CODES = {"DPSQL-E0" + c for c in ("01 02 03 10 11 12 20 21 22 30 31 32 40 41 42 43 50 51 60 61").split()}


def test_corpus_is_large_and_covers_every_static_code() -> None:
    assert len(HOSTILE) + len(CAPPED) >= 100
    assert {code for _, code in HOSTILE + CAPPED} == THREAT_CODES
    assert len({sql for sql, _ in HOSTILE}) == len(HOSTILE)


def test_hospital_list_uses_only_the_session_schema() -> None:
    for sql, _ in HOSPITAL:
        assert not re.search(r"\b(diag|events|accounts)\b", sql), sql


@pytest.mark.parametrize(("sql", "code"), HOSTILE)
def test_hostile_refused_with_code(sql: str, code: str) -> None:
    with pytest.raises(PrivacyError) as info:
        plan(sql, extended_catalog())
    assert info.value.code == code, info.value.message
    assert "CANARY" not in str(info.value)
    assert re.fullmatch(r"DPSQL-E0\d\d", info.value.code)


@pytest.mark.parametrize(("sql", "code"), HOSPITAL)
def test_hostile_same_code_on_hospital_catalog(sql: str, code: str) -> None:
    with pytest.raises(PrivacyError) as info:
        plan(sql, hospital_catalog())
    assert info.value.code == code


@pytest.mark.parametrize(("sql", "code"), CAPPED)
def test_per_query_cap(sql: str, code: str) -> None:
    with pytest.raises(PrivacyError) as info:
        plan(sql, hospital_catalog(cap=1))
    assert info.value.code == code
    plan(sql, hospital_catalog(cap=100))  # fine under a larger cap


@pytest.mark.parametrize(("sql", "code"), EXTENDED[:3])
def test_mixed_units_refused_even_if_each_part_is_fine(sql: str, code: str) -> None:
    assert code == "DPSQL-E042"


def test_refusals_never_touch_a_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard only opens in-memory DuckDB connections, to split statements; it never runs SQL."""
    real_connect = duckdb.connect
    opened: list[object] = []

    class Spy:
        def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
            self._con = con

        def extract_statements(self, sql: str):  # noqa: ANN201
            return self._con.extract_statements(sql)

        def close(self) -> None:
            self._con.close()

    def connect(database: str = ":memory:", *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        opened.append(database)
        return Spy(real_connect(database, *args, **kwargs))

    monkeypatch.setattr(duckdb, "connect", connect)  # the guard imports duckdb when it parses, not before
    for sql, _ in HOSTILE:
        with pytest.raises(PrivacyError):
            plan(sql, extended_catalog())
    assert opened and set(opened) == {":memory:"}
