"""pg8000 (pure-Python driver; extended protocol, untyped parameters) against the server."""

from __future__ import annotations

import datetime as dt
import ssl

import pytest
from frontdoors.harness import PASSWORD

pg8000 = pytest.importorskip("pg8000.native")
pytestmark = pytest.mark.clients


def connect(addr: tuple[str, int], **kw):  # noqa: ANN201
    return pg8000.Connection("alice", host=addr[0], port=addr[1], password=PASSWORD, database="flights", **kw)


def test_dp_query_parameters_rejection(server, world) -> None:
    c = connect(server)
    try:
        rows = c.run("SELECT carrier, dp_count(dep_delay, epsilon := :e) AS n FROM flights WHERE carrier = :c "
                     "GROUP BY carrier", e=0.5, c="UA")
        assert rows == [["UA", 100.0]]
        rows = c.run("SELECT dp_mean(dep_delay, epsilon := :e) AS m FROM flights WHERE day >= :d", e=0.25,
                     d=dt.date(2013, 1, 1))
        assert len(rows) == 1
        assert world.charges[0][2].endswith("WHERE carrier = 'UA' GROUP BY carrier")
        with pytest.raises(pg8000.DatabaseError) as e:
            c.run("SELECT dep_delay FROM flights")
        assert e.value.args[0]["C"] == "42501"
        assert e.value.args[0]["M"].startswith("DPSQL-E021")
        assert c.run("SELECT 1 AS ok") == [[1]]  # the connection survives the error
    finally:
        c.close()


def test_catalog_browse(server) -> None:
    c = connect(server)
    try:
        tables = c.run("SELECT table_name FROM information_schema.tables ORDER BY table_name")
        assert tables == [["airlines"], ["flights"]]
        cols = c.run("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = :t "
                     "ORDER BY ordinal_position", t="flights")
        assert cols[2] == ["dep_delay", "double precision"]
    finally:
        c.close()


def test_tls(tls_server, tls_files) -> None:
    ctx = ssl.create_default_context(cafile=tls_files[0])
    c = connect(tls_server, ssl_context=ctx)
    try:
        assert c.run("SELECT dp_count(dep_delay, epsilon := 0.1) FROM flights") == [[300.0]]
    finally:
        c.close()
