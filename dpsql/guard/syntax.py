"""Pass: a closed allow-list of node types and functions; casts become TRY_CAST.

Anything sqlglot produces that is not listed here fails closed: an unknown function is E011, any other
unknown construct E012, grouping constructs E031, a recursive CTE E050.

>>> import sqlglot
>>> tree = sqlglot.parse_one("SELECT x::INT FROM t", read="duckdb")
>>> check_syntax(tree); rewrite_casts(tree).sql("duckdb")
'SELECT TRY_CAST(x AS INT) FROM t'
"""

from __future__ import annotations

from sqlglot import exp

from .context import DP_FUNCTIONS, PREFIX, refuse

STRUCTURE = (
    exp.Select, exp.Union, exp.Intersect, exp.Except, exp.From, exp.Join, exp.Where, exp.Group,
    exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.With, exp.CTE, exp.Subquery,
    exp.Table, exp.TableAlias, exp.Identifier, exp.Column, exp.Star, exp.Alias, exp.Literal, exp.Null,
    exp.Boolean, exp.Paren, exp.Tuple, exp.Values, exp.Window, exp.WindowSpec, exp.Filter,
    exp.PropertyEQ, exp.Kwarg, exp.Distinct, exp.Case, exp.If, exp.TryCast, exp.Cast, exp.DataType,
    exp.DataTypeParam, exp.Interval, exp.Var, exp.Try, exp.Qualify, exp.TableSample, exp.Exists,
)
OPERATORS = (
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
    exp.LTE, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike,
    exp.NullSafeEQ, exp.NullSafeNEQ, exp.DPipe,
)
#: total (under TRY), deterministic, bounded-size scalar functions
SCALARS = (
    exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least, exp.Abs, exp.Round, exp.Floor, exp.Ceil,
    exp.Sqrt, exp.Cbrt, exp.Ln, exp.Log, exp.Exp, exp.Pow, exp.Sign, exp.Trunc, exp.Lower, exp.Upper,
    exp.Length, exp.Substring, exp.Trim, exp.Concat, exp.Year, exp.Month, exp.Day, exp.Hour,
    exp.Quarter, exp.Week, exp.DayOfWeek, exp.Extract, exp.TimestampTrunc, exp.DateTrunc,
    exp.DateDiff, exp.StartsWith, exp.Contains, exp.Left, exp.Right, exp.IsNan, exp.IsInf,
)
#: plain aggregates: only ever allowed over public data or noisy outputs (E021 elsewhere)
AGGREGATES = (
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevSamp, exp.StddevPop,
    exp.Variance, exp.VariancePop, exp.Median,
)
#: window functions: only over public data or noisy outputs (E050 elsewhere)
WINDOW_FUNCTIONS = (exp.RowNumber, exp.Rank, exp.DenseRank)

ALLOWED = STRUCTURE + OPERATORS + SCALARS + AGGREGATES + WINDOW_FUNCTIONS
GROUPING = (exp.GroupingSets, exp.Rollup, exp.Cube, exp.Pivot)


def _name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name)
    return node.sql_name() if isinstance(node, exp.Func) else node.key.upper()


def check_syntax(tree: exp.Expression) -> None:
    """Refuse every node outside the allow-list."""
    for node in tree.walk():
        if isinstance(node, GROUPING):
            raise refuse("031", f"{node.key.upper()} is not allowed")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise refuse("050", "recursive CTEs are not allowed")
        if isinstance(node, exp.Dot):
            raise refuse("012", "qualified function names, method calls and field access are not allowed")
        if isinstance(node, exp.Identifier) and str(node.this).lower().startswith(PREFIX):
            raise refuse("012", f"identifiers starting with {PREFIX} are reserved")
        if isinstance(node, exp.Column) and node.name.lower() in ("rowid",):
            raise refuse("012", "the rowid pseudo-column is not allowed")
        if isinstance(node, exp.Columns | exp.PositionalColumn):
            raise refuse("012", "COLUMNS() and positional columns are not allowed")
        if isinstance(node, exp.Anonymous):
            if str(node.name).lower().startswith(PREFIX):
                raise refuse("012", f"identifiers starting with {PREFIX} are reserved")
            if str(node.name).lower() not in DP_FUNCTIONS:
                raise refuse("011", f"function {_name(node)!r} is not allowed")
            continue
        if isinstance(node, exp.Filter):
            agg = node.this
            if not (isinstance(agg, exp.Anonymous) and str(agg.name).lower() in DP_FUNCTIONS):
                raise refuse("012", "FILTER is only allowed on dp_* aggregates")
        if isinstance(node, ALLOWED):
            continue
        if isinstance(node, exp.Func):
            raise refuse("011", f"function {_name(node)!r} is not allowed")
        raise refuse("012", f"syntax {node.key.upper()} is not allowed")


def rewrite_casts(tree: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` where every CAST is a TRY_CAST."""
    tree = tree.copy()
    for cast in list(tree.find_all(exp.Cast)):
        if not isinstance(cast, exp.TryCast):
            cast.replace(exp.TryCast(this=cast.this, to=cast.args["to"]))
    return tree


def group_keys(select: exp.Select) -> list[exp.Expression]:
    """The GROUP BY keys of ``select`` (positions and select aliases resolved; ALL: the items without an
    aggregate)."""
    group = select.args.get("group")
    if group is None:
        return []
    items = select.expressions
    if group.args.get("all"):
        return [p.unalias() for p in items if not p.find(exp.AggFunc)]
    aliases = {p.alias.lower(): p.this for p in items if isinstance(p, exp.Alias)}
    keys = []
    for k in group.expressions:
        if isinstance(k, exp.Literal) and not k.is_string and k.this.isdigit() and 1 <= int(k.this) <= len(items):
            k = items[int(k.this) - 1].unalias()
        elif isinstance(k, exp.Column) and not k.table and k.name.lower() in aliases:
            k = aliases[k.name.lower()]
        keys.append(k)
    return keys
