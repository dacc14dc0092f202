"""Fixtures shared by tests/frontdoors, tests/server and tests/clients: fake and real guarded sessions, servers,
TLS files."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from dpsql.server.auth import PasswordStore
from dpsql.server.pgwire import PgServer, running, tls_context

from .fakes import FakeWorld

PASSWORD = "s3cret-pw"


def guard_available() -> bool:
    """The real guarded session needs dpsql.session, dpsql.admin and dpsql.guard.plan."""
    try:
        from dpsql.guard import plan  # noqa: F401
    except ImportError:
        return False
    return importlib.util.find_spec("dpsql.session") is not None


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a self-signed certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "server.crt", d / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return str(cert), str(key)


@pytest.fixture
def passwords(tmp_path: Path) -> PasswordStore:
    store = PasswordStore(tmp_path / "db.duckdb.passwords")
    for name in ("alice", "bob", "nobody"):
        store.set_password(name, PASSWORD)
    return store


@pytest.fixture
def server(world: FakeWorld, passwords: PasswordStore) -> Iterator[tuple[str, int]]:
    """A plaintext server (127.0.0.1, free port) over fake sessions."""
    with running(PgServer(world.connect, host="127.0.0.1", port=0, passwords=passwords)) as addr:
        yield addr


@pytest.fixture
def tls_server(world: FakeWorld, passwords: PasswordStore, tls_files: tuple[str, str]) -> Iterator[tuple[str, int]]:
    """A server that requires TLS (plaintext connections are refused)."""
    ctx = tls_context(*tls_files)
    with running(PgServer(world.connect, host="127.0.0.1", port=0, passwords=passwords, ssl_context=ctx)) as addr:
        yield addr


@pytest.fixture
def real_db(tmp_path: Path) -> str:
    """A small DuckDB file protected with the real admin API (skips while the guard is not there)."""
    if not guard_available():
        pytest.skip("the guard (dpsql.guard.plan) is not available yet")
    import dpsql

    path = tmp_path / "flights.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE flights AS SELECT ['AA','UA','DL'][i % 3 + 1] AS carrier, (i % 7)::INTEGER AS month, "
                "(i % 50)::DOUBLE - 5 AS dep_delay FROM range(3000) r(i)")
    con.execute("CREATE TABLE airlines AS SELECT * FROM (VALUES ('AA', 'American'), ('UA', 'United'), "
                "('DL', 'Delta')) v(carrier, name)")
    con.close()
    adm = dpsql.admin(str(path))
    adm.protect("flights")
    adm.public_keys("flights", "carrier", ["AA", "DL", "UA"])
    adm.public_table("airlines")
    adm.grant("alice", epsilon=10)
    PasswordStore(f"{path}.passwords").set_password("alice", PASSWORD)
    return str(path)


@pytest.fixture
def real_server(real_db: str) -> Iterator[tuple[str, int]]:
    import dpsql

    store = PasswordStore(f"{real_db}.passwords")
    with running(PgServer(lambda user: dpsql.connect(real_db, analyst=user), host="127.0.0.1", port=0,
                          passwords=store)) as addr:
        yield addr
