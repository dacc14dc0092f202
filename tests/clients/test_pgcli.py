"""pgcli (4.x) in a pseudo-terminal against the server: \\dt, \\d, \\df and its completion of tables and dp_*
functions, which all come from the emulated catalog (issue 19: \\dt crashed with 'NoneType' object is not
iterable and completion knew no tables)."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from frontdoors.harness import PASSWORD

pexpect = pytest.importorskip("pexpect")

pytestmark = [pytest.mark.clients,
              pytest.mark.skipif(shutil.which("pgcli") is None, reason="pgcli not installed (pip install pgcli)")]

_ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>])")


class Terminal:
    """A pgcli session: ``wait`` reads the screen output (escape codes removed) until a pattern shows up."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child, self.seen = child, ""

    def wait(self, pattern: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, _ANSI.sub("", self.seen).replace("\r", ""), re.S)
            if m:
                self.seen = ""
                return m.group(0)
            if time.monotonic() > deadline:
                tail = _ANSI.sub("", self.seen)[-3000:]
                raise AssertionError(f"pgcli never showed {pattern!r}; last output:\n{tail}")
            try:
                self.seen += self.child.read_nonblocking(65536, timeout=0.5)
            except pexpect.TIMEOUT:
                continue


@pytest.fixture
def pgcli(server: tuple[str, int], tmp_path: Path) -> Iterator[Terminal]:
    rc = tmp_path / "pgclirc"
    rc.write_text(f"[main]\nenable_pager = False\nmulti_line = False\nsmart_completion = True\nless_chatty = True\n"
                  f"log_file = {tmp_path / 'pgcli.log'}\nhistory_file = {tmp_path / 'history'}\n")
    env = dict(os.environ, PGPASSWORD=PASSWORD, HOME=str(tmp_path), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn("pgcli", ["-h", server[0], "-p", str(server[1]), "-U", "alice", "-d", "flights",
                                    "--pgclirc", str(rc)], env=env, encoding="utf-8", dimensions=(60, 250))
    term = Terminal(child)
    try:
        term.wait(r"flights>")
        yield term
    finally:
        child.sendcontrol("d")
        child.close(force=True)


def test_pgcli_lists_and_describes_tables(pgcli: Terminal) -> None:
    pgcli.child.sendline("\\dt")
    out = pgcli.wait(r"\\dt.*?SELECT 2")
    assert re.search(r"main\s*\|\s*airlines\s*\|\s*table", out) and re.search(r"main\s*\|\s*flights\s*\|\s*table", out)
    pgcli.child.sendline("\\dt+")  # the comments say which tables are protected
    out = pgcli.wait(r"\\dt\+.*?SELECT 2")
    assert re.search(r"airlines\s*\|\s*table.*\|\s*dpsql: public table", out)
    assert re.search(r"flights\s*\|\s*table.*\|\s*dpsql: protected, each row is a privacy unit; use dp_\* "
                     r"aggregates", out)
    pgcli.child.sendline("\\d flights")
    out = pgcli.wait(r"\\d flights.*?Time:")
    assert re.search(r"dep_delay\s*\|\s*double precision", out) and re.search(r"carrier\s*\|\s*text", out)
    pgcli.child.sendline("\\df dp_count*")
    out = pgcli.wait(r"\\df dp_count\*.*?SELECT 4")
    assert re.search(r"public\s*\|\s*dp_count_star\s*\|\s*double precision\s*\|\s*epsilon double precision", out)
    pgcli.child.sendline("SELECT dp_count(dep_delay, epsilon := 0.5) AS n FROM flights")
    out = pgcli.wait(r"dpsql: charged epsilon 0\.5, remaining 9\.5.*?\| n +\|.*?SELECT 1")  # the notice, then rows
    assert "300.0" in out


def test_pgcli_completes_tables_and_dp_functions(pgcli: Terminal) -> None:
    def completes(typed: str, pattern: str) -> None:
        for _ in range(10):  # the completion refresher runs in the background after connecting
            pgcli.child.send(typed)
            try:
                pgcli.wait(pattern, timeout=3)
                return
            except AssertionError:
                continue
            finally:
                pgcli.child.sendcontrol("u")
        raise AssertionError(f"pgcli did not complete {typed!r} with {pattern!r}")

    completes("SELECT * FROM fl", r"flights\s+table")
    completes("SELECT * FROM air", r"airlines\s+table")
    completes("SELECT dp_me", r"dp_mean\(x, epsilon, lower, upper, method, rho, delta, beta\)\s+function")
    completes("SELECT dp_count_st", r"dp_count_star\(epsilon, method\)\s+function")
    completes("SELECT * FROM flights WHERE dep_", r"dep_delay\s+column")
