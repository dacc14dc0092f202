from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpsql.server.auth import PasswordStore
from dpsql.server.pgwire import PgServer, running, tls_context

from .fakes import FakeWorld

PASSWORD = "s3cret-pw"


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "server.crt", d / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return str(cert), str(key)


@pytest.fixture
def passwords(tmp_path: Path) -> PasswordStore:
    store = PasswordStore(tmp_path / "db.duckdb.passwords")
    store.set_password("alice", PASSWORD)
    store.set_password("bob", PASSWORD)
    store.set_password("nobody", PASSWORD)
    return store


@pytest.fixture
def server(world: FakeWorld, passwords: PasswordStore) -> Iterator[tuple[str, int]]:
    with running(PgServer(world.connect, host="127.0.0.1", port=0, passwords=passwords)) as addr:
        yield addr


@pytest.fixture
def tls_server(world: FakeWorld, passwords: PasswordStore, tls_files: tuple[str, str]) -> Iterator[tuple[str, int]]:
    ctx = tls_context(*tls_files)
    with running(PgServer(world.connect, host="127.0.0.1", port=0, passwords=passwords, ssl_context=ctx)) as addr:
        yield addr


