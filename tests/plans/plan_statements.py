"""The statements the summary plans send to DuckDB, recorded (shared by the tests of tests/plans that count passes
or compare statements across values)."""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa
import pytest

from dpsql import plans
from dpsql.noise import Rng


def run_recorded(monkeypatch: pytest.MonkeyPatch, con: duckdb.DuckDBPyConnection, sql: str, rng: Rng
                 ) -> tuple[pa.Table, list[str]]:
    """Run ``sql`` through the plans, recording every statement (registered names blanked: they carry a counter)."""
    calls: list[str] = []
    fetch = plans._fetch

    def counting(c: duckdb.DuckDBPyConnection, q: str, params: dict | None = None) -> pa.Table:
        calls.append(re.sub(r"_dpsql_plan_\w+?\d+", "_", q))
        return fetch(c, q, params)

    monkeypatch.setattr(plans, "_fetch", counting)
    try:
        return plans.run(con, sql, rng), calls
    finally:
        monkeypatch.setattr(plans, "_fetch", fetch)
