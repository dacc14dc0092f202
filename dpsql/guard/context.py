"""State shared by the guard's privacy analyses and the rewrites after them: the tree, the catalog, and what
the analysis found.

The passes before the analysis are pure functions of the tree (``guard.plan`` composes them).  The analyses
(``ANALYSES``: lineage, joins, fan-out, groups, parameters, partition selection, cost) are still functions
``pass_(ctx) -> None`` that either raise :class:`~dpsql.errors.PrivacyError` or record facts on the context,
and the rewrites after them (``REWRITES``) edit ``ctx.tree`` in place (issue 16, item 6: still to be made
facts-returning analyses and pure ``(tree, facts) -> tree`` rewrites).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import PrivacyError
from ..surface import AGGREGATE_FUNCTIONS
from .catalog import Catalog, TableInfo

PREFIX = "_dpsql"  # reserved prefix of every identifier the guard generates

#: the SQL aggregates of dpsql.install (declared in dpsql.surface) -> the core aggregate whose cost they declare
#: (with the error-bar twins dp_*_ci, which cost what the plain call costs)
DP_FUNCTIONS = AGGREGATE_FUNCTIONS


def refuse(code: str, message: str) -> PrivacyError:
    """Build the error for code ``DPSQL-E0xx`` (``code`` is the three digits)."""
    return PrivacyError(f"DPSQL-E{code}", message)


def dp_name(node: exp.Expression) -> str | None:
    """The dp_* function called by ``node``, or None."""
    if isinstance(node, exp.Anonymous):
        name = str(node.name).lower()
        if name in DP_FUNCTIONS:
            return name
    return None


@dataclass
class ScopeInfo:
    """Facts about one SELECT (or set operation) of the query."""

    kind: str  # "public" | "protected" (row level, carries units) | "noisy" (DP output)
    columns: list[str] = field(default_factory=list)
    unit_cols: set[str] = field(default_factory=set)  # output columns that are the privacy unit itself
    origins: dict[str, tuple[TableInfo, str]] = field(default_factory=dict)  # passthrough of a protected column
    tables: list[TableInfo] = field(default_factory=list)  # protected tables read (transitively)


@dataclass
class DpCall:
    """One dp_* call: where it is, its parsed parameters and its cost."""

    node: exp.Anonymous
    function: str
    aggregate: str
    params: dict[str, object] = field(default_factory=dict)  # name -> float or str
    texts: dict[str, str] = field(default_factory=dict)  # name -> literal text (exact decimals)
    multiplier: int = 1
    method: str = ""
    notion: str = ""
    value: float = 0.0  # eps (pure) or rho (zcdp) per unit of sensitivity, as the registry declares
    cost: decimal.Decimal = decimal.Decimal(0)
    purpose: str = "release"


@dataclass
class Aggregation:
    """A SELECT with dp_* calls: how it will be bounded, keyed and charged."""

    select: exp.Select
    protected: bool
    keys: list[exp.Expression] = field(default_factory=list)
    domains: list[exp.Expression | None] = field(default_factory=list)  # one relation per key, or None
    unit: exp.Expression | None = None
    max_rows: int = 1
    max_groups: int = 1
    calls: list[DpCall] = field(default_factory=list)
    selection: bool = False  # DP partition selection for undeclared keys
    selection_epsilon: str | None = None
    threshold: float | None = None

    @property
    def multiplier(self) -> int:
        if not self.protected:
            return 1
        return self.max_rows * (self.max_groups if self.keys else 1)


@dataclass
class Context:
    sql: str
    catalog: Catalog
    tree: exp.Expression | None = None
    scopes: list = field(default_factory=list)  # sqlglot Scope objects, children first
    info: dict[int, ScopeInfo] = field(default_factory=dict)  # id(scope.expression) -> info
    aggregations: list[Aggregation] = field(default_factory=list)
    sources: dict[int, dict] = field(default_factory=dict)  # id(select) -> alias -> (node, ScopeInfo, source)
    private: list[exp.Select] = field(default_factory=list)  # selects reading protected rows
    delta: decimal.Decimal = decimal.Decimal(0)
    cost: decimal.Decimal = decimal.Decimal(0)

    @property
    def calls(self) -> list[DpCall]:
        return [c for a in self.aggregations for c in a.calls]


#: the key under which :func:`tag_nodes` numbers the nodes of the analysed tree (in ``Expression.meta``, which
#: ``copy()`` keeps and SQL generation ignores)
TAG = "dpsql_node"


def tag_nodes(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` whose nodes are numbered (``meta[TAG]``), so that a rewrite working on a copy of a
    tree can find there the nodes the analyses' facts name (:func:`editable`)."""
    tree = tree.copy()
    for i, node in enumerate(tree.walk()):
        node.meta[TAG] = i
    return tree


class _Ambiguous:
    pass


_AMBIGUOUS = _Ambiguous()


def _tag(node: exp.Expression) -> int | None:
    meta = node._meta  # noqa: SLF001 - reading it through .meta would create an empty dict on every node
    return None if meta is None else meta.get(TAG)


def editable(tree: exp.Expression) -> tuple[exp.Expression, Callable[[exp.Expression], exp.Expression]]:
    """``(copy, find)``: a copy of ``tree`` for a rewrite to edit (its input is never edited), and ``find(node)``,
    which maps a node of the analysed tree (as the facts name it) to its counterpart in the copy."""
    copy = tree.copy()
    index: dict[int, object] = {}
    for node in copy.walk():
        tag = _tag(node)
        if tag is not None:
            index[tag] = _AMBIGUOUS if tag in index else node

    def find(node: exp.Expression) -> exp.Expression:
        hit = index.get(_tag(node), _AMBIGUOUS)
        if not isinstance(hit, exp.Expression):
            raise AssertionError(f"guard: no unique counterpart of {node.key} in the rewritten tree")
        return hit

    return copy, find


def own_nodes(root: exp.Expression):
    """Walk ``root``'s expression in pre-order, left to right, without entering nested SELECTs, set
    operations, subqueries or CTEs."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        children = [c for c in node.iter_expressions() if not isinstance(c, exp.Query | exp.Subquery | exp.With)]
        stack.extend(reversed(children))
