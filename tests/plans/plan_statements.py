"""The statements the summary plans send to DuckDB, recorded (shared by the tests of tests/plans that count passes
or compare statements across values)."""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa
import pytest

from dpsql import plans
from dpsql.noise import Rng


def blank(q: str) -> str:
    """A statement with its registered names (they carry a counter) and the released parameters the plans
    inline as literals (``plans.LITERAL``: functions of released values, which differ with the data) blanked."""
    return plans.LITERAL.sub("?", re.sub(r"_dpsql_plan_\w+?\d+", "_", q))


def run_recorded(monkeypatch: pytest.MonkeyPatch, con: duckdb.DuckDBPyConnection, sql: str, rng: Rng
                 ) -> tuple[pa.Table, list[str]]:
    """Run ``sql`` through the plans, recording every statement (:func:`blank`)."""
    calls: list[str] = []
    fetch = plans._fetch

    def counting(c: duckdb.DuckDBPyConnection, q: str, params: dict | None = None) -> pa.Table:
        calls.append(blank(q))
        return fetch(c, q, params)

    monkeypatch.setattr(plans, "_fetch", counting)
    try:
        return plans.run(con, sql, rng), calls
    finally:
        monkeypatch.setattr(plans, "_fetch", fetch)
