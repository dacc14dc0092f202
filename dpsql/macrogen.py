"""Generate ``sql/macros.sql``, the dp_* macros, from the declared surface (:mod:`dpsql.surface`).

``python -m dpsql.macrogen`` rewrites the file; ``python -m dpsql.macrogen --check`` exits 1 when it is
stale (tests/test_surface.py runs the same comparison).  Each macro feeds the binding's UDFs
(:mod:`dpsql.duck`) the parameters of :func:`~dpsql.surface.call_parameters` in that order, NULL for those
the function does not take; the helpers they call (``_dpsql_native``, ``_dpsql_n``, ...) are hand-written in
``sql/native.sql``.  Like the surface, this module imports only the standard library and the surface.

>>> print(macro(FUNCTIONS["dp_median"]).splitlines()[0])
CREATE OR REPLACE TEMP MACRO dp_median(x DOUBLE, epsilon := NULL, lower := NULL, upper := NULL, method := NULL,
>>> print(macro(FUNCTIONS["dp_median"]).splitlines()[-1])
    CAST(_dpsql_not_numeric('dp_median', x) AS DOUBLE);
"""

from __future__ import annotations

import sys
from pathlib import Path

from .surface import (
    CI_FIELDS,
    CI_SUFFIX,
    FUNCTIONS,
    PLAIN_FUNCTIONS,
    VALUE,
    VALUE_TYPE,
    Function,
    call_parameters,
    parameters_of,
    signature,
    sql_literal,
)

__all__ = ["body", "macro", "macros_sql", "native_parameters", "NATIVE", "MACRO_FILE"]

#: the file this module writes (the binding runs sql/native.sql, then this one)
MACRO_FILE = "macros.sql"
#: the checkout's sql/ directory (the generator writes into the source tree)
SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
WIDTH = 116

#: aggregates with a native route for method := 'clipped' with both bounds (sql/native.sql): the two integer
#: fixed-point sums DuckDB computes for ``_dpsql_fin`` (dpsql.core.clipped.clipped_stats)
NATIVE = {
    "sum": ("_dpsql_k_sum(x, lower, upper)", "NULL"),
    "mean": ("_dpsql_k_mom1(x, lower, upper)", "NULL"),
    "var": ("_dpsql_k_mom1(x, lower, upper)", "_dpsql_k_mom2(x, lower, upper)"),
}

HEADER = f"""\
-- dpsql: the dp_* macros that dpsql.install(con) creates.  GENERATED from dpsql/surface.py by
-- `python -m dpsql.macrogen` (tests/test_surface.py checks it is current): edit the surface, not this file.
-- Each dp_* aggregate is a macro over list(x) (or a native count) feeding one vectorised Arrow UDF, which
-- receives a whole chunk of groups at a time.  Parameters are named, with NULL meaning "not given"; the UDF
-- validates them and names the bad one.  The UDFs take the parameters in the order
-- {", ".join(call_parameters(True))} (the *{CI_SUFFIX} ones only: level).
-- Native route of method := 'clipped' with both bounds (sum, mean, var, stddev): see sql/native.sql.
-- dp_f{CI_SUFFIX}: dp_f's arguments plus level, STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE) from one release
-- (value has dp_f's law, same cost), list route only; counts pass DuckDB's count as n, the rest list(x):
-- _dpsql_agg_ci(agg, list, n, {", ".join(call_parameters(True))}).
-- Type errors (issue 14): a function of a numeric value has two overloads.  The first takes x {VALUE_TYPE}, which
-- DuckDB matches by an implicit cast from every integer width, DECIMAL and FLOAT (and NULL); a value of any
-- other type (VARCHAR, BOOLEAN, DATE, a list, ...) binds to the second, untyped one, whose _dpsql_not_numeric
-- (sql/native.sql) raises "DPSQL-E060: dp_f: its value must be numeric; <value> is <TYPE> (...)", the guarded
-- session's message.  dp_count and dp_count_ci count a value of any type.
-- Macros are TEMP so that install works on read-only databases.
"""


def native_parameters() -> tuple[str, ...]:
    """What the native route's UDF ``_dpsql_fin(agg, n, k1, k2, ...)`` receives after its statistics: the
    parameters the plain functions with a native route take, in the UDFs' order (dpsql.duck computes the same
    from its own list of native aggregates; tests/test_surface.py checks they agree)."""
    return parameters_of(f for f in PLAIN_FUNCTIONS if f.aggregate in NATIVE)


def _wrap(head: str, items: list[str], tail: str, indent: int) -> str:
    """``head + ", ".join(items) + tail``, broken after commas so that no line exceeds WIDTH; continuation
    lines start ``indent`` spaces in."""
    if not items:
        return head + tail
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else tail)
        if line is head:
            line += piece
        elif len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = " " * indent + piece
        else:
            line += " " + piece
    lines.append(line)
    return "\n".join(lines)


def _arguments(fn: Function, names: tuple[str, ...]) -> list[str]:
    """What ``fn``'s macro passes for each UDF parameter: its own argument, a value it fixes, or NULL."""
    fixed = dict(fn.fixed)
    given = set(fn.positional) | set(fn.named)
    return [n if n in given else sql_literal(fixed.get(n)) for n in names]


def _call(udf: str, leading: list[str], fn: Function, names: tuple[str, ...], end: str,
          prefix: str = "    ") -> str:
    """``prefix + udf(leading..., <fn's arguments for names>) + end``, wrapped under its parenthesis."""
    return _wrap(prefix + udf + "(", leading + _arguments(fn, names), ")" + end, len(prefix) + len(udf) + 1)


def body(fn: Function) -> str:
    """The body of ``fn``'s macro (of its typed overload, for a function of a numeric value), without ``;``."""
    release = sql_literal(fn.release)
    count = "count(x)" if VALUE in fn.positional else "count(*)"
    if fn.interval:
        if fn.aggregate == "count":
            return _call("_dpsql_agg_ci", [release, "NULL", count], fn, call_parameters(True), "")
        return _call("_dpsql_agg_ci", [release, "list(x)", "NULL"], fn, call_parameters(True), "")
    if fn.aggregate == "count":
        return _call("_dpsql_count", [count], fn, fn.named, "")
    if fn.aggregate in NATIVE:
        k1, k2 = NATIVE[fn.aggregate]
        return "\n".join([
            "    CASE WHEN _dpsql_native(method, lower, upper)",
            _call("_dpsql_fin", [release, "_dpsql_n(x)", k1, k2], fn, native_parameters(), "", prefix="    THEN "),
            _call("_dpsql_agg", [release, "list(x)"], fn, call_parameters(), " END", prefix="    ELSE "),
        ])
    return _call("_dpsql_agg", [release, "list(x)"], fn, call_parameters(), "")


def _result_type(fn: Function) -> str:
    """The SQL type ``fn`` returns: DOUBLE, or the STRUCT of a dp_*_ci twin."""
    if fn.interval:
        return "STRUCT(" + ", ".join(f"{f} DOUBLE" for f in CI_FIELDS) + ")"
    return "DOUBLE"


def macro(fn: Function) -> str:
    """``CREATE OR REPLACE TEMP MACRO <signature> AS <body>;`` for one dp_* function.  A function of a numeric
    value has two overloads: ``(x DOUBLE, ...) AS <body>`` and ``(x, ...) AS <DPSQL-E060 type error>``; DuckDB
    takes the first for every numeric type and the second for any other."""
    head = "CREATE OR REPLACE TEMP MACRO "
    sig = signature(fn)
    name, _, args = sig.partition("(")
    items = args[:-1].split(", ") if args[:-1] else []
    if fn.value != "NUMERIC":
        return _wrap(f"{head}{name}(", items, ") AS", len(head) + len(name) + 1) + "\n" + body(fn) + ";"
    typed = [f"{VALUE} {VALUE_TYPE}" if item == VALUE else item for item in items]
    return "\n".join([
        _wrap(f"{head}{name}(", typed, ") AS", len(head) + len(name) + 1),
        body(fn) + ",",
        _wrap("    (", items, ") AS", 5),
        f"    CAST(_dpsql_not_numeric({sql_literal(fn.name)}, {VALUE}) AS {_result_type(fn)});",
    ])


def macros_sql() -> str:
    """The text of sql/macros.sql: every function of the surface, plain ones first, then the twins."""
    return HEADER + "".join("\n" + macro(fn) + "\n" for fn in FUNCTIONS.values())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = SQL_DIR / MACRO_FILE
    text = macros_sql()
    if "--check" in args:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run python -m dpsql.macrogen", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
