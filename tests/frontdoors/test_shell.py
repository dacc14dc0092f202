"""The interactive shell driven through a pseudo-terminal (pexpect), and its rendering helpers."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import duckdb
import pytest

from dpsql.display import render_box, render_csv

pexpect = pytest.importorskip("pexpect")
TESTS = Path(__file__).resolve().parents[1]

FAKE_SHELL = ("from frontdoors.fakes import FakeWorld; from dpsql import shell; "
              "shell.run(FakeWorld().connect('alice'), banner='fake shell')")


def spawn(args: list[str], tmp_path: Path):  # noqa: ANN201
    env = dict(os.environ, PYTHONPATH=str(TESTS), DPSQL_HISTORY=str(tmp_path / "history"), TERM="dumb",
               PYTHONIOENCODING="utf-8", LANG="C.UTF-8", NB_NO_LEAK_WARNINGS="1")
    child = pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=60, dimensions=(50, 200))
    return child


def test_shell_session_in_a_pty(tmp_path: Path) -> None:
    child = spawn(["-c", FAKE_SHELL], tmp_path)
    child.expect("fake shell")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n")
    child.expect_exact("  ...> ")  # multi-line: the statement is not finished without ';'
    child.sendline("FROM flights GROUP BY carrier ORDER BY carrier;")
    child.expect_exact("│ carrier │   n    │")
    child.expect_exact("│ AA      │    100 │")
    child.expect_exact("ε charged 0.5 · remaining 9.5")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT * FROM flights;")
    child.expect_exact("Error: DPSQL-E021: non-DP aggregate")
    child.expect_exact("dpsql> ")
    child.sendline(".tables")
    child.expect_exact("airlines  flights")
    child.sendline(".schema flights")
    child.expect_exact("CREATE TABLE flights(month INTEGER, carrier VARCHAR, dep_delay DOUBLE, day DATE);  "
                       "-- protected")
    child.sendline(".budget")
    child.expect(r"│ pure\s+│\s+10 │\s+0.5 │\s+9.5 │")
    child.sendline(".help")
    child.expect_exact(".budget            your budget")
    child.sendline(".quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    history = (tmp_path / "history").read_text()
    assert "SELECT * FROM flights;" in history


def test_history_is_recalled(tmp_path: Path) -> None:
    child = spawn(["-c", FAKE_SHELL], tmp_path)
    child.expect_exact("dpsql> ")
    child.sendline("SELECT dp_count(dep_delay, epsilon := 0.25) AS n FROM flights;")
    child.expect_exact("remaining 9.75")
    child.sendline(".quit")
    child.expect(pexpect.EOF)
    child = spawn(["-c", FAKE_SHELL], tmp_path)
    child.expect_exact("dpsql> ")
    child.send("\x1b[A\x1b[A")  # arrow up twice (past .quit): the last statement comes back from the file
    child.send("\r")
    child.expect_exact("remaining 9.75")  # a fresh world: charged again from 10
    child.sendcontrol("d")
    child.expect(pexpect.EOF)


def test_dpsql_shell_command_on_a_real_database(real_db: str, tmp_path: Path) -> None:
    child = spawn(["-m", "dpsql.cli", "shell", real_db, "--analyst", "alice"], tmp_path)
    child.expect_exact("budget 10 of 10 left")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT carrier, dp_count(dep_delay, epsilon := 1) AS n FROM flights GROUP BY carrier;")
    child.expect_exact("ε charged 1 · remaining 9")
    child.sendline("SELECT carrier, dp_mean_ci(dep_delay, epsilon := 1) AS m FROM flights GROUP BY carrier "
                   "ORDER BY carrier;")  # issue 14: each answer with its error bar
    child.expect(r"│ AA      │ -?\d+(\.\d+)? (± |\[)")
    child.expect_exact("ε charged 1 · remaining 8")
    child.sendline("SELECT dep_delay FROM flights;")
    child.expect(r"Error: DPSQL-E0\d\d: ")
    child.sendline(".quit")
    child.expect(pexpect.EOF)


def test_timer_maxrows_read_and_output(tmp_path: Path) -> None:
    script = tmp_path / "q.sql"
    script.write_text(".mode csv\nSELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n\n"
                      "FROM flights GROUP BY carrier ORDER BY carrier;\n.mode box\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    child = spawn(["-c", FAKE_SHELL], tmp_path)
    child.expect_exact("dpsql> ")
    child.sendline(".timer on")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT dp_count(dep_delay, epsilon := 0.25) AS n FROM flights;")
    child.expect_exact("remaining 9.75")
    child.expect(r"Run Time \(s\): real \d+\.\d{3}")  # a timer line appears; its value is not checked
    child.expect_exact("dpsql> ")
    child.sendline(".timer off")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT dp_count(dep_delay, epsilon := 0.25) AS n FROM flights;")
    child.expect_exact("remaining 9.5")
    child.expect_exact("dpsql> ")
    assert "Run Time" not in child.before
    child.sendline(".maxrows 4")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT range AS i FROM range(10);")
    child.expect_exact("10 rows (4 shown)")
    assert re.findall(r"│\s+(\d+) │", child.before) == ["0", "1", "8", "9"]
    child.expect_exact("dpsql> ")
    child.sendline(".maxrows")
    child.expect_exact(".maxrows\r\n4\r\n")
    child.sendline(f".read {script}")
    child.expect_exact("carrier,n")
    child.expect_exact("AA,100")
    child.expect_exact("ε charged 0.5 · remaining 9")
    child.sendline(f".output {out}")
    child.expect_exact("dpsql> ")
    child.sendline(".mode csv")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT carrier, name FROM airlines ORDER BY carrier;")
    child.expect_exact("ε charged 0 · remaining 9")  # the cost line stays on the terminal
    child.expect_exact("dpsql> ")
    assert "American" not in child.before
    child.sendline(".output")
    child.expect_exact("dpsql> ")
    child.sendline("SELECT name FROM airlines WHERE carrier = 'DL';")
    child.expect_exact("name\r\nDelta")  # back on the terminal
    db = tmp_path / "some.duckdb"
    duckdb.connect(str(db)).close()
    child.sendline(f".output {db}")
    child.expect_exact("is a DuckDB database; .output does not replace it")
    child.sendline(".read no/such/file.sql")
    child.expect_exact("Error: cannot read no/such/file.sql")
    child.sendline(".quit")
    child.expect(pexpect.EOF)
    assert out.read_text(encoding="utf-8") == "carrier,name\nAA,American\nDL,Delta\nUA,United\n"


def test_metadata_commands_on_a_real_database(real_db: str, tmp_path: Path) -> None:
    """.schema, SHOW TABLES, DESCRIBE and SUMMARIZE answer from dpsql's policy; nothing is charged."""
    child = spawn(["-m", "dpsql.cli", "shell", real_db, "--analyst", "alice"], tmp_path)
    child.expect_exact("dpsql> ")
    child.sendline(".schema")
    child.expect_exact("CREATE TABLE airlines(carrier VARCHAR, name VARCHAR);  -- public (exact and free to read); "
                       "groupable: every column")
    child.expect_exact("CREATE TABLE flights(carrier VARCHAR, month INTEGER, dep_delay DOUBLE);  "
                       "-- protected, privacy unit: each row")
    child.expect_exact("--   groupable: carrier (3 public keys: AA, DL, UA)")
    child.expect_exact("dpsql> ")
    child.sendline("SHOW TABLES;")
    child.expect(r"│ airlines │ public\s+│\s+│ every column │")
    child.expect(r"│ flights  │ protected │ each row\s+│ carrier\s+│")
    child.expect_exact("no data read, nothing charged")
    child.sendline("DESCRIBE flights;")
    child.expect(r"│ column_name │ column_type │\s+privacy\s+│")
    child.expect(r"│ carrier\s+│ VARCHAR\s+│ groupable: 3 public keys │")
    child.expect(r"│ dep_delay\s+│ DOUBLE\s+│\s+│")
    child.expect_exact("flights: protected, privacy unit: each row.")
    child.sendline("SHOW airlines;")
    child.expect(r"│ name\s+│ VARCHAR\s+│ public: exact, groupable │")
    child.sendline("DESCRIBE SELECT carrier, dp_mean(dep_delay, epsilon := 1) AS m FROM flights GROUP BY carrier;")
    child.expect(r"│ m\s+│ DOUBLE\s+│")
    child.expect_exact("checked by the guard, not run: nothing charged")
    child.sendline("SUMMARIZE flights;")
    child.expect_exact("dpsql does not run it")
    child.expect_exact("SELECT carrier, dp_count_star(epsilon := 0.1) AS n, dp_mean(month, epsilon := 0.3) AS "
                       "mean_month, dp_quantile(month, 0.5, epsilon := 0.3) AS median_month FROM flights "
                       "GROUP BY carrier;")
    child.sendline("PRAGMA table_info('flights');")  # still refused by the guard, but the shell points the way
    child.expect_exact("Error: DPSQL-E003: ")
    child.expect_exact("Hint: .schema, .tables, DESCRIBE t, SHOW TABLES")
    child.sendline("DESCRIBE nope;")
    child.expect_exact("Error: DPSQL-E010: relation 'nope' is not a registered table")
    child.sendline("SELECT carrier, dp_mean(dep_delay epsilon := 1)")  # parse errors point at the position
    child.sendline("FROM flights GROUP BY carrier;")
    child.expect_exact("Error: DPSQL-E001: ")
    child.expect_exact("LINE 1: SELECT carrier, dp_mean(dep_delay epsilon := 1)\r\n"
                       "                                          ^")
    child.sendline("SELECT carrier, dp_mean(carrier || 'x', epsilon := 1) FROM flights GROUP BY carrier;")
    child.expect_exact("Error: DPSQL-E060: dp_mean: its value must be numeric; carrier || 'x' is VARCHAR (convert "
                       "it, e.g. TRY_CAST(carrier || 'x' AS DOUBLE), or count it with dp_count)")
    child.sendline(".budget")
    child.expect(r"│ pure\s+│\s+10 │\s+0 │\s+10 │")  # none of the above was charged
    child.sendline(".quit")
    child.expect(pexpect.EOF)


def test_schema_of_a_table_with_a_privacy_unit() -> None:
    from dpsql.guard.catalog import TableInfo
    from dpsql.shell import _summary_example, schema_lines

    visits = TableInfo("visits", "protected", {"patient_id": "INTEGER", "clinic": "VARCHAR", "cost": "DOUBLE"},
                       privacy_unit="patient_id", max_rows_per_unit=10, max_groups_per_unit=3,
                       public_keys={"clinic": tuple(f"c{i}" for i in range(7))})
    assert schema_lines(visits) == [
        "CREATE TABLE visits(patient_id INTEGER, clinic VARCHAR, cost DOUBLE);  -- protected, privacy unit "
        "patient_id (at most 10 rows and 3 groups per unit)",
        "--   groupable: clinic (7 public keys: c0, c1, c2, c3, c4, …)"]
    bare = TableInfo("v", "protected", {"patient_id": "INTEGER", "note": "VARCHAR"}, privacy_unit="patient_id")
    assert schema_lines(bare)[1] == "--   groupable: none (no column has declared public keys)"
    assert _summary_example(visits).startswith("SELECT clinic, dp_count_star(epsilon := 0.1) AS n, dp_mean(cost,")
    assert _summary_example(bare) == "SELECT dp_count_star(epsilon := 0.1) AS n FROM v;"  # the unit is no measure


def test_tab_completion_in_a_pty(tmp_path: Path) -> None:
    """TAB completes keywords, tables, columns, table.column, dp_* functions and dot commands (readline)."""
    child = spawn(["-c", FAKE_SHELL], tmp_path)
    child.expect_exact("dpsql> ")
    child.send("sel\t dp_mea\t(dep_d\t, epsilon := 0.25) AS m FROM fli\t;\r")  # (Python's readline adds no space)
    child.expect_exact("FROM flights;")  # the echo of the completed line
    child.expect_exact("ε charged 0.25 · remaining 9.75")
    child.expect_exact("dpsql> ")
    child.send("SELECT dp_me\t\t")  # ambiguous: a second TAB lists the choices
    child.expect(r"dp_mean\s[^\r]*dp_median")
    child.send("an(flights.dep_\t, epsilon := 0.25) AS m FROM flights;\r")
    child.expect_exact("remaining 9.5")
    child.expect_exact("dpsql> ")
    child.send(".sch\t fl\t\r")
    child.expect_exact("CREATE TABLE flights(")
    child.expect_exact("dpsql> ")
    child.sendline(".quit")
    child.expect(pexpect.EOF)


def test_completer_candidates() -> None:
    from dpsql.duck import AGGREGATE_FUNCTIONS
    from dpsql.shell import Completer
    from frontdoors.fakes import FakeWorld

    c = Completer(FakeWorld().connect("alice"))
    assert set(c.candidates("dp_")) == set(AGGREGATE_FUNCTIONS)  # the package's one list of dp_* names
    assert c.candidates("dp_me") == sorted(f for f in AGGREGATE_FUNCTIONS if f.startswith("dp_me"))
    assert {"dp_mean", "dp_median"} <= set(c.candidates("dp_me"))
    assert c.candidates("fli") == ["flights"] and c.candidates("dep_") == ["dep_delay"]
    assert c.candidates("fl") == ["flights", "float"]  # names first, then keywords
    assert c.candidates("airlines.") == ["airlines.carrier", "airlines.name"]
    assert "SELECT" in c.candidates("SEL") and "select" in c.candidates("sel")
    assert c.candidates(".ti") == [".timer"] and c.candidates("nosuch.x") == []
    assert c.candidates("f", ".schema f") == ["flights"]  # after a dot command: table names only
    n = len(c.candidates("dp_me"))
    assert [c.complete("dp_me", i) for i in range(n + 1)] == [*c.candidates("dp_me"), None]


def test_without_readline_the_shell_still_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpsql.shell import Completer, _setup_readline
    from frontdoors.fakes import FakeWorld

    monkeypatch.setitem(sys.modules, "readline", None)  # import readline now raises ImportError
    save = _setup_readline(Completer(FakeWorld().connect("alice")))
    save()  # no history, no completion, no error


def test_render_box_and_csv() -> None:
    box = render_box(["a", "bb"], [(1, "x"), (22, None)], ["INTEGER", "VARCHAR"])
    assert box.splitlines() == [
        "┌─────────┬─────────┐",
        "│    a    │    bb   │",
        "│ integer │ varchar │",
        "├─────────┼─────────┤",
        "│       1 │ x       │",
        "│      22 │ NULL    │",
        "└─────────┴─────────┘",
        "2 rows",
    ]
    assert render_box(["a"], [(1,)], unicode=False).splitlines()[0] == "+---+"
    cut = render_box(["i"], [(i,) for i in range(10)], unicode=False, max_rows=3).splitlines()
    assert [line.strip("| ") for line in cut[3:7]] == ["0", "1", ".", "9"] and cut[-1] == "10 rows (3 shown)"
    # issue 14: a DP answer's float artefacts are not printed (csv and json keep every digit)
    floats = render_box(["x"], [(328510.0,), (-5.000000000931323,), (16.81197924469517,), (-0.0,), (1.5e-7,),
                                (float("nan"),)], unicode=False)
    assert [line.strip("| ") for line in floats.splitlines()[3:9]] == ["328510", "-5", "16.812", "0", "1.5e-07", "nan"]
    assert render_csv(["a", "b"], [(1, "x,y"), (None, "z")]) == 'a,b\n1,"x,y"\n,z'
