"""Apache Superset against ``dpsql serve``, through Superset's REST API (optional; issue 19).

Superset's dependency pins clash with the project's, so it lives in a venv of its own and is driven by
subprocess and HTTP; the test skips, saying why, unless ``DPSQL_SUPERSET_PYTHON`` (or the running Python) can
import ``superset`` and ``psycopg2`` and the ``superset`` CLI sits next to it::

    python3 -m venv /tmp/superset-venv
    /tmp/superset-venv/bin/pip install apache-superset==6.1.0 psycopg2-binary rich cachetools 'flask-caching<2.5'
    DPSQL_SUPERSET_PYTHON=/tmp/superset-venv/bin/python pytest tests/clients/test_superset.py

(apache-superset 6.1.0 does not declare ``rich`` and ``cachetools``, and fails with Flask-Caching 2.5.)

The module initialises Superset once (SQLite metadata database, admin user, ``superset run`` on a free port,
about a minute), connects it to an in-process dpsql server over ``postgresql+psycopg2`` as the principal
``superset`` (opted in to plain aggregates at ε 0.1 per call) and checks: the connection and catalog, a SQL Lab
dp query (with the ``LIMIT 1001`` Superset appends) answered and then replayed, a refusal showing its code, a
chart with the dataset's default ``COUNT(*)`` metric fetched and refreshed three times (charged once, then three
replays, one noisy value), a filter pick-list answered from declared keys for free, and a virtual dataset charged
once although Superset runs its SQL twice to learn its columns."""

from __future__ import annotations

import http.cookiejar
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from frontdoors.harness import guard_available

from dpsql.server.auth import PasswordStore
from dpsql.server.pgwire import PgServer, running

pytestmark = pytest.mark.clients

PRINCIPAL, SS_PASSWORD = "superset", "superset-pw-1"
EPSILON = Decimal("0.1")  # the opt-in's ε per plain aggregate
INSTALL = ("python3 -m venv /tmp/superset-venv && /tmp/superset-venv/bin/pip install apache-superset==6.1.0 "
           "psycopg2-binary rich cachetools 'flask-caching<2.5', then set DPSQL_SUPERSET_PYTHON="
           "/tmp/superset-venv/bin/python")


def _superset_python() -> tuple[Path, Path]:
    """The Python that has Superset, and its ``superset`` CLI; skips with the reason when either is missing."""
    given = os.environ.get("DPSQL_SUPERSET_PYTHON")
    py = Path(given) if given else Path(sys.executable)
    where = (f"DPSQL_SUPERSET_PYTHON={given}" if given
             else f"this Python ({sys.executable}; DPSQL_SUPERSET_PYTHON unset)")
    if not py.exists():
        pytest.skip(f"{where} does not exist; {INSTALL}")
    probe = subprocess.run([str(py), "-c", "import importlib.util as u, sys; "
                            "sys.exit(0 if u.find_spec('superset') and u.find_spec('psycopg2') else 1)"],
                           capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"apache-superset and psycopg2 are not importable by {where}; {INSTALL}")
    cli = py.parent / "superset"
    if not cli.exists():
        pytest.skip(f"the superset CLI is missing next to {py}; {INSTALL}")
    return py, cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def superset_cli() -> tuple[Path, Path]:
    return _superset_python()


@pytest.fixture(scope="module")
def dpsql_server(superset_cli: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[dict[str, Any]]:
    """A small protected flights table, the principal ``superset`` with the plain-aggregates opt-in, and an
    in-process server that records every statement reaching the guarded session."""
    if not guard_available():
        pytest.skip("the guard (dpsql.guard.plan) is not available yet")
    import dpsql

    path = tmp_path_factory.mktemp("superset-db") / "flights.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE flights AS SELECT ['AA','UA','DL'][i % 3 + 1] AS carrier, ['JFK','LGA'][i % 2 + 1] "
                "AS origin, (i % 7)::INTEGER AS month, (i % 50)::DOUBLE - 5 AS dep_delay FROM range(3000) r(i)")
    con.execute("CREATE TABLE airlines AS SELECT * FROM (VALUES ('AA', 'American'), ('UA', 'United'), "
                "('DL', 'Delta')) v(carrier, name)")
    con.close()
    adm = dpsql.admin(str(path))
    adm.protect("flights")
    adm.public_keys("flights", "carrier", ["AA", "DL", "UA"])
    adm.public_table("airlines")
    adm.grant(PRINCIPAL, epsilon=10)
    adm.plain_aggregates(PRINCIPAL, epsilon=EPSILON)
    store = PasswordStore(f"{path}.passwords")
    store.set_password(PRINCIPAL, SS_PASSWORD)
    statements: list[str] = []

    def session(user: str) -> Any:
        s = dpsql.connect(str(path), analyst=user)
        inner = s.sql

        def sql(query: str, *args: Any, **kwargs: Any) -> Any:
            statements.append(query)
            return inner(query, *args, **kwargs)

        s.sql = sql  # type: ignore[method-assign]
        return s

    with running(PgServer(session, host="127.0.0.1", port=0, passwords=store, database_name="flights")) as addr:
        yield {"db": str(path), "addr": addr, "statements": statements}


@pytest.fixture(scope="module")
def superset(superset_cli: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Superset initialised in a temporary home and running on a free port; yields its base URL."""
    _, cli = superset_cli
    home = tmp_path_factory.mktemp("superset-home")
    (home / "superset_config.py").write_text(
        'SECRET_KEY = "dpsql-test-not-secret-0123456789abcdef"\n'
        f'SQLALCHEMY_DATABASE_URI = "sqlite:///{home}/superset.db"\n'
        "TALISMAN_ENABLED = False\nRATELIMIT_ENABLED = False\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SUPERSET_CONFIG_PATH=str(home / "superset_config.py"), SUPERSET_HOME=str(home), FLASK_APP="superset")
    for args in (["db", "upgrade"],
                 ["fab", "create-admin", "--username", "admin", "--firstname", "a", "--lastname", "b", "--email",
                  "admin@example.org", "--password", "admin"],
                 ["init"]):
        done = subprocess.run([str(cli), *args], env=env, cwd=home, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or "Traceback" in done.stderr:
            pytest.fail(f"superset {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    port = _free_port()
    log = open(home / "superset.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([str(cli), "run", "-p", str(port), "--host", "127.0.0.1", "--with-threads"], env=env,
                            cwd=home, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"superset run did not come up:\n{(home / 'superset.log').read_text()[-3000:]}")
            time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Api:
    """Superset's REST API with a JWT and the session's CSRF token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.headers = {"Referer": base}
        _, body = self.call("POST", "/api/v1/security/login",
                            {"username": "admin", "password": "admin", "provider": "db", "refresh": True})
        self.headers["Authorization"] = f"Bearer {body['access_token']}"
        _, body = self.call("GET", "/api/v1/security/csrf_token/")
        self.headers["X-CSRFToken"] = body["result"]

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = self.headers if body is None else {**self.headers, "Content-Type": "application/json"}
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with self.opener.open(req, timeout=300) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, raw.decode(errors="replace")[:3000]

    def sqllab(self, db_id: int, sql: str) -> tuple[int, Any]:
        return self.call("POST", "/api/v1/sqllab/execute/",
                         {"database_id": db_id, "sql": sql, "schema": "main", "runAsync": False,
                          "client_id": f"t{time.time_ns() % 10**9}", "queryLimit": 1000})  # as the UI sends


@pytest.fixture(scope="module")
def api(superset: str, dpsql_server: dict[str, Any]) -> tuple[Api, int]:
    """A logged-in API client and the id of the Superset database that points at the dpsql server."""
    a = Api(superset)
    host, port = dpsql_server["addr"]
    uri = f"postgresql+psycopg2://{PRINCIPAL}:{SS_PASSWORD}@{host}:{port}/flights"
    status, body = a.call("POST", "/api/v1/database/test_connection/",
                          {"database_name": "dpsql", "sqlalchemy_uri": uri})
    assert status == 200, body
    status, body = a.call("POST", "/api/v1/database/", {"database_name": "dpsql", "sqlalchemy_uri": uri,
                                                         "expose_in_sqllab": True})
    assert status == 201, body
    return a, body["id"]


@pytest.fixture(scope="module")
def dataset(api: tuple[Api, int]) -> int:
    """The physical dataset main.flights (Superset reflects its columns and adds the metric COUNT(*))."""
    a, db_id = api
    status, body = a.call("POST", "/api/v1/dataset/", {"database": db_id, "schema": "main", "table_name": "flights"})
    assert status == 201, body
    return body["id"]


def _log(db: str) -> list[Any]:
    import dpsql

    return dpsql.admin(db).log(PRINCIPAL)


def _new_entries(db: str, before: int) -> list[tuple[str, Decimal, int | None, int]]:
    return [(e.kind, e.amount, e.ref_seq, e.seq) for e in _log(db)[before:]]


# ---------------------------------------------------------------------------------------------- tests
def test_connection_and_catalog(api: tuple[Api, int], dpsql_server: dict[str, Any]) -> None:
    a, db_id = api
    before = len(_log(dpsql_server["db"]))
    status, body = a.call("GET", f"/api/v1/database/{db_id}/schemas/")
    assert status == 200 and "main" in body["result"], body
    status, body = a.call("GET", f"/api/v1/database/{db_id}/tables/?q=(schema_name:main)")
    assert status == 200 and sorted(t["value"] for t in body["result"]) == ["airlines", "flights"], body
    status, body = a.call("GET", f"/api/v1/database/{db_id}/table_metadata/?name=flights&schema=main")
    assert status == 200, body
    assert [c["name"] for c in body["columns"]] == ["carrier", "origin", "month", "dep_delay"]
    assert len(_log(dpsql_server["db"])) == before  # connecting and browsing cost nothing


def test_sqllab_dp_query_replayed_and_refusal(api: tuple[Api, int], dpsql_server: dict[str, Any]) -> None:
    a, db_id = api
    db, before = dpsql_server["db"], len(_log(dpsql_server["db"]))
    sql = "SELECT carrier, dp_count(dep_delay, epsilon := 0.2) AS n FROM flights GROUP BY carrier ORDER BY carrier"
    first, again = a.sqllab(db_id, sql), a.sqllab(db_id, sql)
    assert first[0] == 200 and first[1]["status"] == "success", first
    assert [r["carrier"] for r in first[1]["data"]] == ["AA", "DL", "UA"]
    assert again[1]["data"] == first[1]["data"]  # the stored release, same noise
    assert any(s.rstrip().endswith("LIMIT 1001") for s in dpsql_server["statements"])  # Superset's own LIMIT
    (k1, amt, _, seq), (k2, zero, ref, _) = _new_entries(db, before)
    assert (k1, amt, k2, zero, ref) == ("charge", Decimal("0.2"), "replay", Decimal(0), seq)
    status, body = a.sqllab(db_id, "SELECT * FROM dpsql_budget()")
    assert status == 200 and body["data"][0]["spent"] == pytest.approx(0.2), body
    status, body = a.sqllab(db_id, "SELECT kind, charged, replayed_from FROM dpsql_last_charge()")
    assert body["data"] == [{"kind": "replay", "charged": 0, "replayed_from": seq}], body
    status, body = a.sqllab(db_id, "SELECT dep_delay FROM flights")
    # the code reaches SQL Lab's error: E020 (raw rows), despite the LIMIT Superset appends
    assert status >= 400 and "DPSQL-E020" in json.dumps(body), body
    assert len(_log(db)) == before + 2  # the budget relations and the refusal cost nothing


def test_default_count_chart_refreshed_three_times_is_charged_once(api: tuple[Api, int], dataset: int,
                                                                     dpsql_server: dict[str, Any]) -> None:
    """Issue 19's "done when": one ledger charge, one noisy value, across a view and three refreshes."""
    a, ds_id, db = api[0], dataset, dpsql_server["db"]
    status, body = a.call("GET", f"/api/v1/dataset/{ds_id}")
    assert [(m["metric_name"], m["expression"]) for m in body["result"]["metrics"]] == [("count", "COUNT(*)")]
    for groupby, viz in (((), "big_number_total"), (("carrier",), "table")):
        qc = {"datasource": {"id": ds_id, "type": "table"}, "force": False, "result_format": "json",
              "result_type": "full",
              "queries": [{"metrics": ["count"], "columns": list(groupby), "row_limit": 10000,
                           "orderby": [["count", False]] if groupby else []}]}
        params = {"datasource": f"{ds_id}__table", "viz_type": viz, "metric": "count", "metrics": ["count"],
                  "groupby": list(groupby)}
        status, body = a.call("POST", "/api/v1/chart/", {"slice_name": f"dpsql {viz}", "viz_type": viz,
                                                          "datasource_id": ds_id, "datasource_type": "table",
                                                          "params": json.dumps(params),
                                                          "query_context": json.dumps(qc)})
        assert status == 201, body
        chart_id, before = body["id"], len(_log(db))
        answers = []
        for method, path, payload in (("POST", "/api/v1/chart/data", qc),                   # the first view
                                      ("GET", f"/api/v1/chart/{chart_id}/data/?force=false", None),
                                      ("GET", f"/api/v1/chart/{chart_id}/data/?force=true", None),
                                      ("POST", "/api/v1/chart/data", dict(qc, force=True))):
            status, body = a.call(method, path, payload)
            assert status == 200, body
            result = body["result"][0]
            assert "COUNT(*) AS count" in result["query"] and "FROM main.flights" in result["query"], result["query"]
            answers.append(result["data"])
        assert all(ans == answers[0] for ans in answers), answers  # one noisy value
        assert len(answers[0]) == (3 if groupby else 1)
        entries = _new_entries(db, before)
        assert [(k, amt) for k, amt, _, _ in entries] == [("charge", EPSILON)] + [("replay", Decimal(0))] * 3, entries
        assert {ref for _, _, ref, _ in entries[1:]} == {entries[0][3]}  # every refresh replays that charge


def test_filter_pick_list_from_declared_keys(api: tuple[Api, int], dataset: int,
                                             dpsql_server: dict[str, Any]) -> None:
    a, ds_id = api[0], dataset
    db, before = dpsql_server["db"], len(_log(dpsql_server["db"]))
    status, body = a.call("GET", f"/api/v1/datasource/table/{ds_id}/column/carrier/values/")
    assert status == 200 and sorted(body["result"]) == ["AA", "DL", "UA"], body
    status, body = a.call("GET", f"/api/v1/datasource/table/{ds_id}/column/origin/values/")
    assert status >= 400, body  # no declared keys: refused (E050; Superset shows only "Fatal error")
    assert len(_log(db)) == before


def test_virtual_dataset_column_discovery_charged_once(api: tuple[Api, int], dpsql_server: dict[str, Any]) -> None:
    a, db_id = api
    db, before = dpsql_server["db"], len(_log(dpsql_server["db"]))
    sql = "SELECT carrier, dp_mean(dep_delay, epsilon := 0.3) AS mean_delay FROM flights GROUP BY carrier"
    status, body = a.call("POST", "/api/v1/dataset/", {"database": db_id, "schema": "main",
                                                        "table_name": "dp_delay_by_carrier", "sql": sql})
    assert status == 201, body
    entries = _new_entries(db, before)
    assert [k for k, _, _, _ in entries].count("charge") == 1, entries
