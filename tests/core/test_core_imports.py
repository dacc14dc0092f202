"""dpsql.core's own layering (issue 16): no import cycle, the registry imports no estimator family, families do
not import each other for helpers, and only dpsql.core itself hands the method table to the registry.
(tests/test_layers.py checks the whole package's graph; this is the finer rule inside the core.)"""

import ast
from pathlib import Path

import dpsql.core

CORE = Path(dpsql.core.__file__).resolve().parent
FAMILIES = {"universal", "scalefree", "asymmetric", "subset", "smooth", "instance", "clipped", "moments"}
#: family -> family imports allowed: dp_var_ci's upper end uses the scale-free floor and median; dp_var's default
#: (moments) routes between the asymmetric mechanism and the scale-free means
FAMILY_EDGES = {("asymmetric", "scalefree"), ("moments", "asymmetric"), ("moments", "scalefree")}


def _graph() -> dict[str, set[str]]:
    names = {p.stem for p in CORE.glob("*.py")}
    out = {}
    for path in CORE.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found |= {node.module} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpsql.core."):
                found.add(node.module.split(".")[2])
        out[path.stem] = {m for m in found if m in names and m != path.stem}
    return out


def test_no_cycle_in_core():
    graph = _graph()
    done: set[str] = set()

    def visit(v: str, path: list[str]) -> None:
        assert v not in path, f"import cycle: {' -> '.join(path[path.index(v):] + [v])}"
        if v in done:
            return
        for w in sorted(graph[v]):
            visit(w, path + [v])
        done.add(v)

    for v in sorted(graph):
        visit(v, [])


def test_layers_inside_core():
    graph = _graph()
    low = {"accounting", "batch", "intervals", "spending", "primitives", "registry", "helpers", "ranges"}
    for mod in low:
        assert not graph[mod] & (FAMILIES | {"estimators", "__init__"}), f"{mod} imports a family or the table"
    for fam in FAMILIES:
        bad = {(fam, other) for other in graph[fam] & FAMILIES} - FAMILY_EDGES
        assert not bad, f"family imports another: {bad}"
        assert "estimators" not in graph[fam]
    assert graph["estimators"] >= FAMILIES


def test_every_family_exports_its_methods():
    from dpsql.core import estimators, registry

    assert {f.__name__.rsplit(".", 1)[1] for f in estimators.FAMILIES} == FAMILIES
    listed = [(m.aggregate, m.name) for m in estimators.METHODS]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted((a, n) for a in registry.AGGREGATES for n in registry.methods(a))
