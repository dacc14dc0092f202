"""Helpers shared by the guard's passes: refusals, the dp_* names, walking one SELECT's own nodes, and the node
numbering that lets a pure rewrite find, in its copy of the tree, the nodes the analyses' facts name.

What the analyses find is in :mod:`dpsql.guard.facts`.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..errors import PrivacyError
from ..surface import AGGREGATE_FUNCTIONS

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
