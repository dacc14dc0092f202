"""Per-unit pre-aggregation (issue 15, item 4): aggregate each person's rows first, then release with dp_*.

The canonical way to bound what one person contributes::

    SELECT dp_mean(total, epsilon := 0.1, lower := 0, upper := 100000)
    FROM (SELECT uid, sum(cost) AS total FROM visits GROUP BY uid)

A SELECT over protected rows without dp_* calls is a *per-unit aggregation* when its GROUP BY is exactly one
key and that key is the privacy unit column (by column identity, as the lineage pass tracks it: a renamed
unit column counts, ``uid + 0`` does not).  Then:

* its aggregates are ``count`` (also ``count(*)`` and ``count(DISTINCT x)``), ``sum``, ``avg``, ``min`` and
  ``max`` (others E021, naming these);
* outside its aggregates it may select only the unit itself (E020), and its HAVING may hold aggregates of
  the unit's rows and the unit (E022 for another column; a subquery there is E051, as anywhere but WHERE);
* ORDER BY / LIMIT / OFFSET / DISTINCT / QUALIFY / windows / SAMPLE stay E050 (a LIMIT after GROUP BY uid
  keeps a data-chosen set of persons); its FROM, joins and WHERE follow the rules of any protected scope
  (same-unit INNER joins on the unit, public tables, public IN / EXISTS filters; another unit is E042);
* its rows are protected, one per unit: they may leave the query only through a dp_* aggregate (E020 at
  the outermost level, E021 under a plain aggregate, E032 as a dp group key);
* GROUP BY the unit and another column is refused (E021; it gives several rows per unit, and no column can
  be proved constant per unit from the catalog): take a per-unit attribute as ``min(col)`` or ``max(col)``,
  which is one value per unit and, for a column with declared public keys, keeps those keys (an outer
  ``GROUP BY`` of it then releases the declared keys, like the column itself).  Grouping by any key that is
  not the unit (``clinic``, ``uid % 10``, a look-alike) is not a per-unit aggregation and stays E021/E050,
  with a message naming this form.

The checks run in the lineage pass (``lineage.per_unit_key``, ``per_unit_info`` and ``_check_private``); an
alias in HAVING (``HAVING total > 100``) names its select item.  Under the data owner's plain-aggregate opt-in
the per-unit aggregation keeps its plain aggregates and the aggregate around it becomes dp_* (``guard.plain``).

Sensitivity: the relation's rows are in one-to-one correspondence with the units that have rows (and pass
WHERE and HAVING); each row is a function of that unit's rows only (WHERE and the joins act row by row or
within one unit: protected joins equate units; public joins and filters read no protected data), so adding
or removing one unit, with any number of rows, adds or removes at most one row of the relation and changes
no other row.  The relation is therefore a protected relation whose contribution bound is 1 row in 1 group
per unit: its lineage info carries a bound of ``max_rows_per_unit = max_groups_per_unit = 1`` in place of
the tables it read, so an outer dp_* aggregation over it pays multiplier 1 (``groups.check_groups`` takes the
largest bound of what it reads: joined with the raw table again, that table's k applies).  The outer
aggregation is still bounded per unit by ``guard.bounding`` (partitioned by the unit column of the
relation: a no-op on one row per unit, and the rows whose unit is NULL, one NULL group here, are dropped).
A unit without rows produces no row; nothing about it is released, which is add/remove-one-unit DP.

Rewrite (after the totality rewrite, before bounding), because DuckDB's ``TRY`` cannot hold an aggregate::

    SELECT uid, max(cost) - min(cost) AS spread FROM visits WHERE w GROUP BY uid HAVING max(cost) > 9000
    ->
    SELECT _dpsql_pa._dpsql_g AS uid, TRY(_dpsql_pa._dpsql_p0 - _dpsql_pa._dpsql_p1) AS spread
    FROM (SELECT uid AS _dpsql_g, max(cost) AS _dpsql_p0, min(cost) AS _dpsql_p1
          FROM visits WHERE TRY(w) GROUP BY uid) AS _dpsql_pa
    WHERE TRY(_dpsql_pa._dpsql_p0 > 9000)

Aggregate arguments go under ``TRY``; ``sum`` and ``avg`` add ``CAST(0 AS DOUBLE)`` to theirs, so they are
computed in DOUBLE (a HUGEINT or DECIMAL(38) sum would raise on overflow: a one-person oracle; a DOUBLE sum
saturates at +-inf, which dp_* clamp to +-2**1000, and a non-numeric argument stays a binder error).  count,
min and max never raise.  Expressions over the aggregates and HAVING are evaluated row by row in the wrapper,
under ``TRY``.  The same SELECT object becomes the wrapper, so every reference to it stays valid.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> from dpsql.guard import plan
>>> v = TableInfo("v", "protected", {"uid": "INT", "x": "DOUBLE"}, privacy_unit="uid", max_rows_per_unit=5)
>>> plan("SELECT dp_mean(t, epsilon := 0.1) FROM (SELECT uid, sum(x) AS t FROM v GROUP BY uid)",
...      Catalog({"v": v})).cost
Decimal('0.100000000000000000')
"""

from __future__ import annotations

from sqlglot import exp

from .context import PREFIX, dp_name, editable, own_nodes
from .facts import Facts
from .lineage import having_alias, per_unit_of, resolve
from .totality import total_expression

PA = f"{PREFIX}_pa"
G = f"{PREFIX}_g"


def _total_aggregate(node: exp.Expression) -> exp.Expression:
    """Arguments under TRY; sum and avg in DOUBLE (they cannot overflow)."""
    def arg(e: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Sum | exp.Avg):
            zero = exp.Cast(this=exp.Literal.number(0), to=exp.DataType.build("DOUBLE"))
            return exp.Try(this=exp.Add(this=exp.paren(e, copy=False), expression=zero))
        return total_expression(e)

    this = node.this
    if isinstance(this, exp.Distinct):
        this.set("expressions", [arg(e) for e in list(this.expressions)])
    elif this is not None and not isinstance(this, exp.Star):
        node.set("this", arg(this))
    return node


def _rewrite(facts: Facts, analysed: exp.Select, select: exp.Select, key: exp.Column) -> None:
    """Rewrite ``select`` (the copy of ``analysed`` in the tree being rewritten) in place."""
    srcs = facts.lineage.sources[id(analysed)]
    kref = resolve(srcs, key)
    inner_items: list[exp.Expression] = [exp.alias_(key.copy(), G, quoted=True)]
    lifted: dict[str, str] = {}

    def lift(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.AggFunc):
            agg = _total_aggregate(node.copy())
            text = agg.sql("duckdb")
            if text not in lifted:
                lifted[text] = f"{PREFIX}_p{len(lifted)}"
                inner_items.append(exp.alias_(agg, lifted[text], quoted=True))
            return exp.column(lifted[text], table=PA, quoted=True)
        if isinstance(node, exp.Column) and resolve(srcs, node) == kref:
            return exp.column(G, table=PA, quoted=True)
        for child in list(node.iter_expressions()):
            new = lift(child)
            if new is not child:
                child.replace(new)
        return node

    items = []
    for item in list(select.expressions):
        name = item.alias_or_name if isinstance(item, exp.Alias | exp.Column) else \
            item.sql("duckdb", normalize_functions="lower")
        items.append(exp.alias_(total_expression(lift(item.unalias().copy())), name, quoted=True))
    having = select.args.get("having")
    cond = None
    if having is not None:
        body = having.this.copy()
        for col in list(body.find_all(exp.Column)):
            target = having_alias(srcs, select, col)
            if target is not None:
                body = target.copy() if col is body else body
                if col is not body:
                    col.replace(target.copy())
        cond = total_expression(lift(body))
    inner = exp.Select(expressions=inner_items)
    for arg in ("from_", "joins", "where"):
        inner.set(arg, select.args.get(arg))
    inner.set("group", exp.Group(expressions=[key.copy()]))
    select.set("expressions", items)
    select.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(PA)))))
    select.set("joins", None)
    select.set("where", exp.Where(this=cond) if cond is not None else None)
    select.set("group", None)
    select.set("having", None)


def rewrite_per_unit(tree: exp.Expression, facts: Facts) -> exp.Expression:
    """A copy of ``tree`` where each per-unit aggregation's aggregates are in an inner grouped query."""
    todo = [(s, key) for s in facts.lineage.private if (key := per_unit_of(facts.lineage, s)) is not None]
    if not todo:
        return tree
    tree, find = editable(tree)
    for analysed, key in todo:
        select = find(analysed)
        if not any(dp_name(n) for n in own_nodes(select)):
            _rewrite(facts, analysed, select, key)
    return tree
