"""psql (Debian postgresql-client) against the server: DP query, rejection, catalog browse, TLS."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from frontdoors.harness import PASSWORD

pytestmark = [pytest.mark.clients,
              pytest.mark.skipif(shutil.which("psql") is None, reason="psql not installed (apt postgresql-client)")]


def psql(addr: tuple[str, int], *commands: str, sslmode: str = "disable",
         extra: str = "") -> subprocess.CompletedProcess:
    conninfo = f"host={addr[0]} port={addr[1]} user=alice dbname=flights sslmode={sslmode} {extra}"
    args = ["psql", conninfo, "-X", "-v", "ON_ERROR_STOP=0"]
    for c in commands:
        args += ["-c", c]
    env = dict(os.environ, PGPASSWORD=PASSWORD, PGCONNECT_TIMEOUT="20")
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)


def test_dp_query_and_notice(server) -> None:
    r = psql(server, "SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights GROUP BY carrier "
                     "ORDER BY carrier")
    assert r.returncode == 0, r.stderr
    assert " AA      | 100" in r.stdout and "(3 rows)" in r.stdout
    assert "NOTICE:  dpsql: charged epsilon 0.5, remaining 9.5" in r.stderr


def test_rejection_shows_the_code(server) -> None:
    r = psql(server, "SELECT * FROM flights")
    assert "ERROR:  DPSQL-E021: " in r.stderr


def test_client_side_variables(server) -> None:
    # psql 15 has no \\bind (wire parameters); its :'var' interpolation quotes values client-side
    r = subprocess.run(["psql", f"host={server[0]} port={server[1]} user=alice dbname=flights sslmode=disable", "-X",
                        "-v", "eps=0.25", "-v", "carrier=UA"], input="SELECT dp_count(dep_delay, epsilon := :eps) "
                       "AS n FROM flights WHERE carrier = :'carrier';\n", capture_output=True, text=True,
                       env=dict(os.environ, PGPASSWORD=PASSWORD), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "100" in r.stdout and "remaining 9.75" in r.stderr


def test_catalog_browse(server) -> None:
    r = psql(server, "\\dt", "\\d flights", "\\dt+", "\\dn", "\\l")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "main   | flights  | table" in out and "main   | airlines | table" in out
    assert 'Table "main.flights"' in out
    assert "dep_delay | double precision" in out
    assert "dpsql: protected, each row is a privacy unit; use dp_* aggregates" in out and "dpsql: public table" in out


def test_more_backslash_commands_pass_the_catalog_allow_list(server) -> None:
    # the closed catalog route (issue 13) must still answer what psql sends for these
    r = psql(server, "\\d+ flights", "\\l+", "\\du", "\\df", "\\dT", "\\dx", "\\dp", "\\des", "\\dRp",
             "\\dA", "\\dv", "\\dP")
    assert r.returncode == 0, r.stderr
    assert "ERROR" not in r.stderr, r.stderr
    assert "dep_delay" in r.stdout and "flights" in r.stdout
    assert re.search(r"^ public \| dp_count_star_ci +\| text +\| epsilon double precision .*\| agg$", r.stdout, re.M)


def test_tls(tls_server, tls_files) -> None:
    r = psql(tls_server, "\\conninfo", "SELECT dp_count(dep_delay, epsilon := 0.1) AS n FROM flights",
             sslmode="verify-full", extra=f"sslrootcert={tls_files[0]}")
    assert r.returncode == 0, r.stderr
    assert "SSL connection (protocol: TLSv1." in r.stdout
    assert "300" in r.stdout
    plain = psql(tls_server, "SELECT 1", sslmode="disable")
    assert plain.returncode != 0 and "requires TLS" in plain.stderr
