"""The dp_* surface (dpsql/surface.py) is the one declaration: sql/macros.sql is generated from it, the SQL
reference (docs/sql-reference.md), the installed macros, the core's Params and the guard agree with it, and
reading it (or the guard) loads neither DuckDB nor Arrow (issue 16)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql import macrogen
from dpsql.core.registry import AGGREGATES, Params, get_method
from dpsql.surface import (
    CI_SUFFIX,
    COUNT_NAMED,
    DEFAULT_LEVEL,
    FUNCTIONS,
    NAMED,
    PARAMETERS,
    PLAIN_FUNCTIONS,
    VALUE,
    signature,
)

ROOT = Path(__file__).resolve().parent.parent


def _loaded_after(code: str) -> list[str]:
    r = subprocess.run([sys.executable, "-c", f"import sys; {code}; print(sorted(sys.modules))"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return ast.literal_eval(r.stdout.strip().splitlines()[-1])


def test_macro_file_is_generated_from_the_surface():
    """sql/macros.sql is exactly what ``python -m dpsql.macrogen`` writes: edit dpsql/surface.py and rerun it."""
    current = (ROOT / "sql" / macrogen.MACRO_FILE).read_text(encoding="utf-8")
    assert current == macrogen.macros_sql(), "sql/macros.sql is stale: run python -m dpsql.macrogen"
    assert macrogen.main(["--check"]) == 0


def test_binding_and_generator_agree():
    """The binding's UDFs take what the generated macros pass (dpsql.duck does not import the generator)."""
    from dpsql import duck

    assert set(duck._NATIVE_AGGREGATES) == set(macrogen.NATIVE)
    assert duck.FIN_PARAM_NAMES == macrogen.native_parameters()
    assert duck._SQL_FILES[-1] == macrogen.MACRO_FILE


def test_installed_macros_have_the_declared_signatures():
    """Every overload has the declared parameters; a function of a numeric value has two (issue 14): x DOUBLE,
    and an untyped one that raises DPSQL-E060 for any other type."""
    con = dpsql.install(duckdb.connect())
    rows = con.execute("SELECT function_name, parameters, parameter_types FROM duckdb_functions() "
                       "WHERE function_type = 'macro' AND function_name LIKE 'dp\\_%' ESCAPE '\\'").fetchall()
    installed: dict[str, list] = {}
    for name, params, types in rows:
        installed.setdefault(name, []).append((list(params), (list(types) + [None])[0]))
    assert set(installed) == set(FUNCTIONS)
    for name, fn in FUNCTIONS.items():
        assert all(p == [*fn.positional, *fn.named] for p, _ in installed[name]), name
        value_types = sorted(str(t) for _, t in installed[name])
        assert value_types == (["DOUBLE", "None"] if fn.value == "NUMERIC" else ["None"]), name
    con.close()


def test_functions_and_parameters_are_consistent():
    assert [f.name for f in PLAIN_FUNCTIONS] == [n for n in FUNCTIONS if not n.endswith(CI_SUFFIX)]
    assert sorted(n for n in FUNCTIONS if n.endswith(CI_SUFFIX)) == sorted(f.name + CI_SUFFIX for f in PLAIN_FUNCTIONS)
    for fn in FUNCTIONS.values():
        assert fn.aggregate in AGGREGATES, fn.name
        get_method(fn.aggregate, None)  # the core has a default method for it
        assert set(fn.parameters) | {n for n, _ in fn.fixed} <= set(PARAMETERS), fn.name
        assert (fn.positional[:1] == (VALUE,)) == (fn.value is not None), fn.name
        assert all(PARAMETERS[n].interval == fn.interval for n in fn.named if PARAMETERS[n].interval), fn.name
        assert fn.interval == any(PARAMETERS[n].interval for n in fn.named), fn.name
    assert DEFAULT_LEVEL == 0.95 and signature(FUNCTIONS["dp_count"]) == "dp_count(x, epsilon := NULL, method := NULL)"


def test_every_parameter_is_a_params_field():
    """The binding builds core.registry.Params from the surface by name; ``method`` selects the method."""
    fields = set(Params.__dataclass_fields__)
    assert {n for n in PARAMETERS if n != "method"} <= fields
    assert PARAMETERS["method"].sql_type == "VARCHAR"


def _reference() -> str:
    """docs/sql-reference.md from its title to "Data rules" (the functions, the arguments, the error bars)."""
    text = (ROOT / "docs" / "sql-reference.md").read_text(encoding="utf-8")
    start = text.index("# SQL reference")
    return text[start: text.index("\n## Data rules", start)]


def test_sql_reference_function_table_matches_the_surface():
    ref = _reference()
    table = ref[: ref.index("Named arguments")]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `dp_")]
    seen = []
    for row in rows:
        first = row.split("|")[1]
        for name, args in re.findall(r"`(dp_\w+)(?:\(([^)`]*)\))?`", first):
            fn = FUNCTIONS[name]
            seen.append(name)
            if args:
                parts = [a.strip() for a in args.split(",")]
                assert tuple(a for a in parts if ":=" not in a) == fn.positional, row
                assert {a.split(":=")[0].strip() for a in parts if ":=" in a} <= set(fn.named), row
    assert seen == [f.name for f in PLAIN_FUNCTIONS]


def test_sql_reference_argument_table_matches_the_surface():
    ref = _reference()
    args = ref[ref.index("| argument | meaning |"):]
    rows = [ln for ln in args.split("\n\n")[0].splitlines() if ln.startswith("| `")]
    documented = {}
    for row in rows:
        first, meaning = row.split("|")[1:3]
        for name in re.findall(r"`(\w+) :=", first):
            documented[name] = meaning
    named = {n for fn in FUNCTIONS.values() for n in fn.named}
    assert set(documented) == named
    for name in named:
        assert ("`dp_*_ci` only" in documented[name]) == PARAMETERS[name].interval, name
        if PARAMETERS[name].default is not None:
            assert f"default {PARAMETERS[name].default:g}" in documented[name], name
    counts = " and ".join(f"`{f.name}`" for f in PLAIN_FUNCTIONS if f.named != NAMED)
    only = " and ".join(f"`{n}`" for n in COUNT_NAMED)
    assert f"{counts} take only {only}" in " ".join(ref.split())


def test_sql_reference_lists_every_interval_twin():
    ref = _reference()
    para = " ".join(ref[ref.index("Every function above has a twin"):].split("\n\n")[0].split())
    assert re.findall(r"`(dp_\w+_ci)`", para) == [f.name + CI_SUFFIX for f in PLAIN_FUNCTIONS]
    assert f"plus `level := {DEFAULT_LEVEL:g}`" in para


def test_surface_imports_nothing():
    """surface.py is data: no dpsql module (it sits below the guard and the binding), standard library only."""
    tree = ast.parse((ROOT / "dpsql" / "surface.py").read_text(encoding="utf-8"))
    imported = [n.module if isinstance(n, ast.ImportFrom) else a.name for n in ast.walk(tree)
                if isinstance(n, ast.Import | ast.ImportFrom) for a in (n.names if isinstance(n, ast.Import) else [n])]
    assert imported and all(m.split(".")[0] in sys.stdlib_module_names for m in imported), imported
    assert set(_loaded_after("import dpsql.surface")) - set(_loaded_after("import dpsql")) == {"dpsql.surface"}


@pytest.mark.parametrize("module", ["dpsql.guard", "dpsql.macrogen"])
def test_guard_and_generator_load_neither_duckdb_nor_arrow(module: str):
    loaded = _loaded_after(f"import {module}")
    assert not [m for m in loaded if m.split(".")[0] in ("duckdb", "_duckdb", "pyarrow") or m == "dpsql.duck"]


def test_core_loads_neither_duckdb_nor_sqlglot():
    loaded = _loaded_after("import dpsql.core, dpsql.core.estimators")
    assert not [m for m in loaded if m.split(".")[0] in ("duckdb", "_duckdb", "sqlglot", "pyarrow")]
