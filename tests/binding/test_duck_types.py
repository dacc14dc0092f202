"""Issue 14: in trusted mode a dp_* value of a non-numeric type raises dpsql's DPSQL-E060 (the guarded session's
message), not a DuckDB binder error naming the internal UDFs; numeric types release exactly what they did."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql import macrogen
from dpsql.noise import Rng
from dpsql.surface import FUNCTIONS, VALUE, signature

NUMERIC = [f for f in FUNCTIONS.values() if f.value == "NUMERIC"]
ANY = [f for f in FUNCTIONS.values() if f.value != "NUMERIC"]

#: column -> (its type, a value)
BAD = {
    "name": ("VARCHAR", "'x'"),
    "flag": ("BOOLEAN", "true"),
    "day": ("DATE", "DATE '2024-01-02'"),
    "ts": ("TIMESTAMP", "TIMESTAMP '2024-01-02 03:04:05'"),
    "tstz": ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ '2024-01-02 03:04:05+00'"),
    "tod": ("TIME", "TIME '03:04:05'"),
    "span": ("INTERVAL", "INTERVAL 3 DAY"),
    "raw": ("BLOB", "'\\xAA'::BLOB"),
    "ints": ("INTEGER[]", "[1, 2]"),
    "nums": ("DOUBLE[]", "[1.5]"),
    "rec": ("STRUCT(a INTEGER)", "{'a': 1}"),
    "kv": ("MAP(VARCHAR, INTEGER)", "MAP {'a': 1}"),
    "id": ("UUID", "'00000000-0000-0000-0000-000000000001'::UUID"),
}
#: values that are not columns: (SQL text, as the message shows it (DuckDB's rendering), its type)
BAD_EXPRESSIONS = [("'abc'", "'abc'", "VARCHAR"), ("upper(name)", "upper(name)", "VARCHAR"),
                   ("day + 1", "(day + 1)", "DATE"), ("NOT flag", "(NOT flag)", "BOOLEAN")]

NUMERIC_TYPES = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
                 "UHUGEINT", "DECIMAL(18,3)", "DECIMAL(38,10)", "FLOAT", "DOUBLE"]


def _table(con: duckdb.DuckDBPyConnection, name: str, rows: int) -> None:
    cols = ", ".join(f"{c} {t}" for c, (t, _) in BAD.items())
    con.execute(f"CREATE TABLE {name} (g INTEGER, v DOUBLE, {cols})")
    values = ", ".join(v for _, v in BAD.values())
    for i in range(rows):
        con.execute(f"INSERT INTO {name} VALUES ({i % 2}, {i}, {values})")


@pytest.fixture(scope="module")
def con():
    c = dpsql.install(duckdb.connect(), rng=Rng.seeded(14))
    _table(c, "t", 4)
    _table(c, "empty", 0)
    yield c
    c.close()


def _call(fn, value: str, extra: str = "epsilon := 1") -> str:  # noqa: ANN001
    p = ", 0.5" if "p" in fn.positional else ""
    return f"{fn.name}({value}{p}, {extra})"


def _message(fn: str, text: str, typ: str) -> str:
    return (f"DPSQL-E060: {fn}: its value must be numeric; {text} is {typ} "
            f"(convert it, e.g. TRY_CAST({text} AS DOUBLE), or count it with dp_count)")


def _raises(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    with pytest.raises(duckdb.InvalidInputException) as e:
        con.execute(sql).fetchall()
    kind, _, message = str(e.value).partition(": ")
    assert kind == "Invalid Input Error", str(e.value)
    return message


@pytest.mark.parametrize("fn", NUMERIC, ids=lambda f: f.name)
def test_a_non_numeric_value_raises_the_guarded_sessions_e060(con, fn) -> None:  # noqa: ANN001
    values = [(c, c, t) for c, (t, _) in BAD.items()] + BAD_EXPRESSIONS
    for sql, text, typ in values:
        # grouped, over rows; no internal signature (_dpsql_agg, list, STRING_LITERAL) in the message
        message = _raises(con, f"SELECT g, {_call(fn, sql)} FROM t GROUP BY g")
        assert message == _message(fn.name, text, typ), sql
    # named value argument, every parameter, HAVING, ORDER BY, a field of the _ci struct, nested in arithmetic
    named = ["p := 0.5"] * ("p" in fn.positional) + ["epsilon := 1", "lower := 0", "upper := 1", "method := 'clipped'"]
    everything = f"{fn.name}({VALUE} := name, {', '.join(named)})"
    for sql in [f"SELECT {everything} FROM t",
                f"SELECT g FROM t GROUP BY g HAVING {_call(fn, 'day')} IS NOT NULL",
                f"SELECT g FROM t GROUP BY g ORDER BY {_call(fn, 'day')}",
                f"SELECT {_call(fn, 'day')}" + (".lo" if fn.interval else " + 1") + " FROM t"]:
        assert _raises(con, sql).startswith(f"DPSQL-E060: {fn.name}: its value must be numeric; "), sql


@pytest.mark.parametrize("fn", NUMERIC, ids=lambda f: f.name)
def test_the_error_does_not_need_data(con, fn) -> None:  # noqa: ANN001
    """Without GROUP BY the query has one group even over no rows, so the error fires on an empty table.  A
    GROUP BY query over no rows has no group to raise it for: it returns no rows (its answer over no data)."""
    for text, typ in [("name", "VARCHAR"), ("ints", "INTEGER[]"), ("'abc'", "VARCHAR")]:
        assert _raises(con, f"SELECT {_call(fn, text)} FROM empty") == _message(fn.name, text, typ)
        assert _raises(con, f"SELECT {_call(fn, text)} FROM t WHERE false") == _message(fn.name, text, typ)
        assert con.execute(f"SELECT g, {_call(fn, text)} FROM empty GROUP BY g").fetchall() == []


@pytest.mark.parametrize("fn", ANY, ids=lambda f: f.name)
def test_counts_count_values_of_any_type(con, fn) -> None:  # noqa: ANN001
    values = list(BAD) + ["'abc'", "v"] if fn.positional else [""]
    for value in values:
        call = f"{fn.name}({value}, epsilon := 1)" if fn.positional else f"{fn.name}(epsilon := 1)"
        rows = con.execute(f"SELECT g, {call} FROM t GROUP BY g").fetchall()
        assert len(rows) == 2 and all(r[1] is not None for r in rows), value


def _calls(fn) -> list[str]:  # noqa: ANN001
    """Calls of ``fn`` on column v covering its routes: the default method, bounds, and (sum, mean, var, stddev)
    the native route of method := 'clipped'."""
    out = [_call(fn, "v")]
    if "lower" in fn.named:
        out.append(_call(fn, "v", "epsilon := 1, lower := 0, upper := 100"))
        if fn.aggregate in macrogen.NATIVE and not fn.interval:
            out.append(_call(fn, "v", "epsilon := 1, lower := 0, upper := 100, method := 'clipped'"))
    return out


def _untyped(fn) -> str:  # noqa: ANN001
    """The macro as it was before issue 14 (one untyped overload), as ``old_<name>``: same body, same UDFs."""
    return f"CREATE TEMP MACRO old_{signature(fn)} AS\n{macrogen.body(fn)}"


@pytest.mark.parametrize("typ", NUMERIC_TYPES)
def test_numeric_types_release_what_the_untyped_macros_released(typ: str) -> None:
    """Every integer width (HUGEINT and UHUGEINT too), DECIMAL, FLOAT and DOUBLE: the typed overload (x DOUBLE)
    releases exactly what the untyped macro did from the same seed, on every route."""
    new, old = (dpsql.install(duckdb.connect(), rng=Rng.seeded(2024)) for _ in range(2))
    for c in (new, old):
        c.execute(f"CREATE TABLE n AS SELECT i % 3 AS g, CAST((i * 37) % 101 AS {typ}) AS v FROM range(300) r(i)")
    for fn in FUNCTIONS.values():
        old.execute(_untyped(fn))
    for fn in NUMERIC:
        for call in _calls(fn):
            got = new.execute(f"SELECT g, {call} FROM n GROUP BY g ORDER BY g").fetchall()
            assert got == old.execute(f"SELECT g, old_{call} FROM n GROUP BY g ORDER BY g").fetchall(), (typ, call)
            assert len(got) == 3 and any(r[1] is not None for r in got), (typ, call)  # NULL: a private decision
    new.close()
    old.close()


def test_guarded_install_makes_a_non_numeric_value_a_bind_error() -> None:
    """The guarded session's executor installs with guarded=True: the same calls fail when DuckDB binds the
    query (no data read; the session refuses it uncharged), and numeric values bind as before."""
    c = dpsql.install(duckdb.connect(), guarded=True)
    _table(c, "t", 2)
    for fn in NUMERIC:
        for text in [*BAD, *(e for e, _, _ in BAD_EXPRESSIONS)]:
            with pytest.raises(duckdb.BinderException):
                c.sql(f"SELECT g, {_call(fn, text)} FROM t GROUP BY g")
        assert c.sql(f"SELECT g, {_call(fn, 'v')} FROM t GROUP BY g").fetchall()
    c.close()
