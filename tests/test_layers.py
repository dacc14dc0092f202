"""Layering: the estimator core imports neither duckdb nor sqlglot; dpsql's import graph has no cycle and no
import that climbs a layer (issue 16)."""

import ast
import subprocess
import sys
from pathlib import Path

import dpsql

PACKAGE = Path(dpsql.__file__).resolve().parent

#: From the top down.  A module may import modules of lower layers, and modules of its own unit (an entry of a
#: layer: a module, or a package with its submodules, e.g. two modules of dpsql.guard); another unit of the same
#: layer is off limits (sideways).  The longest unit that matches places a module; every module must be placed.
#: The package itself (``dpsql``: install, connect, admin) is the Python API over sessions, admin and binding;
#: the command line and the demo call it like any user, and nothing below it may.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("command line", ("dpsql.cli",)),
    ("front doors", ("dpsql.shell", "dpsql.demo", "dpsql.server", "dpsql.testing", "dpsql.spark")),
    ("python API", ("dpsql",)),
    ("sessions", ("dpsql.session", "dpsql.administration")),
    ("session parts", ("dpsql.executor", "dpsql.budget_views")),
    ("policy", ("dpsql.policy",)),  # policy metadata -> the guard's Catalog
    ("guard and ledger", ("dpsql.guard", "dpsql.ledger")),
    ("binding", ("dpsql.duck", "dpsql.macrogen", "dpsql.plans")),  # plans: summary plans, both modes (issue 17)
    ("core", ("dpsql.core",)),
    ("noise", ("dpsql.noise",)),
    ("aliases", ("dpsql.sqlfiles",)),  # the former name of sqltext's file helpers, while imports of it remain
    ("leaves", ("dpsql.errors", "dpsql.sqltext", "dpsql.display", "dpsql.surface")),  # import nothing of dpsql
]

#: dpsql.core's import cycle (the registry imported the estimator families to register them, and they imported the
#: registry) is gone (issue 16: each family exports METHODS; dpsql.core hands the table to the registry).


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The dpsql modules ``name`` imports anywhere in its text (top level, functions, TYPE_CHECKING)."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the module pkg.sub; `from pkg import name` imports pkg
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import dpsql.a.b` of a missing name: its nearest module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _place(module: str) -> tuple[int, str]:
    """(layer index from the top, unit) of a module: the longest unit prefix that matches it."""
    best = None
    for i, (_, units) in enumerate(LAYERS):
        for unit in units:
            inside = module.startswith(unit + ".") and unit != "dpsql"  # the package: only its __init__
            if (module == unit or inside) and (best is None or len(unit) > len(best[1])):
                best = (i, unit)
    assert best is not None, f"{module} is in no layer of tests/test_layers.py: place it"
    return best


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_core_imports_no_duckdb_or_sqlglot():
    code = (
        "import sys, dpsql.core, dpsql.core.estimators, dpsql.noise;"
        "bad = [m for m in ('duckdb', 'sqlglot') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_import_graph_has_no_cycles():
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles: {cycles}"


def test_no_import_climbs_or_crosses_a_layer():
    bad = []
    for module, targets in sorted(_graph().items()):
        layer, unit = _place(module)
        for target in sorted(targets):
            t_layer, t_unit = _place(target)
            if t_unit != unit and t_layer <= layer:
                how = "up" if t_layer < layer else "sideways"
                bad.append(f"{module} ({LAYERS[layer][0]}) imports {target} ({LAYERS[t_layer][0]}): {how}")
    assert not bad, "\n".join(bad)


def test_the_graph_sees_imports():
    """The checker itself: relative, package-relative and lazy imports are all found."""
    graph = _graph()
    assert "dpsql.duck" in graph["dpsql"]  # lazy, inside install()
    assert "dpsql.core" in graph["dpsql.duck"]
    assert "dpsql.noise" in graph["dpsql.core.registry"]  # from ..noise
    assert "dpsql.server.auth" in graph["dpsql.server"]  # from .auth (in a package __init__)
