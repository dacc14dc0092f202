"""psycopg 3 (libpq) as an analyst would use it: DP query, rejection, parameters, catalog browse, TLS.

Protocol details (formats, charging, chatter) are covered in tests/server/test_pgwire.py."""

from __future__ import annotations

import datetime as dt

import pytest
from frontdoors.harness import PASSWORD

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.clients


def test_analyst_session(server) -> None:
    with psycopg.connect(host=server[0], port=server[1], user="alice", password=PASSWORD, dbname="flights",
                         sslmode="disable", autocommit=True) as c:
        rows = c.execute("SELECT carrier, dp_mean(dep_delay, epsilon := %s) AS m FROM flights WHERE day >= %s "
                         "GROUP BY carrier ORDER BY carrier", (0.5, dt.date(2013, 2, 1))).fetchall()
        assert [r[0] for r in rows] == ["AA", "DL", "UA"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="DPSQL-E021"):
            c.execute("SELECT carrier, avg(dep_delay) FROM flights GROUP BY carrier")
        names = c.execute("SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                          "ON n.oid = c.relnamespace WHERE c.relkind = 'r' ORDER BY 1").fetchall()
        assert names == [("airlines",), ("flights",)]


def test_tls_verify_full(tls_server, tls_files) -> None:
    with psycopg.connect(host=tls_server[0], port=tls_server[1], user="alice", password=PASSWORD,
                         dbname="flights", sslmode="verify-full", sslrootcert=tls_files[0]) as c:
        assert c.pgconn.ssl_in_use
        assert c.execute("SELECT dp_count(dep_delay, epsilon := %s) FROM flights", (0.1,)).fetchone() == (300.0,)
