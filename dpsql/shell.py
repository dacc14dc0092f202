"""``dpsql shell``: an interactive SQL shell on a guarded session that feels like the DuckDB shell.

Statements end with ``;`` and may span lines; history is kept with readline (``~/.dpsql_history``), and TAB
completes keywords, tables, columns and dp_* functions; results are boxed tables; after every query the shell
prints what it cost and what remains; refusals print their DPSQL code. ``SHOW TABLES``, ``DESCRIBE t``,
``SHOW t``, ``DESCRIBE SELECT ...`` and ``SUMMARIZE t`` are answered from dpsql's metadata (and the guard), never
by DuckDB. Dot commands: ``.tables``, ``.schema [TABLE]``, ``.budget``, ``.mode box|csv|json``, ``.maxrows N``,
``.timer on|off``, ``.output [FILE]``, ``.read FILE``, ``.help``, ``.quit`` (see ``DOT_COMMANDS``).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .display import arrow_type_name, cell_text, cost_line, render_box, render_csv, render_json
from .errors import PrivacyError
from .guard.statement import CATALOG_STATEMENTS
from .sqltext import split_statements, strip_comments

#: dot command -> its line in .help (the help text and the completion of dot commands come from here)
DOT_COMMANDS = {
    ".tables": ".tables            list the tables you may query (protected or public)",
    ".schema": ".schema [TABLE]    columns and types, the privacy unit and the groupable (public-key) columns",
    ".budget": ".budget            your budget: limit, spent, remaining",
    ".mode": ".mode box|csv|json how results are printed (default box)",
    ".maxrows": ".maxrows [N]       rows a box shows (default 40; csv and json print every row)",
    ".timer": ".timer on|off      print each statement's elapsed wall time",
    ".output": ".output [FILE]     write results to FILE (replaced); .output alone: back to the terminal",
    ".read": ".read FILE         run the statements and dot commands in FILE",
    ".help": ".help              this text",
    ".quit": ".quit / .exit      leave (Ctrl-D works too)",
}

HELP = "\n".join([
    "Enter SQL ending with ';' (it may span several lines). Every query is checked by the guard and charged",
    "to your budget; a refused query costs nothing. TAB completes keywords, tables, columns and dp_* functions.",
    *DOT_COMMANDS.values(),
    "SHOW TABLES, DESCRIBE t (or SHOW t) and SUMMARIZE t are answered from dpsql's metadata: no data read, free.",
    "DESCRIBE SELECT ... shows a query's result columns; the guard checks it, nothing runs or is charged.",
])

MAX_READ_DEPTH = 16  # .read inside .read, at most this deep
KEYS_SHOWN = 5  # public key values .schema shows per column
METADATA_NOTE = "Answered from dpsql's metadata: no data read, nothing charged."

#: statements the shell answers itself (from metadata) instead of sending them to the guard
_META = re.compile(r"(describe|desc|show|summarize)\b\s*(.*)\Z", re.I | re.S)
_QUERY = re.compile(r"[\s(]*(select|with|from|values)\b", re.I)
_NAME = re.compile(r'(?:(?:main|"main")\s*\.\s*)?("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)\Z', re.I)

def _can_encode(text: str, stream: TextIO | None) -> bool:
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class Shell:
    """The read-eval-print loop over one guarded session (``session`` follows the dpsql session API).

    ``out`` is the terminal (prompts' answers, cost and timer lines, errors); results go to ``out`` too
    unless ``.output FILE`` redirects them."""

    prompt = "dpsql> "
    more = "  ...> "

    def __init__(self, session: Any, *, out: TextIO | None = None, read: Callable[[str], str] = input) -> None:
        self.session = session
        self.out = out or sys.stdout
        self.read = read
        self.mode = "box"
        self.max_rows = 40
        self.timer = False
        self.unicode = _can_encode("┌ε·", self.out)
        self._file: TextIO | None = None  # .output FILE
        self._buf: list[str] = []  # lines of an unfinished statement
        self._depth = 0  # nesting of .read

    def echo(self, text: str = "") -> None:
        """Print to the terminal."""
        print(text, file=self.out, flush=True)

    def emit(self, text: str) -> None:
        """Print a result: to the ``.output`` file if one is open, else to the terminal."""
        print(text, file=self._file or self.out, flush=True)

    def _box_unicode(self) -> bool:
        return True if self._file is not None else self.unicode  # files are written as UTF-8

    def close(self) -> None:
        """Close the ``.output`` file, if any."""
        if self._file is not None:
            self._file.close()
            self._file = None

    # ------------------------------------------------------------------ commands
    def dot(self, line: str) -> bool:
        """Run a dot command; False means quit."""
        cmd, _, arg = line.strip().partition(" ")
        arg = arg.strip().rstrip(";").strip()
        if cmd in (".quit", ".exit", ".q"):
            return False
        if cmd == ".help":
            self.echo(HELP)
        elif cmd == ".tables":
            names = sorted(ti.name for ti in self.session.tables())
            self.emit("  ".join(names) if names else "(no tables)")
        elif cmd == ".schema":
            tables = [ti for ti in sorted(self.session.tables(), key=lambda x: x.name)
                      if not arg or ti.name.lower() == _unquote(arg).lower()]
            if arg and not tables:
                self.echo(f"Error: no table {arg} (.tables lists them)")
            for ti in tables:
                self.emit("\n".join(schema_lines(ti)))
        elif cmd == ".budget":
            b = self.session.budget()
            acct = getattr(b, "accounting", "pure")
            self.emit(render_box(["accounting", "limit", "spent", "remaining"],
                                 [(acct, b.limit, b.spent, b.remaining)], unicode=self._box_unicode()))
        elif cmd == ".mode":
            if arg in ("box", "csv", "json"):
                self.mode = arg
            else:
                self.echo("Error: .mode box|csv|json")
        elif cmd == ".maxrows":
            if not arg:
                self.echo(str(self.max_rows))
            elif arg.isdigit() and int(arg) > 0:
                self.max_rows = int(arg)
            else:
                self.echo("Error: .maxrows N (a whole number of rows, at least 1)")
        elif cmd == ".timer":
            if arg.lower() in ("on", "off"):
                self.timer = arg.lower() == "on"
            else:
                self.echo("Error: .timer on|off")
        elif cmd == ".output":
            self.output(arg)
        elif cmd == ".read":
            if not arg:
                self.echo("Error: .read FILE")
            else:
                return self.read_file(arg)
        else:
            self.echo(f"Error: unknown command {cmd} (try .help)")
        return True

    def output(self, path: str) -> None:
        """``.output FILE``: results go to FILE (created or replaced); ``.output``: back to the terminal."""
        self.close()
        if not path:
            return
        target = os.path.expanduser(_unquote(path))
        if _is_duckdb_file(target):  # e.g. the database or its ledger: a typo must not destroy them
            self.echo(f"Error: {path} is a DuckDB database; .output does not replace it")
            return
        try:
            self._file = open(target, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            self.echo(f"Error: cannot write {path}: {e.strerror or e}")

    def read_file(self, path: str) -> bool:
        """``.read FILE``: feed FILE's lines to the shell as if typed; False when the file says ``.quit``."""
        if self._depth >= MAX_READ_DEPTH:
            self.echo(f"Error: .read nested more than {MAX_READ_DEPTH} deep")
            return True
        try:
            with open(os.path.expanduser(_unquote(path)), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            self.echo(f"Error: cannot read {path}: {getattr(e, 'strerror', None) or e}")
            return True
        self._depth += 1
        try:
            for line in lines:
                if not self.feed(line):
                    return False
        finally:
            self._depth -= 1
        if self._buf:
            self.echo(f"Error: {path} ends inside a statement (missing ';'); it was not run")
            self._buf = []
        return True

    def statement(self, sql: str) -> None:
        """Run one statement and, with ``.timer on``, print its elapsed wall time (display only)."""
        started = time.perf_counter()
        if not self.metadata(sql):
            self.query(sql)
        if self.timer:
            self.echo(f"Run Time (s): real {time.perf_counter() - started:.3f}")

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], types: Sequence[str] | None = None) -> None:
        """Print a result in the current ``.mode`` to the current ``.output``."""
        if self.mode == "csv":
            self.emit(render_csv(columns, rows))
        elif self.mode == "json":
            self.emit(render_json(columns, rows))
        else:
            self.emit(render_box(columns, rows, types, unicode=self._box_unicode(), max_rows=self.max_rows))

    def refused(self, e: PrivacyError, sql: str) -> None:
        """Print a refusal; in the shell, a refused look at the catalog names the metadata commands."""
        self.echo(f"Error: {e.code}: {e.message}")
        hint = _hint(e.code, sql)
        if hint:
            self.echo(hint)

    def query(self, sql: str) -> None:
        """Run one statement through the guarded session and print the result and its cost."""
        try:
            r = self.session.sql(sql)
        except PrivacyError as e:
            self.refused(e, sql)
            return
        except Exception as e:  # noqa: BLE001 - the session already turned engine errors into codes
            self.echo(f"Error: {type(e).__name__}: {e}")
            return
        types = [arrow_type_name(f.type) for f in r.table.schema] if hasattr(r, "table") else None
        self.table(list(r.columns), list(r.rows), types)
        self.echo(cost_line(r.charged, r.remaining, getattr(r, "accounting", "pure"), unicode=self.unicode,
                            replayed_from=getattr(r, "replayed_from", None)))

    # ------------------------------------------------------------------ metadata statements
    def metadata(self, sql: str) -> bool:
        """Answer ``SHOW TABLES``, ``DESCRIBE``/``SHOW`` t, ``DESCRIBE SELECT ...`` and ``SUMMARIZE`` from
        dpsql's metadata and the guard (DuckDB's own versions are never run); False if ``sql`` is none."""
        m = _META.match(_code(sql))
        if m is None:
            return False
        verb, rest = m.group(1).lower(), m.group(2)
        if (verb == "show" and rest.lower().split() in (["tables"], ["all", "tables"])) or \
                (verb != "summarize" and not rest):
            self.show_tables()
        elif _QUERY.match(rest):
            if verb == "show":
                return False  # not DuckDB syntax: the guard refuses it (E003, with the hint)
            if verb == "summarize":
                self.summarize(None)
            else:
                self.describe_query(rest)
        else:
            n = _NAME.match(rest)
            if n is None:
                return False
            name = _unquote(n.group(1)).replace('""', '"') if n.group(1).startswith('"') else n.group(1)
            ti = next((t for t in self.session.tables() if t.name.lower() == name.lower()), None)
            if ti is None and verb == "show":
                return False  # SHOW DATABASES and the like: the guard refuses them (E003, with the hint)
            if ti is None:
                self.echo(f"Error: DPSQL-E010: relation {name!r} is not a registered table (.tables lists them)")
            elif verb == "summarize":
                self.summarize(ti)
            else:
                self.describe_table(ti)
        return True

    def show_tables(self) -> None:
        """``SHOW TABLES``: name, protected or public, privacy unit, groupable columns."""
        rows = []
        for ti in sorted(self.session.tables(), key=lambda x: x.name):
            if _protected(ti):
                rows.append((ti.name, "protected", _unit(ti), ", ".join(_public_keys(ti)) or "(none)"))
            else:
                rows.append((ti.name, "public", "", "every column"))
        self.table(["name", "kind", "privacy_unit", "groupable"], rows)
        self.echo(METADATA_NOTE)

    def describe_table(self, ti: Any) -> None:
        """``DESCRIBE t``: each column's type and its part in the privacy policy."""
        keys, unit = _public_keys(ti), getattr(ti, "privacy_unit", None)
        rows = []
        for col, typ in dict(ti.columns).items():
            if not _protected(ti):
                note = "public: exact, groupable"
            elif unit and col.lower() == unit.lower():
                note = "privacy unit"
            elif col in keys:
                note = f"groupable: {_plural(len(keys[col]), 'public key')}"
            else:
                note = ""
            rows.append((col, typ, note))
        self.table(["column_name", "column_type", "privacy"], rows)
        self.echo(f"{ti.name}: {_table_note(ti)}. {METADATA_NOTE}")

    def describe_query(self, sql: str) -> None:
        """``DESCRIBE SELECT ...``: the result columns of a query the guard accepts, without running it."""
        try:
            cols = self.session.describe(sql)
        except PrivacyError as e:
            self.refused(e, sql)
            return
        self.table(["column_name", "column_type"], [(c, t) for c, t in cols])
        self.echo("checked by the guard, not run: nothing charged")

    def summarize(self, ti: Any | None) -> None:
        """``SUMMARIZE``: DuckDB's would read every value exactly; say so and show the dp_* way."""
        self.echo("SUMMARIZE reads the data exactly (min, max, distinct counts, quantiles): dpsql does not run it.")
        if ti is not None and not _protected(ti):
            self.echo(f"{ti.name} is public: plain SQL on it is exact and free, e.g.\n  SELECT count(*) FROM "
                      f"{ti.name};")
        else:
            self.echo("Ask the same questions with dp_* aggregates (each charged as written), e.g.\n  "
                      + _summary_example(ti))

    # ------------------------------------------------------------------ loop
    def feed(self, line: str) -> bool:
        """Take one input line: a dot command, or part of a statement run once it ends with ``;``.

        False means quit."""
        if not self._buf and line.strip().startswith("."):
            return self.dot(line)
        if not self._buf and not line.strip():
            return True
        self._buf.append(line)
        text = "\n".join(self._buf)
        if _complete(text):
            self._buf = []
            for stmt in split_statements(text):
                self.statement(stmt)
        return True

    def loop(self) -> None:
        """Read statements until .quit or end of input."""
        while True:
            try:
                line = self.read(self.more if self._buf else self.prompt)
            except EOFError:
                self.echo()
                break
            except KeyboardInterrupt:
                self.echo("^C")
                self._buf = []
                continue
            if not self.feed(line):
                break


def _code(sql: str) -> str:
    return strip_comments(sql).strip().rstrip(";").strip()


def _hint(code: str, sql: str) -> str:
    """The shell's pointer from a refused catalog statement or catalog function to the metadata commands."""
    words = _code(sql).lower().split()
    first = words[0] if words else ""
    catalog = code == "DPSQL-E003" and first in CATALOG_STATEMENTS
    catalog = catalog or (code == "DPSQL-E010" and re.search(
        r"\b(duckdb_\w+|information_schema|pg_catalog|sqlite_master|pragma_\w+)\b", sql, re.I) is not None)
    return ("Hint: .schema, .tables, DESCRIBE t, SHOW TABLES (answered from dpsql's metadata); "
            "SUMMARIZE t shows the dp_* way") if catalog else ""


def _protected(ti: Any) -> bool:
    return getattr(ti, "kind", "protected") == "protected"


def _public_keys(ti: Any) -> dict[str, tuple]:
    return dict(getattr(ti, "public_keys", None) or {})


def _unit(ti: Any) -> str:
    return getattr(ti, "privacy_unit", None) or "each row"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _table_note(ti: Any) -> str:
    if not _protected(ti):
        return "public (exact and free to read)"
    unit = getattr(ti, "privacy_unit", None)
    if not unit:
        return "protected, privacy unit: each row"
    rows, groups = getattr(ti, "max_rows_per_unit", 1), getattr(ti, "max_groups_per_unit", 1)
    return f"protected, privacy unit {unit} (at most {_plural(rows, 'row')} and {_plural(groups, 'group')} per unit)"


def schema_lines(ti: Any) -> list[str]:
    """``.schema``: a ``CREATE TABLE`` line with the table's policy as comments, from dpsql's metadata."""
    cols = ", ".join(f"{c} {ty}" for c, ty in dict(ti.columns).items())
    lines = [f"CREATE TABLE {ti.name}({cols});  -- {_table_note(ti)}"]
    if not _protected(ti):
        lines[0] += "; groupable: every column"
        return lines
    keys = _public_keys(ti)
    for col, values in keys.items():
        shown = ", ".join(cell_text(v) for v in values[:KEYS_SHOWN]) + (", …" if len(values) > KEYS_SHOWN else "")
        lines.append(f"--   groupable: {col} ({_plural(len(values), 'public key')}: {shown})")
    if not keys:
        lines.append("--   groupable: none (no column has declared public keys)")
    return lines


def _summary_example(ti: Any | None) -> str:
    """A dp_* query that answers part of what SUMMARIZE would, built from the table's metadata."""
    from .guard.lineage import is_numeric_type

    if ti is None:
        return "SELECT dp_count_star(epsilon := 0.1) AS n, dp_mean(x, epsilon := 0.3) AS mean_x FROM t;"
    unit = (getattr(ti, "privacy_unit", None) or "").lower()
    nums = [c for c, t in dict(ti.columns).items() if c.lower() != unit and is_numeric_type(str(t).upper())]
    key = next(iter(_public_keys(ti)), None)
    parts = ([key] if key else []) + ["dp_count_star(epsilon := 0.1) AS n"]
    if nums:
        x = nums[0]
        parts += [f"dp_mean({x}, epsilon := 0.3) AS mean_{x}", f"dp_quantile({x}, 0.5, epsilon := 0.3) AS median_{x}"]
    return f"SELECT {', '.join(parts)} FROM {ti.name}" + (f" GROUP BY {key}" if key else "") + ";"


def _is_duckdb_file(path: str) -> bool:
    """True for an existing DuckDB database file (its header has the magic bytes ``DUCK`` at offset 8)."""
    try:
        with open(path, "rb") as f:
            return f.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def _unquote(path: str) -> str:
    """A dot command's file argument, without surrounding quotes."""
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
        return path[1:-1]
    return path


def _complete(text: str) -> bool:
    """True when the text ends with a ``;`` outside quotes and comments."""
    code = strip_comments(text).rstrip()
    if not code.endswith(";"):
        return False
    # the last ';' must not be inside an unterminated quote: re-split and check nothing dangles
    quotes = code.count("'") - 2 * code.count("''")
    return quotes % 2 == 0


@functools.lru_cache(maxsize=1)
def sql_keywords() -> tuple[str, ...]:
    """DuckDB's own keyword list (``duckdb_keywords()`` on an empty in-memory database), lower case."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        return tuple(sorted({str(r[0]).lower() for r in con.execute("SELECT keyword_name FROM duckdb_keywords()")
                            .fetchall()}))
    finally:
        con.close()


class Completer:
    """readline completion: SQL keywords, the dp_* functions (``dpsql.duck.AGGREGATE_FUNCTIONS``), the session's
    tables and columns (dpsql's metadata), ``table.column`` after a table name, and dot commands."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._matches: list[str] = []

    def candidates(self, text: str, line: str = "") -> list[str]:
        """Every completion of the word ``text`` of the input ``line`` (case-insensitive prefix; keywords in the
        case ``text`` is typed in); after a dot command, table names only."""
        from .duck import AGGREGATE_FUNCTIONS

        low = text.lower()
        first = not line.strip() or line.lstrip().startswith(text)  # text is the line's first word
        if text.startswith(".") and first:
            return [c for c in DOT_COMMANDS if c.startswith(low)]
        tables = list(self.session.tables())
        if line.lstrip().startswith(".") and not first:
            return [t.name for t in tables if t.name.lower().startswith(low)]
        if "." in text:
            qual, _, part = text.rpartition(".")
            ti = next((t for t in tables if t.name.lower() == qual.strip('"').lower()), None)
            cols = dict(ti.columns) if ti is not None else {}
            return [f"{qual}.{c}" for c in cols if c.lower().startswith(part.lower())]
        names = sorted(AGGREGATE_FUNCTIONS) + [t.name for t in tables] + [c for t in tables for c in dict(t.columns)]
        out = list(dict.fromkeys(n for n in names if n.lower().startswith(low)))
        if text:  # keywords only once something is typed (an empty TAB lists the names, not 500 keywords)
            upper = text != low
            out += [k.upper() if upper else k for k in sql_keywords() if k.startswith(low) and k not in out]
        return out

    def complete(self, text: str, state: int) -> str | None:
        """The readline completer protocol: the ``state``-th completion of ``text``, None after the last."""
        if state == 0:
            try:
                import readline

                self._matches = self.candidates(text, readline.get_line_buffer())
            except Exception:  # noqa: BLE001 - completion must never break the shell
                self._matches = []
        return self._matches[state] if state < len(self._matches) else None


def _setup_readline(completer: Completer | None = None) -> Callable[[], None]:
    """History and TAB completion through readline when it exists (without it, plain input; no completion);
    returns the function that saves the history."""
    try:
        import readline
    except ImportError:  # readline is part of CPython on Linux/macOS, not on Windows
        return lambda: None
    path = os.environ.get("DPSQL_HISTORY", os.path.expanduser("~/.dpsql_history"))
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(2000)
    if completer is not None:
        readline.set_completer(completer.complete)
        readline.set_completer_delims(readline.get_completer_delims().replace(".", ""))  # table.column is one word
        if "libedit" in (readline.__doc__ or ""):  # macOS's readline is libedit, with its own binding syntax
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")

    def save() -> None:
        try:
            readline.write_history_file(path)
        except OSError:
            pass

    return save


def run(session: Any, *, banner: str | None = None) -> None:
    """Start the interactive shell on ``session`` (saves history on exit)."""
    save = _setup_readline(Completer(session))
    sh = Shell(session)
    if banner:
        sh.echo(banner)
    try:
        sh.loop()
    finally:
        sh.close()
        save()
