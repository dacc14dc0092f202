"""pgJDBC (the driver inside Metabase, Tableau, DBeaver) through a small Java program: DpsqlJdbc.java."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from frontdoors.harness import PASSWORD

JAR = Path("/usr/share/java/postgresql.jar")
pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(shutil.which("javac") is None or not JAR.exists(),
                       reason="needs javac and pgJDBC (apt default-jdk-headless libpostgresql-jdbc-java)"),
]


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jdbc")
    src = Path(__file__).with_name("DpsqlJdbc.java")
    subprocess.run(["javac", "-d", str(out), "-cp", str(JAR), str(src)], check=True, capture_output=True, timeout=300)
    return out


def run_java(classes: Path, url: str) -> list[str]:
    r = subprocess.run(["java", "-cp", f"{JAR}:{classes}", "DpsqlJdbc", url, "alice", PASSWORD],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_jdbc_end_to_end(server, world, classes: Path) -> None:
    out = run_java(classes, f"jdbc:postgresql://{server[0]}:{server[1]}/flights?sslmode=disable")
    assert out[0].startswith("CONNECTED 15.0")
    assert out[1:4] == ["DP AA 100.0", "DP DL 100.0", "DP UA 100.0"]
    assert out[4] == "NOTICE dpsql: charged epsilon 0.5, remaining 9.5"
    assert out[5].startswith("REJECT 42501 ERROR: DPSQL-E021")
    # 7 executions of one PreparedStatement: pgJDBC switches to a server-prepared, binary-result statement
    # after prepareThreshold=5; every answer must stay right (a text/binary mix-up gives 0.0)
    assert out[6:13] == [f"PARAM {i} 100.0" for i in range(7)]
    assert "TABLE main.flights" in out and "TABLE main.airlines" in out
    assert [line for line in out if line.startswith("COLUMN")] == [
        "COLUMN month int4", "COLUMN carrier text", "COLUMN dep_delay float8", "COLUMN day date"]
    # autocommit off, fetch size 1: BEGIN/COMMIT answered locally, rows fetched one Execute at a time
    assert out[-1] == "TXN AA=100.0 DL=100.0 UA=100.0"
    charges = [c[2] for c in world.charges]
    assert sum(1 for c in charges if "epsilon := 0.25" in c) == 1  # one charge for the whole suspended portal
    assert charges.count("SELECT dp_count(dep_delay, epsilon := 0.125) AS n FROM flights WHERE carrier = 'UA' "
                         "AND month >= 0") == 7


def test_jdbc_tls(tls_server, tls_files, classes: Path) -> None:
    url = f"jdbc:postgresql://localhost:{tls_server[1]}/flights?sslmode=verify-full&sslrootcert={tls_files[0]}"
    out = run_java(classes, url)
    assert out[1] == "DP AA 100.0"
