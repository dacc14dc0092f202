"""``dpsql shell``: an interactive SQL shell on a guarded session that feels like the DuckDB shell.

Statements end with ``;`` and may span lines; history is kept with readline (``~/.dpsql_history``); results are
boxed tables; after every query the shell prints what it cost and what remains; refusals print their DPSQL code.
Dot commands: ``.tables``, ``.schema [TABLE]``, ``.budget``, ``.mode box|csv|json``, ``.maxrows N``,
``.timer on|off``, ``.output [FILE]``, ``.read FILE``, ``.help``, ``.quit`` (see ``DOT_COMMANDS``).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, TextIO

from .errors import PrivacyError

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
    "to your budget; a refused query costs nothing.",
    *DOT_COMMANDS.values(),
])

MAX_READ_DEPTH = 16  # .read inside .read, at most this deep

_BOX = "┌┬┐├┼┤└┴┘─│"
_ASCII = "+++++++++-|"


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):  # for reading, not for machines (csv and json keep every digit): a DP answer's
        # last digits are noise and float artefacts (issue 14: 328510.0, -5.000000000931323): 6 significant digits
        if v != v or v in (float("inf"), float("-inf")):
            return repr(v)
        if 1e6 <= abs(v) < 1e15:
            return f"{v:.0f}"
        text = f"{v:.6g}"
        return "0" if text == "-0" else text
    if isinstance(v, Decimal):
        return format(v.normalize(), "f")
    if isinstance(v, (dt.date, dt.datetime, dt.time)):
        return v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()
    return str(v)


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _can_encode(text: str, stream: TextIO | None) -> bool:
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def render_box(columns: Sequence[str], rows: Sequence[Sequence[Any]], types: Sequence[str] | None = None,
               *, unicode: bool = True, max_rows: int = 40) -> str:
    """A DuckDB-style boxed table (names, optional types, right-aligned numbers, row count if cut)."""
    ch = _BOX if unicode else _ASCII
    tl, tm, tr, ml, mm, mr, bl, bm, br, h, v = ch
    shown = list(rows)
    cut = len(shown) > max_rows
    if cut:  # the first ceil(N/2) and the last floor(N/2) rows: exactly max_rows shown
        head, tail = (max_rows + 1) // 2, max_rows // 2
        shown = shown[:head] + [None] + shown[len(shown) - tail:]  # type: ignore[list-item]
    header = [str(c) for c in columns]
    tline = [str(x).lower() for x in types] if types else None
    body = [None if r is None else [_cell(x) for x in r] for r in shown]
    widths = [max([len(header[i])] + ([len(tline[i])] if tline else []) +
                  [len(r[i]) for r in body if r is not None] + [1]) for i in range(len(header))]
    numeric = [any(_numeric(r[i]) for r in rows[:50]) for i in range(len(header))]

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join(h * (w + 2) for w in widths) + right

    def row(cells: Sequence[str], align: Sequence[bool] | None = None) -> str:
        parts = []
        for i, c in enumerate(cells):
            if align is None:
                parts.append(" " + c.center(widths[i]) + " ")
            else:
                parts.append(" " + (c.rjust(widths[i]) if align[i] else c.ljust(widths[i])) + " ")
        return v + v.join(parts) + v

    if not header:
        return "(no columns)"
    out = [line(tl, tm, tr), row(header)]
    if tline:
        out.append(row(tline))
    out.append(line(ml, mm, mr))
    for r in body:
        out.append(row(["·" if unicode else "."] * len(header)) if r is None else row(r, numeric))
    out.append(line(bl, bm, br))
    if cut or len(rows) != 1:
        out.append(f"{len(rows)} rows" + (f" ({max_rows} shown)" if cut else ""))
    return "\n".join(out)


def arrow_type_name(t: Any) -> str:
    """DuckDB's name for an Arrow result type, for the type line of a boxed table."""
    name = str(t)
    return {"string": "varchar", "large_string": "varchar", "bool": "boolean", "date32[day]": "date",
            "binary": "blob"}.get(name, name.replace("[us]", "").replace("decimal128", "decimal"))


def render_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if x is None else _cell(x) for x in r])
    return buf.getvalue().rstrip("\n")


def render_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def conv(x: Any) -> Any:
        if isinstance(x, Decimal):
            return float(x)
        if isinstance(x, (dt.date, dt.datetime, dt.time)):
            return x.isoformat()
        return x

    return json.dumps([{c: conv(x) for c, x in zip(columns, r, strict=True)} for r in rows], default=str)


def cost_line(charged: Any, remaining: Any, accounting: str, *, unicode: bool = True) -> str:
    """``ε charged 0.5 · remaining 4.5`` (ρ for zCDP budgets)."""
    unit = ("ρ" if unicode else "rho") if str(accounting).lower() == "zcdp" else ("ε" if unicode else "epsilon")
    dot = "·" if unicode else "-"
    return f"{unit} charged {_cell(charged)} {dot} remaining {_cell(remaining)}"


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
            for ti in sorted(self.session.tables(), key=lambda x: x.name):
                if arg and ti.name.lower() != arg.lower():
                    continue
                cols = ", ".join(f"{c} {ty}" for c, ty in dict(ti.columns).items())
                unit = getattr(ti, "privacy_unit", None)
                kind = getattr(ti, "kind", "protected")
                note = f"{kind}" + (f", privacy unit {unit}" if unit else (", row-level" if kind == "protected"
                                                                            else ""))
                self.emit(f"CREATE TABLE {ti.name}({cols});  -- {note}")
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
        try:
            self._file = open(os.path.expanduser(_unquote(path)), "w", encoding="utf-8")  # noqa: SIM115
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
        self.query(sql)
        if self.timer:
            self.echo(f"Run Time (s): real {time.perf_counter() - started:.3f}")

    def query(self, sql: str) -> None:
        """Run one statement through the guarded session and print the result and its cost."""
        try:
            r = self.session.sql(sql)
        except PrivacyError as e:
            self.echo(f"Error: {e.code}: {e.message}")
            return
        except Exception as e:  # noqa: BLE001 - the session already turned engine errors into codes
            self.echo(f"Error: {type(e).__name__}: {e}")
            return
        columns, rows = list(r.columns), list(r.rows)
        if self.mode == "csv":
            self.emit(render_csv(columns, rows))
        elif self.mode == "json":
            self.emit(render_json(columns, rows))
        else:
            types = [arrow_type_name(f.type) for f in r.table.schema] if hasattr(r, "table") else None
            self.emit(render_box(columns, rows, types, unicode=self._box_unicode(), max_rows=self.max_rows))
        self.echo(cost_line(r.charged, r.remaining, getattr(r, "accounting", "pure"), unicode=self.unicode))

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
            for stmt in _statements(text):
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


def _unquote(path: str) -> str:
    """A dot command's file argument, without surrounding quotes."""
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
        return path[1:-1]
    return path


def _statements(text: str) -> list[str]:
    from .server.sqltext import split_statements

    return split_statements(text)


def _complete(text: str) -> bool:
    """True when the text ends with a ``;`` outside quotes and comments."""
    from .server.sqltext import strip_comments

    code = strip_comments(text).rstrip()
    if not code.endswith(";"):
        return False
    # the last ';' must not be inside an unterminated quote: re-split and check nothing dangles
    quotes = code.count("'") - 2 * code.count("''")
    return quotes % 2 == 0


def _setup_readline() -> Callable[[], None]:
    try:
        import readline
    except ImportError:  # pragma: no cover - readline is part of CPython on Linux/macOS
        return lambda: None
    path = os.environ.get("DPSQL_HISTORY", os.path.expanduser("~/.dpsql_history"))
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(2000)

    def save() -> None:
        try:
            readline.write_history_file(path)
        except OSError:
            pass

    return save


def run(session: Any, *, banner: str | None = None) -> None:
    """Start the interactive shell on ``session`` (saves history on exit)."""
    save = _setup_readline()
    sh = Shell(session)
    if banner:
        sh.echo(banner)
    try:
        sh.loop()
    finally:
        sh.close()
        save()
