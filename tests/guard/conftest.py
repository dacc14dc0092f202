"""Fixtures for guard tests: a hospital database and an *exact* stand-in binding.

The stand-in macros compute the plain statistic without noise (``dp_count`` is ``count``), so the tests
can check what the rewritten SQL feeds the aggregates: bounded rows, empty public groups, thresholds.
``_dpsql_rand()`` is DuckDB's ``random()`` here; the real executor registers a CSPRNG UDF.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

from dpsql.surface import FUNCTIONS, signature

sys.path.insert(0, str(Path(__file__).parent))

#: the noise-free statistic of each plain dp_* function; the macros take the signatures of dpsql.surface
EXACT_MACROS = {
    "dp_count": "count(x)",
    "dp_count_star": "count(*)",
    "dp_sum": "sum(x)",
    "dp_mean": "avg(x)",
    "dp_avg": "avg(x)",
    "dp_var": "var_samp(x)",
    "dp_stddev": "stddev_samp(x)",
    "dp_quantile": "quantile_cont(x, p)",
    "dp_median": "median(x)",
    "dp_iqr": "quantile_cont(x, 0.75) - quantile_cont(x, 0.25)",
}


def _ci(body: str) -> str:
    """The exact stand-in of a dp_*_ci result: the statistic with a point interval."""
    return f"{{'value': ({body})::DOUBLE, 'lo': ({body})::DOUBLE, 'hi': ({body})::DOUBLE}}"


def exact_binding(con: duckdb.DuckDBPyConnection) -> None:
    """Noise-free dp_* macros (and their dp_*_ci twins) with the signatures of dpsql.surface (those of
    sql/macros.sql), and a stand-in ``_dpsql_rand()``."""
    for fn in FUNCTIONS.values():
        body = EXACT_MACROS[fn.plain]
        con.execute(f"CREATE OR REPLACE MACRO {signature(fn)} AS {_ci(body) if fn.interval else body}")
    con.execute("CREATE OR REPLACE MACRO _dpsql_rand() AS (random() * 9e18)::BIGINT")


def hospital(con: duckdb.DuckDBPyConnection, extra_patient: bool = False) -> None:
    """40 patients x 3 visits in clinics A-C (like tests/session), plus patient 7 with 5 visits in D."""
    con.execute("CREATE TABLE visits AS SELECT (i // 3)::INTEGER AS patient_id, ['A', 'B', 'C'][i % 3 + 1] "
                "AS clinic, ((i * 37) % 100)::DOUBLE AS cost, 'n' || i::VARCHAR AS note FROM range(120) r(i)")
    con.execute("INSERT INTO visits SELECT 1000, 'D', 1.0, 'CANARY_7731' FROM range(5)")
    if extra_patient:
        con.execute("INSERT INTO visits VALUES (999, 'B', 99.0, 'x'), (999, 'C', 1.0, 'y')")
    con.execute("CREATE TABLE clinics AS SELECT * FROM (VALUES ('A', 'North'), ('B', 'South'), ('C', 'East')) "
                "v(clinic, name)")
    con.execute("CREATE TABLE diag AS SELECT (i % 40)::INTEGER AS patient_id, 'x' || (i % 3)::VARCHAR AS code "
                "FROM range(200) r(i)")
    con.execute("CREATE TABLE events AS SELECT ['x', 'y'][i % 2 + 1] AS kind, i::DOUBLE AS amount FROM range(50) r(i)")
    con.execute("CREATE TABLE accounts AS SELECT i::INTEGER AS account_id, 1.0::DOUBLE AS balance FROM range(5) r(i)")


@pytest.fixture
def exact_con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    hospital(con)
    exact_binding(con)
    yield con
    con.close()
