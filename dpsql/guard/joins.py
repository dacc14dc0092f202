"""Pass: joins that involve protected rows keep one person's rows together.

Two protected relations may be joined only by an INNER join whose condition equates their privacy
units (E040; equating a look-alike column is E041).  Protected rows may be joined to public tables by
INNER or LEFT joins that preserve the protected side; CROSS, NATURAL, ASOF, POSITIONAL, SEMI/ANTI and
comma joins involving protected rows are refused.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> from dpsql.guard.relations import check_relations
>>> from dpsql.guard.lineage import analyse_lineage
>>> v = TableInfo("v", "protected", {"uid": "INT", "x": "DOUBLE"}, privacy_unit="uid")
>>> q = "SELECT dp_count(*) FROM v a JOIN v b ON a.x = b.x"
>>> ctx = Context("", Catalog({"v": v}), tree=sqlglot.parse_one(q, read="duckdb"))
>>> check_relations(ctx); analyse_lineage(ctx)
>>> try:
...     check_joins(ctx)
... except Exception as e:
...     print(e.code)
DPSQL-E040
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from .context import Context, refuse
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
    for c in _conjuncts(on):
        if not (isinstance(c, exp.EQ) and isinstance(c.left, exp.Column) and isinstance(c.right, exp.Column)):
            continue
        a, b = resolve(srcs, c.left), resolve(srcs, c.right)
        if a is None or b is None:
            continue
        for x, y in ((a, b), (b, a)):
            if x[0] == right and y[0] in left:
                if is_unit(srcs, x) and is_unit(srcs, y):
                    return True
                if is_unit(srcs, x) or is_unit(srcs, y):
                    suspicious = True
    if suspicious:
        raise refuse("041", "the join equates the privacy unit with a column that is not the unit")
    return False


def private_joins(ctx: Context) -> Iterator[tuple[Sources, exp.Join, str, list[str]]]:
    """Every join of every scope that reads protected rows, in order: ``(sources, join, right alias, the
    aliases joined before it)`` (the list is a copy).  Shared by this pass and the fan-out pass."""
    for select in ctx.private:
        srcs = ctx.sources[id(select)]
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


def check_joins(ctx: Context) -> None:
    """Check every join in every scope that reads protected rows."""
    for srcs, join, right, seen in private_joins(ctx):
        left_prot = [a for a in seen if srcs[a][1].kind == "protected"]
        right_prot = srcs[right][1].kind == "protected"
        if left_prot or right_prot:
            method = str(join.args.get("method") or "").upper()
            kind = str(join.args.get("kind") or "").upper()
            side = str(join.args.get("side") or "").upper()
            if method or kind in ("CROSS", "SEMI", "ANTI", "OUTER") and not side:
                raise refuse("040", f"{(method or kind)} joins involving protected data are not allowed")
            if not join.args.get("on") and not join.args.get("using"):
                raise refuse("040", "joins involving protected data need an ON or USING condition")
            if side == "FULL" or (side == "RIGHT" and left_prot) or (side == "LEFT" and right_prot):
                raise refuse("040", "outer joins may not make protected rows optional")
            if left_prot and right_prot:
                if side:
                    raise refuse("040", "protected relations may be joined only by INNER joins")
                if not _joins_on_unit(srcs, join, right, left_prot):
                    raise refuse("040", "protected relations must be joined on equality of the privacy unit")
