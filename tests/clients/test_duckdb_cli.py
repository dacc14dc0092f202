"""The stock DuckDB CLI reaching the server through the postgres extension's postgres_query.

DuckDB 2.0 has no CLI on PyPI and duckdb-cli 1.5.x cannot open dpsql's files, so the route is: duckdb-cli 1.5.5 plus
the duckdb-extension-postgres 1.5.5 wheel (a repackaged, DuckDB-signed binary that loads offline once renamed to
postgres_scanner.duckdb_extension), kept in their own venv because they pin duckdb==1.5.5.  CI creates it with
``python3 -m venv .ci/duckdb-cli-venv && .ci/duckdb-cli-venv/bin/pip install duckdb-cli==1.5.5
duckdb-extension-postgres==1.5.5``; DPSQL_DUCKDB_CLI_VENV points elsewhere.  Without it the test is skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from frontdoors.harness import PASSWORD

pytestmark = pytest.mark.clients
ROOT = Path(__file__).resolve().parents[2]


def _tools() -> tuple[Path, Path] | None:
    venv = Path(os.environ.get("DPSQL_DUCKDB_CLI_VENV", ROOT / ".ci" / "duckdb-cli-venv"))
    cli = venv / "bin" / "duckdb"
    pattern = "lib/python3*/site-packages/duckdb_extension_postgres/extensions/*/postgres.duckdb_extension"
    ext = sorted(venv.glob(pattern))
    if not cli.exists() or not ext:
        return None
    return cli, ext[0]


@pytest.fixture(scope="module")
def duckdb_cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tools = _tools()
    if tools is None:
        pytest.skip("DuckDB CLI route not installed offline: needs a venv with duckdb-cli==1.5.5 and "
                    "duckdb-extension-postgres==1.5.5 at .ci/duckdb-cli-venv (or DPSQL_DUCKDB_CLI_VENV)")
    cli, ext = tools
    renamed = tmp_path_factory.mktemp("ext") / "postgres_scanner.duckdb_extension"
    shutil.copy(ext, renamed)  # the extension's entry point is derived from the file name
    return cli, renamed


def run_cli(cli_ext: tuple[Path, Path], addr: tuple[str, int], sql: str, sslmode: str = "disable",
            tmp: Path | None = None) -> subprocess.CompletedProcess:
    cli, ext = cli_ext
    script = (f"LOAD '{ext}';\nSET pg_use_text_protocol = true;\n"
              f"ATTACH 'host={addr[0]} port={addr[1]} user=alice password={PASSWORD} dbname=flights "
              f"sslmode={sslmode}' AS gw (TYPE postgres, READ_ONLY);\n{sql}\n")
    return subprocess.run([str(cli), "-batch", "-csv"], input=script, capture_output=True, text=True, timeout=120)


def test_duckdb_cli(server, world, duckdb_cli) -> None:
    r = run_cli(duckdb_cli, server,
                "SELECT * FROM postgres_query('gw', 'SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n "
                "FROM flights GROUP BY carrier ORDER BY carrier');\n"
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'gw' ORDER BY ALL;\n"
                "SELECT * FROM postgres_query('gw', 'SELECT dep_delay FROM flights');")
    assert "AA,100.0" in r.stdout and "UA,100.0" in r.stdout
    assert "airlines" in r.stdout and "flights" in r.stdout  # catalog browse from dpsql metadata
    assert "DPSQL-E021" in r.stderr


def test_duckdb_cli_tls(tls_server, duckdb_cli) -> None:
    r = run_cli(duckdb_cli, tls_server, "SELECT * FROM postgres_query('gw', "
                "'SELECT dp_count(dep_delay, epsilon := 0.1) AS n FROM flights');", sslmode="require")
    assert "300.0" in r.stdout, r.stderr
