"""Pass: classify every scope as public, protected (row level) or noisy, and track the privacy unit.

A scope that reads protected rows either aggregates them with dp_* calls (its output is noisy) or passes
them on row by row (it stays protected).  Protected rows may never reach the query's output (E020), be
aggregated without DP (E021), or go through cross-row operators (E050) or expression subqueries (E051).
The privacy unit is tracked by column identity: renaming keeps it, any computation loses it.

>>> import sqlglot
>>> from dpsql.guard.catalog import Catalog, TableInfo
>>> cat = Catalog({"v": TableInfo("v", "protected", {"uid": "INT", "x": "DOUBLE"}, privacy_unit="uid")})
>>> from dpsql.guard.relations import query_scopes
>>> tree = sqlglot.parse_one("SELECT x FROM v", read="duckdb")
>>> try:
...     analyse_lineage(Facts("", cat, tree, tuple(query_scopes(tree))))
... except Exception as e:
...     print(e.code)
DPSQL-E020
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, ScopeType

from .catalog import Catalog, TableInfo
from .context import PREFIX, dp_name, own_nodes, refuse
from .facts import Facts, Lineage, ScopeInfo, Site, Sources, frozen_map
from .plain import dp_alternative
from .syntax import AGGREGATES, group_keys


@dataclass
class Found:
    """What :func:`analyse_lineage` has found so far (the same names as :class:`~dpsql.guard.facts.Lineage`)."""

    catalog: Catalog
    info: dict[int, ScopeInfo] = field(default_factory=dict)
    sources: dict[int, Sources] = field(default_factory=dict)
    private: list[exp.Select] = field(default_factory=list)
    aggregations: list[Site] = field(default_factory=list)

    def frozen(self) -> Lineage:
        sources = {k: frozen_map(v) for k, v in self.sources.items()}
        return Lineage(self.catalog, frozen_map(self.info), frozen_map(sources), tuple(self.private),
                       tuple(self.aggregations))


_PICK_LIST = (" (a pick-list is answered from declared public keys: every selected column needs them, and a "
              "WHERE may name only those columns)")


def table_info(found: Found | Lineage, table: exp.Table) -> ScopeInfo:
    ti = found.catalog.get(table.name)
    if not ti.protected:
        return ScopeInfo("public", columns=list(ti.columns))
    unit = {ti.privacy_unit} if ti.privacy_unit else set()
    return ScopeInfo(
        "protected",
        columns=list(ti.columns),
        unit_cols=unit,
        origins={c: (ti, c) for c in ti.columns},
        tables=[ti],
    )


def sources(found: Found | Lineage, scope: Scope) -> Sources:
    """alias -> (FROM item, its ScopeInfo, the sqlglot source) for one scope."""
    out: Sources = {}
    for name, (node, source) in scope.selected_sources.items():
        if isinstance(source, exp.Table):
            info = table_info(found, source)
            alias = node.args.get("alias") if isinstance(node, exp.Table) else None
            if info.kind == "protected" and alias is not None and alias.columns:
                raise refuse("041", "column aliases on a protected table are not allowed")
        elif isinstance(source, Scope):
            info = found.info.get(id(source.expression))
            if info is None:
                raise refuse("012", "a relation could not be resolved")
            holder = node.parent if isinstance(node, exp.Query) and isinstance(node.parent, exp.Subquery) else node
            alias = holder.args.get("alias") if isinstance(holder, exp.Subquery | exp.Table) else None
            if info.kind == "protected" and alias is not None and alias.columns:
                raise refuse("041", "column aliases on a relation over protected data are not allowed")
        else:
            raise refuse("010", "relation not allowed")
        out[name] = (node, info, source)
    return out


def resolve(srcs: Sources, col: exp.Column) -> tuple[str, str] | None:
    """(source alias, column name) for a column reference, or None if it names no source column."""
    name = col.name.lower()
    if col.table:
        entry = srcs.get(col.table) or next((v for k, v in srcs.items() if k.lower() == col.table.lower()), None)
        if entry is None:
            return None
        alias = next(k for k, v in srcs.items() if v is entry)
        return (alias, name) if name in [c.lower() for c in entry[1].columns] else None
    hits = [k for k, (_, info, _) in srcs.items() if name in [c.lower() for c in info.columns]]
    if len(hits) > 1 and name in _using_names(srcs[hits[0]][0]):
        return (hits[0], name)  # a USING column: DuckDB reads it from the leftmost relation
    return (hits[0], name) if len(hits) == 1 else None


def unresolved(srcs: Sources, col: exp.Column) -> str:
    """Why ``col`` names no column of the SELECT's sources (issue 14: an unknown column and an ambiguous one are
    different mistakes).  It names only the query's relations and their columns (schema), never data.

    >>> v, c = ScopeInfo("public", ["uid", "clinic"]), ScopeInfo("public", ["clinic", "name"])
    >>> srcs = {"v": (None, v, None), "c": (None, c, None)}
    >>> unresolved(srcs, exp.column("clinc"))
    "column 'clinc' is not a column of v or c (did you mean 'clinic'?)"
    >>> unresolved(srcs, exp.column("clinic"))
    "column 'clinic' is ambiguous: v and c both have it (qualify it, e.g. v.clinic)"
    >>> unresolved(srcs, exp.column("uid", "x"))
    "column x.uid: no table or alias 'x' in this FROM clause (it has v, c)"
    """
    name = col.name.lower()
    if col.table:
        entry = next((k for k in srcs if k.lower() == col.table.lower()), None)
        if entry is None:
            return (f"column {col.sql('duckdb')}: no table or alias {col.table!r} in this FROM clause"
                    + (f" (it has {', '.join(srcs)})" if srcs else ""))
        return f"column {col.name!r} is not a column of {entry}" + _did_you_mean(name, srcs[entry][1].columns)
    hits = [k for k, (_, info, _) in srcs.items() if name in [c.lower() for c in info.columns]]
    if len(hits) > 1:
        both = "both" if len(hits) == 2 else "all"
        return (f"column {col.name!r} is ambiguous: {' and '.join([', '.join(hits[:-1]), hits[-1]])} {both} have "
                f"it (qualify it, e.g. {hits[0]}.{col.name})")
    if not srcs:
        return f"column {col.name!r} is unknown: this SELECT has no FROM clause"
    columns = [c for _, info, _ in srcs.values() for c in info.columns]
    return f"column {col.name!r} is not a column of {' or '.join(srcs)}" + _did_you_mean(name, columns)


def _did_you_mean(name: str, columns: list[str]) -> str:
    close = difflib.get_close_matches(name, [c.lower() for c in columns], n=1, cutoff=0.75)
    return f" (did you mean {next(c for c in columns if c.lower() == close[0])!r}?)" if close else ""


#: DuckDB's numeric types (the name before any ``(precision, scale)``)
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL", "INT", "INT1", "INT2", "INT4", "INT8")


def column_type(catalog: Catalog, srcs: Sources, col: exp.Column) -> str | None:
    """The declared type (upper case) of a column of a registered table, or None (derived or unknown):
    schema metadata, never data."""
    ref = resolve(srcs, col)
    if ref is None or not isinstance(srcs[ref[0]][2], exp.Table):
        return None
    info = catalog.get(srcs[ref[0]][2].name)
    typ = next((t for c, t in (info.columns.items() if info else []) if c.lower() == ref[1]), None)
    return None if typ is None else typ.upper()


def is_numeric_type(typ: str) -> bool:
    return typ.split("(")[0] in NUMERIC_TYPES


def _using_names(node: exp.Expression) -> set[str]:
    """Column names merged by ``JOIN ... USING (...)`` in the SELECT whose FROM holds ``node``."""
    holder = node.parent if isinstance(node, exp.Query) and isinstance(node.parent, exp.Subquery) else node
    select = holder.find_ancestor(exp.Select)
    if select is None:
        return set()
    return {i.name.lower() for j in select.args.get("joins") or [] for i in j.args.get("using") or []}


def is_unit(srcs: Sources, ref: tuple[str, str] | None) -> bool:
    return ref is not None and ref[1] in {u.lower() for u in srcs[ref[0]][1].unit_cols}


def origin(srcs: Sources, ref: tuple[str, str]):
    info = srcs[ref[0]][1]
    return next((v for k, v in info.origins.items() if k.lower() == ref[1]), None)


def unit_expression(lineage: Lineage, srcs: Sources, alias: str,
                    added: dict[int, tuple[exp.Select, exp.Expression]]) -> exp.Expression:
    """An expression, valid in the scope owning ``srcs``, equal to the unit of protected source ``alias``.

    When the analyst did not select the unit out of a subquery, it has to be projected there under a reserved
    name: ``added`` collects those projections (id of the subquery's ScopeInfo -> (its SELECT, the select
    item)), which ``groups.rewrite_units`` adds to the tree; a subquery read twice gets one."""
    node, info, source = srcs[alias]
    name = f"{PREFIX}_unit"
    if info.unit_cols:  # an unaliased derived table (sqlglot names it ""): the column unqualified
        return exp.column(sorted(info.unit_cols)[0], table=alias or None, quoted=True)
    if id(info) in added:
        return exp.column(name, table=alias or None, quoted=True)
    if isinstance(source, exp.Table):  # row-level table: each row is its own unit
        return exp.column("rowid", table=alias, quoted=True)
    inner = source.expression
    if not isinstance(inner, exp.Select):
        raise refuse("041", "the privacy unit is lost before the dp aggregate")
    key = per_unit_of(lineage, inner)
    if key is not None:  # a per-unit aggregation (guard.per_unit): the unit it groups by
        unit = key.copy()
    else:
        inner_srcs = lineage.sources.get(id(inner)) or sources(lineage, source)
        first = next(k for k, (_, i, _) in inner_srcs.items() if i.kind == "protected")
        unit = unit_expression(lineage, inner_srcs, first, added)
    added[id(info)] = (inner, exp.alias_(unit, name, quoted=True))
    return exp.column(name, table=alias or None, quoted=True)


#: the longest VALUES list a query may name (a key list: every key is released, so its length is public)
MAX_VALUES_ROWS = 10_000
_CONSTANTS = (exp.Literal, exp.Null, exp.Boolean)


def _constant(node: exp.Expression) -> bool:
    if isinstance(node, exp.Neg | exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Cast):  # TRY_CAST included (casts were made TRY_CAST by the syntax pass)
        return _constant(node.this)
    return isinstance(node, _CONSTANTS)


def values_info(values: exp.Values) -> ScopeInfo:
    """A ``VALUES`` list in FROM (issue 15, item 2: an analyst-supplied key list) is a public relation when
    every item is a literal constant (E010 otherwise) and it has at most MAX_VALUES_ROWS rows (E010); its
    columns are the alias's column names (DuckDB's col0, col1, ... without them)."""
    rows = values.expressions
    if len(rows) > MAX_VALUES_ROWS:
        raise refuse("010", f"a VALUES list may have at most {MAX_VALUES_ROWS:,} rows")
    width = None
    for row in rows:
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        if width is not None and len(items) != width:
            raise refuse("010", "the rows of a VALUES list must have the same length")
        width = len(items)
        if not all(_constant(i) for i in items):
            raise refuse("010", "a VALUES list may hold only literal constants")
    alias = values.args.get("alias")
    names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
    names += [f"col{i}" for i in range(len(names), width or 0)]
    return ScopeInfo("public", columns=names)


def values_rows(values: exp.Values, columns: list[int] | None = None) -> list[tuple[str, ...]]:
    """The literal rows of a VALUES list as texts (only ``columns``, by position, if given)."""
    out = []
    for row in values.expressions:
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        out.append(tuple(items[i].sql("duckdb") for i in (columns if columns is not None else range(len(items)))))
    return out


_UNION_FORM = ("over protected rows only UNION ALL is allowed, of branches that each read protected rows with "
               "the same privacy unit and select that unit column in the same position: SELECT dp_sum(cost, ...) "
               "FROM (SELECT uid, cost FROM a UNION ALL SELECT uid, cost FROM b)")


def _declared(ti, column: str) -> tuple | None:
    return next((tuple(v) for k, v in ti.public_keys.items() if k.lower() == column.lower()), None)


def union_info(found: Found | Lineage, scope: Scope) -> ScopeInfo:
    """Issue 15, item 3: ``FROM (SELECT uid, cost FROM visits_2023 UNION ALL SELECT uid, cost FROM
    visits_2024)`` inside a query (never its output, E020).

    Allowed: UNION ALL (not UNION, which deduplicates across units, nor INTERSECT / EXCEPT, nor BY NAME;
    E050), no ORDER BY / LIMIT on it (E050), every branch protected (a public branch mixed in is E050: its
    "unit" values would be made up), and the tables of one privacy unit (E042, checked for the whole query).
    The union's unit columns are the positions where every branch outputs its unit column; there must be one
    (E050).  A column keeps a protected origin (for declared keys) only when every branch agrees on it.

    Rewrite and sensitivity: nothing is rewritten here; the union is an ordinary protected relation to the
    aggregation above it, whose bounding rewrite runs *after* the union, partitioned by the union's unit
    column: a unit with rows in several branches keeps at most k rows per (unit, group) in total, with
    k = the largest max_rows_per_unit among the branches' tables (and g likewise), which is the multiplier
    the cost pays.  Sensitivity therefore does not add up over branches: the bound is per unit, after the
    union."""
    expr = scope.expression
    if not (isinstance(expr, exp.Union) and not expr.args.get("distinct") and not expr.args.get("by_name")):
        raise refuse("050", _UNION_FORM)
    for arg in ("order", "limit", "offset"):
        if expr.args.get(arg) is not None:
            raise refuse("050", f"{arg.upper()} is not allowed over protected rows")
    branches = [found.info[id(s.expression)] for s in scope.set_operation_scopes]
    if any(b.kind != "protected" for b in branches):
        raise refuse("050", _UNION_FORM)
    if len({len(b.columns) for b in branches}) != 1:
        raise refuse("050", "the branches of a UNION ALL must have the same number of columns")
    first = branches[0]
    out = ScopeInfo("protected", columns=list(first.columns))
    for b in branches:
        out.tables.extend(t for t in b.tables if t not in out.tables)
    for i, name in enumerate(first.columns):
        if all(b.columns[i] in b.unit_cols for b in branches):
            out.unit_cols.add(name)
        origins = [b.origins.get(b.columns[i]) for b in branches]
        if None not in origins and (all(o == origins[0] for o in origins)
                                    or len({_declared(ti, c) for ti, c in origins} - {None}) == 1
                                    and all(_declared(ti, c) is not None for ti, c in origins)):
            out.origins[name] = origins[0]  # one table's column, or columns with the same declared keys
    if not out.unit_cols:
        raise refuse("050", _UNION_FORM)
    return out


# ----------------------------------------------------------------- per-unit aggregations (issue 15, item 4)
# What they are, the sensitivity argument and the rewrite: guard.per_unit.

#: the plain aggregates allowed per unit
PER_UNIT_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
#: the supported form, named by refusals
PER_UNIT_FORM = ("aggregate per privacy unit first, grouping by exactly the unit column, then release with a "
                 "dp_* aggregate: SELECT dp_mean(total, epsilon := ...) FROM (SELECT uid, sum(cost) AS total "
                 "FROM t GROUP BY uid)")


@dataclass(frozen=True)
class PerUnitInfo(ScopeInfo):
    """The lineage info of a per-unit aggregation (``guard.per_unit``), with the unit column it groups by."""

    key: exp.Column | None = None


def per_unit_of(found: Found | Lineage, select: exp.Expression) -> exp.Column | None:
    """The unit column ``select`` groups by if it is a per-unit aggregation, else None."""
    info = found.info.get(id(select))
    return info.key if isinstance(info, PerUnitInfo) else None


def per_unit_key(srcs: Sources, select: exp.Select) -> exp.Column | None:
    """The unit column ``select`` groups by, when it is a per-unit aggregation; None when it groups by no
    unit column at all; E021 when it groups by the unit and something else."""
    keys = group_keys(select)
    units = [k for k in keys if isinstance(k, exp.Column) and is_unit(srcs, resolve(srcs, k))]
    if not units:
        return None
    if len(keys) != 1:
        raise refuse("021", "a per-unit aggregation must GROUP BY exactly the privacy unit column (one row per "
                            "unit); grouping by the unit and other columns gives several rows per unit: take a "
                            "per-unit attribute as min(col) or max(col) instead")
    return units[0]


def check_per_unit_aggregate(node: exp.Expression) -> None:
    """An aggregate inside a per-unit aggregation: one of PER_UNIT_AGGREGATES (E021 otherwise)."""
    if not isinstance(node, PER_UNIT_AGGREGATES):
        raise refuse("021", f"aggregate {node.sql_name()} is not allowed per unit (count, sum, avg, min and max "
                            "are); release it with its dp_* form")


def _outside_aggregates(expr: exp.Expression):
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.AggFunc):
            continue
        yield node
        stack.extend(node.iter_expressions())


def per_unit_info(srcs: Sources, select: exp.Select, key: exp.Column) -> PerUnitInfo:
    """The lineage info of a per-unit aggregation: protected, one row per unit (a contribution bound of 1 row
    in 1 group per unit), the unit where it is selected, origins kept by the unit and by min/max of a
    column (for declared public keys)."""
    kref = resolve(srcs, key)
    unit = kref[1]
    bound = TableInfo("per-unit aggregation", "protected", {}, privacy_unit=unit, max_rows_per_unit=1,
                      max_groups_per_unit=1)
    out = PerUnitInfo("protected", tables=[bound], key=key)
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            raise refuse("020", "SELECT * is not allowed in a per-unit aggregation; select the unit and aggregates")
        body = item.unalias()
        for node in _outside_aggregates(body):
            if isinstance(node, exp.Column) and resolve(srcs, node) != kref:
                raise refuse("020", "outside its aggregates a per-unit aggregation may select only the privacy "
                                    "unit it groups by")
        name = item.alias_or_name if isinstance(item, exp.Alias | exp.Column) else \
            item.sql("duckdb", normalize_functions="lower")
        out.columns.append(name)
        if isinstance(body, exp.Column):
            out.unit_cols.add(name)
            org = origin(srcs, kref)
        elif isinstance(body, exp.Min | exp.Max) and isinstance(body.this, exp.Column):
            ref = resolve(srcs, body.this)
            org = origin(srcs, ref) if ref is not None else None
        else:
            org = None
        if org is not None:
            out.origins[name] = org
    having = select.args.get("having")
    for node in _outside_aggregates(having.this) if having is not None else ():
        if isinstance(node, exp.Column) and resolve(srcs, node) != kref and having_alias(srcs, select, node) is None:
            raise refuse("022", "HAVING of a per-unit aggregation may use only aggregates of the unit's rows and "
                                "the unit")
    return out


def having_alias(srcs: Sources, select: exp.Select, col: exp.Column) -> exp.Expression | None:
    """The select item an unqualified column of HAVING names by its alias (``HAVING total > 100``), or None
    (columns of the relations come first, as in DuckDB)."""
    if col.table or resolve(srcs, col) is not None:
        return None
    return next((p.this for p in select.expressions if isinstance(p, exp.Alias) and p.alias.lower() ==
                 col.name.lower()), None)


def _star_sources(srcs: Sources, proj: exp.Expression) -> list[str] | None:
    if isinstance(proj, exp.Star):
        return list(srcs)
    if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star):
        return [k for k in srcs if k.lower() == proj.table.lower()]
    return None


def _project(srcs: Sources, select: exp.Select) -> ScopeInfo:
    """Output columns of a protected row-level SELECT, with unit and origin passthroughs."""
    out = ScopeInfo("protected")
    for _, info, _ in srcs.values():
        out.tables.extend(t for t in info.tables if t not in out.tables)
    for proj in select.expressions:
        star = _star_sources(srcs, proj)
        if star is not None:
            if not star:
                raise refuse("012", "star of an unknown relation")
            for alias in star:
                info = srcs[alias][1]
                out.columns.extend(info.columns)
                out.unit_cols.update(info.unit_cols)
                out.origins.update(info.origins)
            continue
        name = proj.alias_or_name
        expr = proj.unalias()
        out.columns.append(name)
        if isinstance(expr, exp.Column):
            ref = resolve(srcs, expr)
            if ref is not None:
                if is_unit(srcs, ref):
                    out.unit_cols.add(name)
                org = origin(srcs, ref)
                if org is not None:
                    out.origins[name] = org
    return out


def _post_processing(node: exp.Expression, select: exp.Select) -> bool:
    """Whether ``node`` sits in the select list, HAVING, ORDER BY or GROUP BY of ``select``, outside dp_* calls."""
    parent = node.parent
    while parent is not None and parent is not select:
        if dp_name(parent) or isinstance(parent, exp.Where | exp.Join | exp.From):
            return False
        parent = parent.parent
    return parent is select


#: what a subquery over protected rows may be instead (the refusal names it)
_FILTER_FORM = ("a subquery is allowed over protected data only as an uncorrelated filter on public tables "
                "in WHERE: col [NOT] IN (SELECT c FROM public_table ...) or [NOT] EXISTS (SELECT ... FROM "
                "public_table ...); otherwise join the public table")
_CONNECTIVES = (exp.And, exp.Or, exp.Not, exp.Paren)


def check_filter_subquery(found: Found | Lineage, select: exp.Select, sub: Scope) -> None:
    """A subquery inside an expression of ``select`` (which reads protected rows) is a per-row predicate.

    Issue 15: ``WHERE zip IN (SELECT zip FROM zip_regions WHERE region = 'NE')`` (also ``NOT IN``,
    ``EXISTS``, ``NOT EXISTS``) is allowed when

    * the subquery and everything nested in it read only public tables (no protected table, no dp_*
      output: refused when its scope is classified, E051);
    * it is uncorrelated: every column in it resolves to one of its own relations (a reference to the
      outer, protected row is E051 -- privacy-wise a predicate on the row itself would be per-row too,
      but its work could then depend on one person's values, so it is refused with the join as the
      supported alternative);
    * it sits in the WHERE of ``select``, as the set of ``[NOT] IN`` or the body of ``[NOT] EXISTS``,
      reached from WHERE only through AND / OR / NOT / parentheses (so the totality rewrite can put the
      rest of the condition under TRY; the left operand of IN goes under TRY, the comparison's types are
      checked by DuckDB's binder, statically).

    Sensitivity: the subquery's result is a function of public data only, so the condition is a fixed
    per-row predicate ``p(row)``: it only removes rows, each unit keeps a subset of its rows, and the
    contribution bound (max_rows_per_unit after the bounding rewrite, which copies the WHERE into its inner
    query) holds unchanged; the cost is what the query costs without the filter.  A semi-join never
    repeats a row, so there is no fan-out (guard.fanout); the subquery is evaluated once, from public data,
    so how much work it does does not depend on the protected rows.
    """
    node = sub.expression
    holder = node.parent if isinstance(node.parent, exp.Subquery) else node
    parent = holder.parent
    if isinstance(parent, exp.In) and parent.args.get("query") is holder:
        pred = parent
    elif isinstance(parent, exp.Exists) and parent.this is holder:
        pred = parent
    else:
        raise refuse("051", _FILTER_FORM)
    up = pred.parent
    while isinstance(up, _CONNECTIVES):
        up = up.parent
    if not (isinstance(up, exp.Where) and up.parent is select):
        raise refuse("051", _FILTER_FORM)
    for inner in sub.traverse():
        info = found.info.get(id(inner.expression))
        if info is None or info.kind != "public":
            raise refuse("051", "subqueries inside expressions may not read protected data or dp outputs")
        if not isinstance(inner.expression, exp.Select):
            continue
        srcs = found.sources.get(id(inner.expression))
        if srcs is None:
            raise refuse("051", _FILTER_FORM)
        for col in own_nodes(inner.expression):
            if isinstance(col, exp.Column) and not isinstance(col.this, exp.Star) and resolve(srcs, col) is None:
                raise refuse("051", f"correlated subqueries (column {col.name!r} is not a column of the "
                                    f"subquery's own tables) are not allowed over protected data; " + _FILTER_FORM)


def _check_private(found: Found | Lineage, scope: Scope, srcs: Sources, select: exp.Select, has_dp: bool,
                   per_unit: bool = False) -> None:
    """The rules of a SELECT reading protected rows; ``per_unit``: it is a per-unit aggregation
    (``guard.per_unit``), whose plain aggregates, GROUP BY and HAVING are allowed."""
    having = select.args.get("having")
    aliases = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}
    for node in own_nodes(select):
        if isinstance(node, exp.Window):
            raise refuse("050", "window functions are not allowed over protected data")
        if isinstance(node, exp.Distinct):
            if per_unit and isinstance(node.parent, PER_UNIT_AGGREGATES):
                continue  # count(DISTINCT x) of one unit's rows
            hint = _PICK_LIST if node is select.args.get("distinct") else ""
            raise refuse("050", "DISTINCT is not allowed over protected data" + hint)
        if isinstance(node, AGGREGATES) and per_unit:
            check_per_unit_aggregate(node)
        elif isinstance(node, AGGREGATES):
            hint = "" if scope.is_root else f"; or {PER_UNIT_FORM}"
            if having is not None and node.find_ancestor(exp.Having) is having:
                raise refuse("022", "HAVING may use only dp_* outputs and public group keys" + hint)
            raise refuse("021", f"aggregate {node.sql_name()} is not differentially private; "
                                f"use {dp_alternative(node)}{hint}")
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star) and resolve(srcs, node) is None:
            if not ((has_dp or per_unit) and not node.table and node.name.lower() in aliases
                    and _post_processing(node, select)):
                raise refuse("012", unresolved(srcs, node))
    if select.args.get("qualify") is not None:
        raise refuse("050", "QUALIFY is not allowed over protected data")
    if select.args.get("distinct") is not None:
        raise refuse("050", "DISTINCT is not allowed over protected data" + _PICK_LIST)
    if select.args.get("sample") is not None:
        raise refuse("050", "SAMPLE is not allowed over protected data")
    for _, info, source in srcs.values():
        if isinstance(source, exp.Table) and info.kind == "protected" and source.args.get("sample"):
            raise refuse("050", "TABLESAMPLE is not allowed over protected data")
    for sub in scope.subquery_scopes:
        param = sub.expression.find_ancestor(exp.PropertyEQ, exp.Kwarg)
        if param is not None and dp_name(param.parent):
            raise refuse("060", f"{dp_name(param.parent)}: parameters must be literals, not subqueries")
    for sub in scope.subquery_scopes:
        check_filter_subquery(found, select, sub)
    if not has_dp:
        for arg in ("group", "having"):
            if select.args.get(arg) is not None and not per_unit:
                hint = _PICK_LIST if scope.is_root else f"; or {PER_UNIT_FORM}"
                raise refuse("050", "grouping protected rows is only allowed with dp_* aggregates" + hint)
        for arg in ("order", "limit", "offset"):
            # at the outermost level the rows themselves are the problem (E020 below): BI tools append a
            # LIMIT to every query, and "LIMIT is not allowed" pointed their users at the wrong cause
            if select.args.get(arg) is not None and not scope.is_root:
                raise refuse("050", f"{arg.upper()} is not allowed over protected rows")


def analyse_lineage(facts: Facts) -> Lineage:
    """Classify the scopes (children first) and find each dp_* aggregation."""
    found = Found(facts.catalog)
    for scope in facts.scopes:
        expr = scope.expression
        if scope.scope_type == ScopeType.UDTF:
            if not isinstance(expr, exp.Values):
                raise refuse("010", "table functions are not allowed")
            found.info[id(expr)] = values_info(expr)
            continue
        if not isinstance(expr, exp.Select):
            kinds = {found.info[id(s.expression)].kind for s in scope.set_operation_scopes}
            if "protected" in kinds:
                if scope.is_root:
                    raise refuse("020", "protected values may reach the output only through dp_* aggregates")
                found.info[id(expr)] = union_info(found, scope)
                continue
            left = found.info[id(scope.set_operation_scopes[0].expression)]
            found.info[id(expr)] = ScopeInfo("noisy" if "noisy" in kinds else "public", columns=list(left.columns))
            continue
        srcs = sources(found, scope)
        protected = [k for k, (_, info, _) in srcs.items() if info.kind == "protected"]
        has_dp = any(dp_name(n) for n in own_nodes(expr))
        param = expr.find_ancestor(exp.PropertyEQ, exp.Kwarg)
        if scope.scope_type == ScopeType.SUBQUERY and param is not None and dp_name(param.parent):
            raise refuse("060", f"{dp_name(param.parent)}: parameters must be literals, not subqueries")
        if scope.scope_type == ScopeType.SUBQUERY and (protected or has_dp):
            raise refuse("051", "subqueries inside expressions may not read protected data")
        if scope.scope_type == ScopeType.SUBQUERY and any(i.kind != "public" for _, i, _ in srcs.values()):
            raise refuse("051", "subqueries inside expressions may not read dp outputs")
        found.sources[id(expr)] = srcs
        key = None
        if protected and not has_dp:
            key = per_unit_key(srcs, expr)
        if protected:
            _check_private(found, scope, srcs, expr, has_dp, per_unit=key is not None)
            found.private.append(expr)
        if has_dp:
            found.aggregations.append(Site(expr, protected=bool(protected)))
            names = [p.alias_or_name for p in expr.expressions]
            found.info[id(expr)] = ScopeInfo("noisy", columns=names)
            continue
        if protected:
            if scope.is_root:
                raise refuse("020", "protected values may reach the output only through dp_* aggregates")
            if key is not None:
                found.info[id(expr)] = per_unit_info(srcs, expr, key)
                continue
            found.info[id(expr)] = _project(srcs, expr)
            continue
        kind = "noisy" if any(i.kind == "noisy" for _, i, _ in srcs.values()) else "public"
        cols: list[str] = []
        for proj in expr.expressions:
            star = _star_sources(srcs, proj)
            if star is not None:
                for alias in star:
                    cols.extend(srcs[alias][1].columns)
            else:
                cols.append(proj.alias_or_name)
        found.info[id(expr)] = ScopeInfo(kind, columns=cols)
    return found.frozen()
