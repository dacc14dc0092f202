"""The guard's checked DuckDB SQL as Spark SQL, or a refusal (DPSQL-E013): an allow-list over sqlglot nodes.

Steps, each on the sqlglot tree of the guard's ``Plan.sql`` (DuckDB dialect):

1. **Macros.** Every ``dp_*`` call and the helpers it uses are expanded from ``sql/native.sql`` and
   ``sql/macros.sql`` (the files :func:`dpsql.install` runs; one source of truth).  A substituted argument is
   parenthesised, so ``dp_sum(a - b)`` never becomes ``... a - b / g``.  Of an overloaded macro the first
   (typed, numeric) overload is taken; its ``x DOUBLE`` parameter becomes a cast to DOUBLE.
2. **Literal-only helpers.** A ``CASE`` condition without columns (the native route's choice), the
   fixed-point grid ``_dpsql_fg(s)`` (by the core's own code) and literal-only arithmetic (the clamps' bounds)
   are evaluated here by DuckDB, so Spark gets DOUBLE literals, never the helper.
3. **The allow-list.** Every node must be of a type listed in :data:`ALLOWED` (functions: a closed set);
   anything else is refused with DPSQL-E013 before anything is charged: never a silent drop.  On the way:

   * totality: ``TRY(e)`` disappears because every operation under it is total on Spark: ``+ - *`` become
     ``try_add``/``try_subtract``/``try_multiply``, ``%`` ``try_mod``, ``/`` DuckDB's double division (IEEE at a
     zero divisor: +-inf, NaN), ``//`` DuckDB's integer division (truncating for integers, NULL at zero; the
     double division for floating values), casts ``try_cast``, ``sum``/``avg`` ``try_sum``/``try_avg``, and
     ``-x``/``abs(x)`` never raise at the smallest integer; the same mapping applies outside ``TRY`` (under
     Spark's ANSI mode nothing may raise from a data value);
   * a cast to an integer type rounds floating values half to even first (``rint``) and decimals half away
     from zero (``round``), as DuckDB does; Spark would truncate;
   * the UDF arguments are cast to the UDF's declared types, so a bare NULL reaches the Python UDF typed;
   * ``_dpsql_rand()`` (the guard's per-row bounding order) becomes ``xxhash64`` of a secret 128-bit salt,
     fresh for each translation (OS CSPRNG), and the row's other projected values: a hash order no one can
     predict, not Spark's ``rand()`` (which stays refused);
   * table names are mapped to the Spark views the session registered.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import sqlglot
from sqlglot import exp

from ..duck import CI_PARAM_NAMES, COUNT_PARAM_NAMES, FIN_PARAM_NAMES, PARAM_NAMES
from ..errors import PrivacyError
from ..sqltext import script
from ..surface import PARAMETERS

__all__ = ["translate", "Translation", "ALLOWED", "UDF_SIGNATURES", "CODE"]

#: the refusal code of this translator: the guard accepted the query but it cannot be expressed faithfully in
#: Spark SQL (nothing is charged, nothing runs)
CODE = "DPSQL-E013"

_SPARK_TYPE = {"DOUBLE": "DOUBLE", "VARCHAR": "STRING"}
_CI_TYPE = "STRUCT<value: DOUBLE, lo: DOUBLE, hi: DOUBLE>"

#: the Python UDFs of dpsql.duck as the macros call them: leading (name, Spark type) arguments, then the
#: surface parameters (DOUBLE or STRING), and the return type
UDF_SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "_dpsql_agg": (("STRING", "ARRAY<DOUBLE>"), PARAM_NAMES, "DOUBLE"),
    "_dpsql_agg_ci": (("STRING", "ARRAY<DOUBLE>", "BIGINT"), CI_PARAM_NAMES, _CI_TYPE),
    "_dpsql_fin": (("STRING", "BIGINT", "BIGINT", "BIGINT"), FIN_PARAM_NAMES, "DOUBLE"),
    "_dpsql_count": (("BIGINT",), COUNT_PARAM_NAMES, "DOUBLE"),
}

#: node types that translate as they are (sqlglot generates their Spark form); anything else is refused
ALLOWED: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit,
    exp.Offset, exp.Subquery, exp.Table, exp.TableAlias, exp.With, exp.CTE, exp.Union, exp.Values, exp.Tuple,
    exp.Column, exp.Identifier, exp.Star, exp.Alias, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.And,
    exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.In, exp.Between, exp.Neg,
    exp.Case, exp.If, exp.DataType, exp.DataTypeParam, exp.Coalesce, exp.Nullif, exp.Count, exp.Sum, exp.Min,
    exp.Max, exp.Avg, exp.Window, exp.RowNumber, exp.DenseRank, exp.Greatest, exp.Least, exp.Abs, exp.Distinct, exp.Dot,
    exp.Exists, exp.ArrayAgg, exp.Lower, exp.Upper, exp.Length, exp.Like, exp.ILike, exp.Var, exp.RegexpLike, exp.Floor,
    exp.Ceil, exp.Sqrt, exp.Ln, exp.Exp, exp.Pow, exp.Round, exp.Sign, exp.Interval,
    exp.TryCast, exp.Cast, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Try, exp.DPipe,
    exp.Concat, exp.Trim, exp.Substring, exp.Stddev, exp.Variance, exp.Quantile, exp.StrPosition,
    exp.Anonymous,
)
#: functions sqlglot leaves anonymous that Spark has with DuckDB's meaning, plus the UDFs and the rewrites' own
_FUNCTIONS = {"rint", "try_add", "try_subtract", "try_multiply", "try_divide", "try_mod", "try_sum", "try_avg",
              "typeof", "xxhash64", *UDF_SIGNATURES}
_INT_TYPES = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
              exp.DataType.Type.BIGINT}


def _refuse(what: str) -> PrivacyError:
    return PrivacyError(CODE, f"{what} cannot be translated to Spark SQL faithfully (nothing was charged)")


# ---------------------------------------------------------------------------------------------- macros


@dataclass(frozen=True)
class _Macro:
    params: tuple[str, ...]
    typed: frozenset[str]  # parameters declared DOUBLE
    defaults: dict[str, exp.Expression]
    body: exp.Expression


_HEAD = re.compile(r"^CREATE OR REPLACE TEMP MACRO (\w+)\((.*?)\) AS\s+(.*)$", re.S)
_OVERLOAD = re.compile(r",\s*\(\w+(?:, [^()]*)?\) AS\s", re.S)
_macros_cache: dict[str, _Macro] | None = None
_lock = threading.Lock()


def _macros() -> dict[str, _Macro]:
    """The macros of sql/native.sql and sql/macros.sql by lower-case name (first overload)."""
    global _macros_cache
    with _lock:
        if _macros_cache is None:
            out = {}
            for name in ("native.sql", "macros.sql"):
                for stmt in script(name):
                    m = _HEAD.match(stmt.strip().rstrip(";"))
                    if m is None:
                        continue
                    fn, params, body = m.groups()
                    body = _OVERLOAD.split(body, maxsplit=1)[0]
                    names, typed, defaults = [], set(), {}
                    for p in (x.strip() for x in params.split(",") if x.strip()):
                        head, _, default = p.partition(":=")
                        words = head.split()
                        names.append(words[0].lower())
                        if len(words) > 1 and words[1].upper() == "DOUBLE":
                            typed.add(words[0].lower())
                        if default.strip():
                            defaults[words[0].lower()] = sqlglot.parse_one(default.strip(), read="duckdb")
                    out[fn.lower()] = _Macro(tuple(names), frozenset(typed), defaults,
                                             sqlglot.parse_one(body, read="duckdb"))
            _macros_cache = out
        return _macros_cache


def _call_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return None


def _expand_call(node: exp.Anonymous, macro: _Macro) -> exp.Expression:
    args = list(node.expressions)
    bound: dict[str, exp.Expression] = {}
    positional = [a for a in args if not isinstance(a, exp.PropertyEQ)]
    if len(positional) > len(macro.params):
        raise _refuse(f"{node.name}: too many arguments")
    for name, arg in zip(macro.params, positional, strict=False):
        bound[name] = arg
    for a in args:
        if isinstance(a, exp.PropertyEQ):
            key = a.this.name.lower()
            if key not in macro.params or key in bound:
                raise _refuse(f"{node.name}: argument {key}")
            bound[key] = a.expression
    for name in macro.params:
        if name not in bound:
            if name not in macro.defaults:
                raise _refuse(f"{node.name}: missing argument {name}")
            bound[name] = macro.defaults[name]
    for name in macro.typed:
        bound[name] = exp.Cast(this=exp.Paren(this=bound[name].copy()), to=exp.DataType.build("DOUBLE"))

    def substitute(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and n.name.lower() in bound:
            return exp.Paren(this=bound[n.name.lower()].copy())
        return n

    return exp.Paren(this=macro.body.copy().transform(substitute, copy=False))  # the body is one operand too


def _expand(tree: exp.Expression) -> exp.Expression:
    """Expand every macro call, innermost arguments first, until none is left."""
    macros = _macros()
    for _ in range(50):
        calls = [n for n in tree.find_all(exp.Anonymous) if _call_name(n) in macros]
        if not calls:
            return tree
        for call in calls:
            if call.root() is not tree and call is not tree:
                continue  # replaced with an ancestor in this round
            new = _expand_call(call, macros[_call_name(call)])
            if call is tree:
                tree = new
            else:
                call.replace(new)
    raise _refuse("a macro nesting this deep")


# ---------------------------------------------------------------------------------------------- literals

_duck = None


def _evaluate(node: exp.Expression) -> object:
    """The value of a column-free expression, computed by DuckDB (the dialect it is written in)."""
    global _duck
    import duckdb

    with _lock:
        if _duck is None:
            _duck = duckdb.connect()
        try:
            return _duck.execute(f"SELECT {node.sql(dialect='duckdb')}").fetchone()[0]
        except duckdb.Error:
            raise _refuse("a constant expression") from None


def _column_free(node: exp.Expression) -> bool:
    """No column, aggregate, subquery or dpsql function: DuckDB can evaluate it alone."""
    return not any(isinstance(n, exp.Column | exp.AggFunc | exp.Star | exp.Subquery)
                   or (_call_name(n) or "").startswith(("_dpsql", "dp_")) for n in node.walk())


_ARITHMETIC = (exp.Neg, exp.Abs, exp.Greatest, exp.Least, exp.Add, exp.Sub, exp.Mul, exp.Div)
_CONSTANT = (*_ARITHMETIC, exp.Literal, exp.Cast, exp.Paren, exp.DataType, exp.DataTypeParam)


def _fold(tree: exp.Expression) -> exp.Expression:
    """Evaluate the literal-only helpers: ``_dpsql_fg(s)`` and CASE conditions without columns."""
    from ..core.primitives import fixed_point_grid

    for call in list(tree.find_all(exp.Anonymous)):
        if _call_name(call) == "_dpsql_fg":
            (arg,) = call.expressions
            if not _column_free(arg):
                raise _refuse("a fixed-point grid of a column")
            v = _evaluate(arg)
            if v is None:
                call.replace(exp.Cast(this=exp.Null(), to=exp.DataType.build("DOUBLE")))
                continue
            with np.errstate(all="ignore"):
                g = float(fixed_point_grid(np.nan_to_num(np.array([float(v)]), nan=1.0))[1][0])
            call.replace(exp.Cast(this=exp.Literal.number(repr(g)), to=exp.DataType.build("DOUBLE")))
    for node in list(tree.walk()):  # maximal literal-only arithmetic (the macros' bounds) -> one DOUBLE literal
        if node is tree or node.root() is not tree or not isinstance(node, _ARITHMETIC):
            continue
        if not all(isinstance(m, _CONSTANT) for m in node.walk()):
            continue  # (breadth first: an enclosing constant was folded before, and this node left the tree)
        v = _evaluate(node)
        if isinstance(v, float) and np.isfinite(v):
            node.replace(exp.Cast(this=exp.Literal.number(repr(v)), to=exp.DataType.build("DOUBLE")))
    for case in list(tree.find_all(exp.Case)):
        if case.this is not None:
            continue
        ifs = list(case.args.get("ifs") or [])
        if not ifs or not all(_column_free(i.this) for i in ifs):
            continue
        chosen = case.args.get("default") or exp.Null()
        for i in ifs:
            if _evaluate(i.this) is True:
                chosen = i.args["true"]
                break
        if case is tree:
            tree = chosen
        else:
            case.replace(chosen)
    return tree


# ---------------------------------------------------------------------------------------------- Spark forms


def _typeof_in(node: exp.Expression, names: str) -> exp.Expression:
    return sqlglot.parse_one(f"typeof(x) RLIKE '{names}'", read="spark").transform(
        lambda n: node.copy() if isinstance(n, exp.Column) and n.name == "x" else n)


def _try_cast(value: exp.Expression, to: exp.DataType) -> exp.Expression:
    return exp.TryCast(this=value, to=to.copy(), safe=True)  # safe: sqlglot writes TRY_CAST, not CAST


_FLOATS = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}


def _kind(n: exp.Expression) -> str | None:
    """'float', 'int', 'decimal' or 'string' where the Spark form's type is plain from the text, else None."""
    while isinstance(n, exp.Paren | exp.Neg):
        n = n.this
    if isinstance(n, exp.Cast):  # TryCast too
        t = n.args["to"].this
        return ("float" if t in _FLOATS else "int" if t in _INT_TYPES else
                "decimal" if t == exp.DataType.Type.DECIMAL else "string" if t in exp.DataType.TEXT_TYPES else None)
    if isinstance(n, exp.Literal):
        return "string" if n.is_string else "int" if n.is_int else "decimal"
    if isinstance(n, exp.Case):
        kinds = {_kind(i.args["true"]) for i in n.args.get("ifs") or []}
        if n.args.get("default") is not None:
            kinds.add(_kind(n.args["default"]))
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(n, exp.Count):
        return "int"
    if isinstance(n, exp.Mul) and "float" in (_kind(n.this), _kind(n.expression)):
        return "float"  # the IEEE branch of a division
    name = _call_name(n)
    if isinstance(n, exp.Sum) or name == "try_sum":
        return _kind(n.this if isinstance(n, exp.Sum) else n.expressions[0])
    if name == "rint":
        return "float"
    if isinstance(n, exp.Greatest | exp.Least | exp.Nullif | exp.Coalesce) or name in (
            "try_add", "try_subtract", "try_multiply", "try_divide"):
        args = [n.this, *n.expressions] if not isinstance(n, exp.Anonymous) else list(n.expressions)
        if isinstance(n, exp.Nullif):
            args = [n.this]
        kinds = {_kind(a) for a in args if a is not None}
        if "float" in kinds:
            return "float"
        return kinds.pop() if len(kinds) == 1 and name != "try_divide" else None
    return None


def _typeof_in(node: exp.Expression, names: str) -> exp.Expression:
    return exp.RegexpLike(this=exp.Anonymous(this="typeof", expressions=[node.copy()]),
                          expression=exp.Literal.string(names))


def _int_cast(value: exp.Expression, to: exp.DataType) -> exp.Expression:
    """DuckDB's cast to an integer type without raising: floating values rint (half to even), decimals and
    strings round half away from zero, integers as they are.  The type is read from the text where it can
    be (the macros' sums), else from ``typeof`` at run time (the value then appears three times)."""
    rint = _try_cast(exp.Anonymous(this="rint", expressions=[value.copy()]), to)
    rnd = _try_cast(exp.Round(this=_try_cast(value.copy(), exp.DataType.build("DECIMAL(38, 9)"))), to)
    plain = _try_cast(value.copy(), to)
    kind = _kind(value)
    if kind is not None:
        return {"float": rint, "int": plain}.get(kind, rnd)
    return exp.Case(ifs=[exp.If(this=_typeof_in(value, "^(double|float)$"), true=rint),
                         exp.If(this=_typeof_in(value, "^(decimal|string)"), true=rnd)], default=plain)


def _divide(a: exp.Expression, b: exp.Expression) -> exp.Expression:
    """DuckDB's ``a / b``: a DOUBLE, and IEEE at a zero divisor (+-inf, NaN for 0 / 0), where Spark's
    ``try_divide`` gives NULL.  A nonzero literal divisor (the macros' ``/ 2.0``) needs no guard."""
    double = exp.DataType.build("DOUBLE")
    quotient = exp.Anonymous(this="try_divide", expressions=[_try_cast(a.copy(), double), _try_cast(b.copy(), double)])
    inner = b
    while isinstance(inner, exp.Paren | exp.Cast):
        inner = inner.this
    if isinstance(inner, exp.Literal) and not inner.is_string and float(inner.this) != 0:
        return quotient
    infinity = _try_cast(exp.Literal.string("Infinity"), double)
    ieee = exp.Mul(this=_try_cast(a.copy(), double), expression=infinity)  # +-inf, NaN for 0 (never raises)
    zero = exp.EQ(this=_try_cast(b.copy(), double), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=zero, true=ieee)], default=quotient)


def _udf_args(name: str, args: list[exp.Expression]) -> list[exp.Expression]:
    leading, params, _ = UDF_SIGNATURES[name]
    types = list(leading) + [_SPARK_TYPE[PARAMETERS[p].sql_type] for p in params]
    if len(args) != len(types):
        raise _refuse(f"{name} with {len(args)} arguments")
    out = []
    for arg, t in zip(args, types, strict=True):
        inner = arg
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Null) or isinstance(inner, exp.Literal) or (
                isinstance(inner, exp.Neg) and isinstance(inner.this, exp.Literal)):
            out.append(exp.Cast(this=inner.copy(), to=exp.DataType.build(t, dialect="spark")))
        else:
            out.append(arg)
    return out


def _bottom_up(tree: exp.Expression, fn) -> exp.Expression:  # noqa: ANN001
    """Apply ``fn`` to every node, children before their parent, replacing a node by what ``fn`` returns."""
    for node in reversed(list(tree.dfs())):
        new = fn(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


@dataclass(frozen=True)
class Translation:
    """The Spark SQL of one checked query, and the salt its bounding order uses (never shown to analysts)."""

    sql: str
    salted: bool


def _rand(select: exp.Select, call: exp.Expression, salt: tuple[int, int]) -> exp.Expression:
    others = [e.unalias().copy() for e in select.expressions
              if not isinstance(e, exp.Star) and not any(n is call for n in e.walk())]
    return exp.Anonymous(this="xxhash64", expressions=[
        exp.Literal.number(salt[0]), exp.Literal.number(salt[1]), *others])


def translate(sql: str, tables: Mapping[str, str] | None = None) -> Translation:
    """Spark SQL for the guard's checked DuckDB SQL ``sql``; ``tables`` maps the catalog's table names (lower
    case) to the Spark names to read.  Raises PrivacyError(DPSQL-E013) for anything off the allow-list."""
    tables = {k.lower(): v for k, v in (tables or {}).items()}
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError:
        raise _refuse("the query") from None
    tree = _fold(_expand(tree))
    salt = (secrets.randbits(63), secrets.randbits(63))
    salted = False
    for node in list(tree.walk()):
        if not isinstance(node, ALLOWED):
            raise _refuse(f"the construct {type(node).__name__}")
        name = _call_name(node)
        if name is not None and name not in _FUNCTIONS and name != "_dpsql_rand":
            raise _refuse(f"the function {node.name}")

    def spark_form(n: exp.Expression) -> exp.Expression:
        name = _call_name(n)
        if name in UDF_SIGNATURES:
            n.set("expressions", _udf_args(name, list(n.expressions)))
            return n
        if isinstance(n, exp.Try):
            return exp.Paren(this=n.this)
        if isinstance(n, exp.Div):
            return _divide(n.this, n.expression)
        if isinstance(n, exp.Sum | exp.Avg) and not isinstance(n.parent, exp.Window):
            return exp.Anonymous(this="try_sum" if isinstance(n, exp.Sum) else "try_avg", expressions=[n.this])
        if isinstance(n, exp.Neg) and not isinstance(n.this, exp.Literal):  # -INT_MIN raises under ANSI
            return exp.Anonymous(this="try_multiply", expressions=[n.this, exp.Literal.number(-1)])
        if isinstance(n, exp.Abs):  # abs(INT_MIN) raises under ANSI; DuckDB's TRY gives NULL
            x = n.this
            flipped = exp.Anonymous(this="try_multiply", expressions=[x.copy(), exp.Literal.number(-1)])
            return exp.Case(ifs=[exp.If(this=exp.LT(this=x.copy(), expression=exp.Literal.number(0)), true=flipped)],
                            default=x.copy())
        if isinstance(n, exp.Add | exp.Sub | exp.Mul | exp.Mod):
            fn = {exp.Add: "try_add", exp.Sub: "try_subtract", exp.Mul: "try_multiply", exp.Mod: "try_mod"}[type(n)]
            return exp.Anonymous(this=fn, expressions=[n.this, n.expression])
        if isinstance(n, exp.IntDiv):
            a, b = n.this, n.expression
            quotient = _divide(a, b)
            integral = exp.Case(ifs=[exp.If(this=exp.EQ(this=b.copy(), expression=exp.Literal.number(0)),
                                            true=exp.Null())],
                                default=_try_cast(quotient.copy(), exp.DataType.build("BIGINT")))
            either = exp.Or(this=_typeof_in(a, "^(double|float|decimal)"),
                            expression=_typeof_in(b, "^(double|float|decimal)"))
            return exp.Case(ifs=[exp.If(this=either, true=quotient)], default=integral)
        if isinstance(n, exp.Cast | exp.TryCast):
            to = n.args["to"]
            if to.this in _INT_TYPES:
                return _int_cast(n.this, to)
            return _try_cast(n.this, to)
        if isinstance(n, exp.Table) and not n.args.get("db") and n.name.lower() in tables:
            original = n.name
            n.set("this", exp.to_identifier(tables[original.lower()], quoted=True))
            if not n.alias:
                n.set("alias", exp.TableAlias(this=exp.to_identifier(original)))
            return n
        if isinstance(n, exp.Table) and n.args.get("db"):
            if n.text("db").lower() != "main" or n.name.lower() not in tables:
                raise _refuse("the relation " + n.sql(dialect="duckdb"))
            alias = n.alias or n.name
            return exp.Table(this=exp.to_identifier(tables[n.name.lower()], quoted=True),
                             alias=exp.TableAlias(this=exp.to_identifier(alias)))
        return n

    tree = _bottom_up(tree, spark_form)
    for call in [n for n in tree.find_all(exp.Anonymous) if _call_name(n) == "_dpsql_rand"]:
        select = call.find_ancestor(exp.Select)
        if select is None or call.expressions:
            raise _refuse("a random order outside a projection")
        salted = True
        call.replace(_rand(select, call, salt))
    try:
        text = tree.sql(dialect="spark", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.UnsupportedError:
        raise _refuse("the query") from None
    return Translation(text, salted)
