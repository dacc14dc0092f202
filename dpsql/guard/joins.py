"""Pass: joins that involve protected rows keep one person's rows together.

Two protected relations may be joined only by an INNER join whose condition equates their privacy
units (E040; equating a look-alike column is E041).  Protected rows may be joined to public tables by
INNER or LEFT joins that preserve the protected side; CROSS, NATURAL, ASOF, POSITIONAL, SEMI/ANTI and
comma joins involving protected rows are refused.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> from dpsql.guard.relations import query_scopes
>>> from dpsql.guard.lineage import analyse_lineage
>>> v = TableInfo("v", "protected", {"uid": "INT", "x": "DOUBLE"}, privacy_unit="uid")
>>> q = "SELECT dp_count(*) FROM v a JOIN v b ON a.x = b.x"
>>> tree = sqlglot.parse_one(q, read="duckdb")
>>> facts = Facts("", Catalog({"v": v}), tree, tuple(query_scopes(tree)))
>>> facts = facts.add("lineage", analyse_lineage(facts))
>>> try:
...     check_joins(facts)
... except Exception as e:
...     print(e.code)
DPSQL-E040
"""

from __future__ import annotations

from collections.abc import Iterator
from types import UnionType

from sqlglot import exp

from .context import refuse
from .facts import Facts, Lineage
from .lineage import Sources, is_unit, resolve


def _alias_of(srcs: Sources, item: exp.Expression) -> str | None:
    for alias, (node, _, _) in srcs.items():
        if node is item or (isinstance(item, exp.Subquery) and node is item.this):
            return alias
    return None


def _conjuncts(cond: exp.Expression) -> list[exp.Expression]:
    cond = cond.unnest() if isinstance(cond, exp.Paren) else cond
    if isinstance(cond, exp.And):
        return _conjuncts(cond.left) + _conjuncts(cond.right)
    return [cond]


def _joins_on_unit(srcs: Sources, join: exp.Join, right: str, left: list[str]) -> bool:
    """Whether ``join`` equates the unit of ``right`` with the unit of a protected source in ``left``.
    Raises E041 when it equates the unit with a column that merely looks like one."""
    using = join.args.get("using")
    if using:
        for ident in using:
            name = ident.name.lower()
            if is_unit(srcs, (right, name)) and any(is_unit(srcs, (a, name)) for a in left):
                return True
        return False
    on = join.args.get("on")
    if on is None:
        return False
    suspicious = False
    for a, b in _column_equalities(srcs, on):
        for x, y in ((a, b), (b, a)):
            if x[0] == right and y[0] in left:
                if is_unit(srcs, x) and is_unit(srcs, y):
                    return True
                if is_unit(srcs, x) or is_unit(srcs, y):
                    suspicious = True
    if suspicious:
        raise refuse("041", "the join equates the privacy unit with a column that is not the unit")
    return False


def _column_equalities(srcs: Sources, on: exp.Expression | None, ops: type | UnionType = exp.EQ
                       ) -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """The resolved (alias, column) pairs of each ``column = column`` conjunct of ``on`` (an ``ops`` node);
    conjuncts of another form, or whose columns do not resolve, are skipped.  ``on`` None: none."""
    for c in _conjuncts(on) if on is not None else []:
        if isinstance(c, ops) and isinstance(c.left, exp.Column) and isinstance(c.right, exp.Column):
            a, b = resolve(srcs, c.left), resolve(srcs, c.right)
            if a is not None and b is not None:
                yield a, b


def _key_list_join(srcs: Sources, join: exp.Join, right: str, left: list[str]) -> bool:
    """Issue 15, item 2: ``FROM (VALUES ...) k(name) LEFT JOIN t ON t.c = k.name ... GROUP BY k.name``.

    Allowed when everything left of the join is literal VALUES lists (public, at most 10,000 rows, each key
    listed once: ``guard.fanout``), the ON condition equates a column of the protected side with a column of
    a list, and the aggregation groups by exactly the lists' columns.

    Rewrite and sensitivity: the unmatched list rows carry a NULL unit and are dropped by the bounding
    rewrite (``unit IS NOT NULL``), so the bounded rows are exactly those of the INNER join, each protected
    row meeting at most one list row (distinct keys): a unit's contribution is still at most
    max_rows_per_unit rows in each of at most max_groups_per_unit groups, the cost the query pays.  The
    groups released are the list's keys, all of them (the public-keys rewrite drives the groups from the
    list's distinct values, an empty group gets its DP answer), so which keys occur in the data is never
    revealed by which rows come out.  The INNER join form is the same query; it was allowed before (a join
    to a public relation whose columns are public keys)."""
    if not all(isinstance(srcs[a][0], exp.Values) for a in left):
        return False
    on = join.args.get("on")
    if on is None:
        return False
    joined = False
    for a, b in _column_equalities(srcs, on):
        if {a[0], b[0]} & {right} and ({a[0], b[0]} - {right}) <= set(left):
            joined = joined or a[0] != b[0]
    select = join.parent
    from .groups import _keys

    keys = [resolve(srcs, k) if isinstance(k, exp.Column) else None for k in _keys(select, srcs)]
    listed = {(a, c.lower()) for a in left for c in srcs[a][1].columns}
    return joined and bool(keys) and None not in keys and set(keys) == listed and len(keys) == len(listed)


def _no_unit_list(srcs: Sources, join: exp.Join) -> None:
    """A VALUES list equated with the privacy unit would list persons as groups: E032, like GROUP BY unit."""
    for a, b in _column_equalities(srcs, join.args.get("on"), exp.EQ | exp.NullSafeEQ):
        for x, y in ((a, b), (b, a)):
            if is_unit(srcs, x) and isinstance(srcs[y[0]][0], exp.Values):
                raise refuse("032", "a key list may not list privacy units (that groups by the unit)")
    for ident in join.args.get("using") or []:
        name = ident.name.lower()
        aliases = [a for a, (_, i, _) in srcs.items() if name in [c.lower() for c in i.columns]]
        if any(is_unit(srcs, (a, name)) for a in aliases) and any(isinstance(srcs[a][0], exp.Values) for a in aliases):
            raise refuse("032", "a key list may not list privacy units (that groups by the unit)")


def private_joins(lineage: Lineage) -> Iterator[tuple[Sources, exp.Join, str, list[str]]]:
    """Every join of every scope that reads protected rows, in order: ``(sources, join, right alias, the
    aliases joined before it)`` (the list is a copy).  Shared by this pass and the fan-out pass."""
    for select in lineage.private:
        srcs = lineage.sources[id(select)]
        from_ = select.args.get("from_")
        if from_ is None:
            continue
        first = _alias_of(srcs, from_.this)
        seen = [first] if first else []
        for join in select.args.get("joins") or []:
            right = _alias_of(srcs, join.this)
            if right is None:
                raise refuse("040", "join item could not be resolved")
            yield srcs, join, right, list(seen)
            seen.append(right)


def check_joins(facts: Facts) -> None:
    """Check every join in every scope that reads protected rows (a check: no facts)."""
    for srcs, join, right, seen in private_joins(facts.lineage):
        left_prot = [a for a in seen if srcs[a][1].kind == "protected"]
        right_prot = srcs[right][1].kind == "protected"
        if left_prot or right_prot:
            _no_unit_list(srcs, join)
            method = str(join.args.get("method") or "").upper()
            kind = str(join.args.get("kind") or "").upper()
            side = str(join.args.get("side") or "").upper()
            if method or kind in ("CROSS", "SEMI", "ANTI", "OUTER") and not side:
                raise refuse("040", f"{(method or kind)} joins involving protected data are not allowed")
            if not join.args.get("on") and not join.args.get("using"):
                raise refuse("040", "joins involving protected data need an ON or USING condition")
            if side == "LEFT" and right_prot and not left_prot and _key_list_join(srcs, join, right, seen):
                continue
            if side == "FULL" or (side == "RIGHT" and left_prot) or (side == "LEFT" and right_prot):
                raise refuse("040", "outer joins may not make protected rows optional; to release listed keys "
                                    "(empty ones too) write a key list: SELECT k.name, dp_count(*, epsilon := 0.1) "
                                    "FROM (VALUES ('Bob'), ('Zed')) k(name) LEFT JOIN t ON t.name = k.name "
                                    "GROUP BY k.name")
            if left_prot and right_prot:
                if side:
                    raise refuse("040", "protected relations may be joined only by INNER joins")
                if not _joins_on_unit(srcs, join, right, left_prot):
                    raise refuse("040", "protected relations must be joined on equality of the privacy unit")
