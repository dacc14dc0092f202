"""jupysql in an in-process IPython shell against the server over SQLAlchemy + psycopg2: ``%sql`` runs a dp
query, ``%sqlcmd tables`` and ``%sqlcmd columns -t flights`` read the emulated catalog (the table check behind
the latter is a zero-row probe, ``SELECT * FROM "flights" WHERE 1=0``, which the guard answers from the schema)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from frontdoors.harness import PASSWORD

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(importlib.util.find_spec("sql") is None or importlib.util.find_spec("IPython") is None,
                       reason="jupysql and IPython not installed (pip install jupysql ipython)"),
    pytest.mark.skipif(importlib.util.find_spec("psycopg2") is None, reason="psycopg2 not installed"),
]


@pytest.fixture
def shell(real_server: tuple[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("PLOOMBER_STATS_ENABLED", "false")  # jupysql's telemetry stays off
    monkeypatch.setenv("HOME", str(tmp_path))
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    try:
        sh.run_line_magic("load_ext", "sql")
        sh.run_line_magic("sql", f"postgresql+psycopg2://alice:{PASSWORD}@{real_server[0]}:{real_server[1]}/flights "
                                 "--alias dpsql")
        yield sh
    finally:
        from sql.connection import ConnectionManager

        ConnectionManager.close_all()
        InteractiveShell.clear_instance()


def test_jupysql_sql_and_sqlcmd(shell: Any, real_db: str) -> None:
    import dpsql

    r = shell.run_line_magic("sql", "SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights "
                                    "GROUP BY carrier ORDER BY carrier")
    out = r.dict()
    assert out["carrier"] == ("AA", "DL", "UA") and all(abs(n - 1000) < 60 for n in out["n"])
    tables = str(shell.run_line_magic("sqlcmd", "tables"))
    assert "flights" in tables and "airlines" in tables
    columns = str(shell.run_line_magic("sqlcmd", "columns -t flights"))
    for name in ("carrier", "month", "dep_delay", "DOUBLE PRECISION", "dpsql: public keys declared (3 values)"):
        assert name in columns, columns
    # the query was charged once; the table checks and the catalog cost nothing
    assert [e.amount for e in dpsql.admin(real_db).charges("alice")] == [Decimal("0.5")]
