"""DuckDB binding: ``install(con)`` registers the dp_* aggregates (trusted, data-owner mode).

The functions, their arguments, types and defaults are declared once in :mod:`dpsql.surface`:
``sql/macros.sql`` is generated from it (``python -m dpsql.macrogen``), and the UDFs here take their argument
order and Arrow types from it and build :class:`~dpsql.core.Params` by parameter name.  DuckDB's Python API has
scalar UDFs only, so each aggregate is a macro over ``list(x)`` (``sql/macros.sql``; its hand-written helpers
are in ``sql/native.sql``) feeding one Arrow UDF that receives a whole chunk of groups: the list array's
offsets and flat values become a :class:`~dpsql.core.batch.Batch` without a per-group Python loop.
``null_handling="special"`` makes DuckDB call the UDF for empty groups too (``list`` over no rows is
NULL), so an empty group gets a DP answer like any other, never a deterministic NULL.

Parameter errors (``epsilon <= 0``, unknown method, ...) raise :class:`~dpsql.core.ParameterError`
naming the argument; they depend on the query only.  DuckDB evaluates macro arguments when the
aggregate finishes, so in trusted mode the error surfaces after the scan; the guard
(:mod:`dpsql.guard`) checks the same parameters statically before any data is read.

A value of a non-numeric type (VARCHAR, BOOLEAN, DATE, INTERVAL, BLOB, a LIST or STRUCT, UUID, a string
literal, ...) raises ``DPSQL-E060: dp_mean: its value must be numeric; name is VARCHAR (convert it, e.g.
TRY_CAST(name AS DOUBLE), or count it with dp_count)``, the guarded session's refusal, as a DuckDB error whose
message starts with the code (issue 14): each function of a numeric value is a macro with two overloads (see
``sql/macros.sql``), ``x DOUBLE`` for every numeric type and an untyped one for any other, which raises when the
aggregate runs, for every group (without GROUP BY: also over no rows).  dp_count counts a value of any type.

Each ``dp_f`` has an error-bar twin ``dp_f_ci`` (same arguments plus ``level := 0.95``): one release with
its interval, ``STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE)``, from the UDF ``_dpsql_agg_ci`` (list route
only).  Its value has the law of ``dp_f``'s and it costs what ``dp_f`` costs (:func:`dpsql.core.run_interval`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .core import ParameterError, Params, get_method
from .core.batch import clean
from .core.clipped import finish as clipped_finish
from .core.primitives import fixed_point_grid
from .core.registry import budget_of, validate
from .noise import Rng, system_rng
from .sqltext import script as statements
from .surface import (
    AGGREGATE_FUNCTIONS,
    CI_FIELDS,
    CI_SUFFIX,
    DEFAULT_LEVEL,
    FUNCTIONS,
    PARAMETERS,
    PLAIN_FUNCTIONS,
    call_parameters,
    parameters_of,
    plain_function,
)

__all__ = ["install", "AGGREGATE_FUNCTIONS", "CI_SUFFIX", "DEFAULT_LEVEL", "plain_function"]

#: the aggregates with a native route for method := 'clipped' (sql/native.sql; dpsql.macrogen.NATIVE has their SQL)
_NATIVE_AGGREGATES = ("sum", "mean", "var")
#: the parameters the UDFs receive, in order: the list route (_dpsql_agg), the interval UDF (_dpsql_agg_ci), the
#: native route (_dpsql_fin: those of the native aggregates' functions); dp_count's UDF (_dpsql_count) takes
#: dp_count's named arguments
PARAM_NAMES = call_parameters()
CI_PARAM_NAMES = call_parameters(interval=True)
FIN_PARAM_NAMES = parameters_of(f for f in PLAIN_FUNCTIONS if f.aggregate in _NATIVE_AGGREGATES)
COUNT_PARAM_NAMES = FUNCTIONS["dp_count"].named
#: what install runs, in order: the hand-written helpers, then the macros generated from the surface
_SQL_FILES = ("native.sql", "macros.sql")
#: install(guarded=True), the guarded session's executor: a dp_* call on a non-numeric value fails when DuckDB
#: binds the query (the value goes to a macro that takes only a DOUBLE, which it did not match), which the session
#: refuses uncharged before any data is read, rather than as the charged query runs (the guard itself refuses
#: table columns of a non-numeric type with E060; the session names a derived one by binding zero-row probes,
#: dpsql.guard.value_types, and refuses it with the same E060)
_GUARDED_SQL = ("CREATE OR REPLACE TEMP MACRO _dpsql_numeric_only(v DOUBLE) AS v",
                "CREATE OR REPLACE TEMP MACRO _dpsql_not_numeric(fn, x) AS _dpsql_numeric_only(x)")
#: the parameters that become fields of Params (``method`` selects the Method instead), numbers and strings; the
#: numbers in the order _params checks them (beta and level first, then Params' field order: a call with
#: several bad numbers names the one it always named)
_FIELDS = [n for n in Params.__dataclass_fields__ if n in PARAMETERS and n != "method"]
_NUMBERS = sorted((n for n in _FIELDS if PARAMETERS[n].sql_type == "DOUBLE"), key=lambda n: n not in ("beta", "level"))
_STRINGS = [n for n in _FIELDS if PARAMETERS[n].sql_type != "DOUBLE"]

def _constant(arr: pa.Array | pa.ChunkedArray, name: str, fn: str) -> object:
    """The single value of a parameter column (parameters must be constants, not data)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) == 0:
        return None
    first = arr[0].as_py()
    if len(arr) > 1:
        if arr.null_count not in (0, len(arr)):
            raise ParameterError(f"{fn}: {name} must be a constant literal, not a column")
        if arr.null_count == 0 and not pc.all(pc.equal(arr, arr[0])).as_py():
            raise ParameterError(f"{fn}: {name} must be a constant literal, not a column")
    return first


def _num(v: object, name: str, fn: str) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)  # DECIMAL literals arrive as decimal.Decimal
    except (TypeError, ValueError):
        raise ParameterError(f"{fn}: {name} must be a number") from None
    if not math.isfinite(f):
        raise ParameterError(f"{fn}: {name} must be a finite number")
    return f


def _batch_from_lists(lst: pa.Array | pa.ChunkedArray):  # noqa: ANN202
    if isinstance(lst, pa.ChunkedArray):
        lst = lst.combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(lst), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = pc.list_flatten(lst)
    if flat.type != pa.float64():
        flat = pc.cast(flat, pa.float64())
    if flat.null_count:
        flat = pc.fill_null(flat, float("nan"))
    values = flat.to_numpy(zero_copy_only=False)
    return clean(values, offsets)


def _string(v: object, name: str, fn: str) -> str | None:
    if v is not None and not isinstance(v, str):
        raise ParameterError(f"{fn}: {name} must be a string literal")
    return v


def _params(cols: dict[str, object], fn: str) -> tuple[str | None, Params]:
    """The method name and the Params of one call, from its parameter values by name (:mod:`dpsql.surface`);
    a parameter not given (NULL) takes Params' default (``beta`` = 1/3)."""
    method = _string(cols.get("method"), "method", fn)
    given = {n: _num(cols.get(n), n, fn) for n in _NUMBERS} | {n: _string(cols.get(n), n, fn) for n in _STRINGS}
    return method, Params(**{n: v for n, v in given.items() if v is not None})


def _udf(fn: Callable, leading: tuple[str, ...], names: tuple[str, ...]) -> Callable:
    """``fn(*leading, *values)`` declared with one positional parameter per name: DuckDB reads the UDF's arity
    from its signature, and the surface decides the parameters."""
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in (*leading, *names)])
    return fn


def _types(names: tuple[str, ...]) -> list:
    """The DuckDB types of the UDF arguments ``names`` (DOUBLE or VARCHAR, from the surface)."""
    return [duckdb.sqltype(PARAMETERS[n].sql_type) for n in names]


def _checked_call(agg, raw: dict, interval: bool = False):  # noqa: ANN001, ANN202
    """Shared head of the UDFs: aggregate name, SQL function name, validated method and parameters (every
    parameter must be a constant; errors name the argument and never carry data).  ``interval``: a
    dp_*_ci call, whose ``level`` defaults to :data:`DEFAULT_LEVEL` and is validated with the rest."""
    name = _constant(agg, "aggregate", "dp_*")
    fn = "dp_stddev" if name == "stddev" else f"dp_{name}"
    core_agg = "var" if name == "stddev" else name
    cols = {k: (None if v is None else _constant(v, k, fn)) for k, v in raw.items()}
    mname, params = _params(cols, fn)
    if interval and params.level is None:
        params = replace(params, level=DEFAULT_LEVEL)
    m = get_method(core_agg, mname)
    validate(core_agg, m, params)
    return name, fn, core_agg, m, params


def _release(name: str, out: np.ndarray) -> pa.Array:
    """float64 results as Arrow (NaN = NULL: a private decision of the mechanism); stddev = sqrt(var)."""
    out = np.asarray(out, dtype=np.float64)
    if name == "stddev":
        out = np.sqrt(np.maximum(out, 0.0))
    return pa.array(out, type=pa.float64(), mask=np.isnan(out))


def _release_ci(name: str, value: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> pa.Array:
    """(value, lo, hi) float64 per group as STRUCT(value, lo, hi): NaN fields are NULL, and a group whose
    value is NULL (the mechanism released no answer) is a NULL struct; stddev takes square roots."""
    value, lo, hi = (np.asarray(a, dtype=np.float64) for a in (value, lo, hi))
    if name == "stddev":
        with np.errstate(invalid="ignore"):
            value, lo, hi = (np.sqrt(np.maximum(a, 0.0)) for a in (value, lo, hi))
    fields = [pa.array(a, type=pa.float64(), mask=np.isnan(a)) for a in (value, lo, hi)]
    return pa.StructArray.from_arrays(fields, names=list(CI_FIELDS), mask=pa.array(np.isnan(value)))


def make_agg(rng_factory: Callable[[], Rng]) -> Callable[..., Any]:
    """The Python function behind ``_dpsql_agg`` (a list-route dp_* aggregate); ``rng_factory()`` gives each
    call's noise source.  Used by :func:`install` and by :mod:`dpsql.spark`."""
    def _dpsql_agg(agg, lst, *values):  # noqa: ANN001, ANN002, ANN202
        raw = dict(zip(PARAM_NAMES, values, strict=True))
        name, _, _, m, params = _checked_call(agg, raw)
        batch = _batch_from_lists(lst)
        return _release(name, m.run(batch, budget_of(m, params), params, rng_factory()))

    return _udf(_dpsql_agg, ("agg", "lst"), PARAM_NAMES)


def make_agg_ci(rng_factory: Callable[[], Rng]) -> Callable[..., Any]:
    """The Python function behind ``_dpsql_agg_ci`` (a dp_*_ci aggregate): see :func:`make_agg`."""
    def _dpsql_agg_ci(agg, lst, n, *values):  # noqa: ANN001, ANN002, ANN202
        """dp_*_ci (sql/macros.sql): ``_dpsql_agg``'s release with its interval.  Counts come as ``n`` (DuckDB's
        count, released by the core's ``Method.counts_interval`` as in ``_dpsql_count``), every other aggregate as
        the list ``lst``."""
        raw = dict(zip(CI_PARAM_NAMES, values, strict=True))
        name, fn, _, m, params = _checked_call(agg, raw, interval=True)
        if name == "count":
            m = _count_method(fn, m)
            value, lo, hi = m.counts_interval(_counts(n), budget_of(m, params), params, rng_factory())
        else:
            value, lo, hi = m.interval(_batch_from_lists(lst), budget_of(m, params), params, rng_factory())
        return _release_ci(name, value, lo, hi)

    return _udf(_dpsql_agg_ci, ("agg", "lst", "n"), CI_PARAM_NAMES)


def make_fin(rng_factory: Callable[[], Rng]) -> Callable[..., Any]:
    """The Python function behind ``_dpsql_fin`` (the native ``clipped`` route's finish): see :func:`make_agg`."""
    def _dpsql_fin(agg, n, k1, k2, *values):  # noqa: ANN001, ANN002, ANN202
        """The native route of ``method := 'clipped'`` (sql/macros.sql, sql/native.sql): DuckDB computed each
        group's row count and integer fixed-point sums (dpsql.core.clipped.clipped_stats); this adds the noise
        with the same code as the list route, after the same parameter checks."""
        raw = dict(zip(FIN_PARAM_NAMES, values, strict=True))
        name, fn, core_agg, m, params = _checked_call(agg, raw)
        if m.name != "clipped":  # the macro routes here only for method := 'clipped'
            raise ParameterError(f"{fn}: internal routing error")
        n, k1, k2 = (pc.fill_null(a, 0).to_numpy(zero_copy_only=False).astype(np.int64) for a in (n, k1, k2))
        return _release(name, clipped_finish(core_agg, n, k1, k2, budget_of(m, params), params, rng_factory()))

    return _udf(_dpsql_fin, ("agg", "n", "k1", "k2"), FIN_PARAM_NAMES)


def _fixed_point_step(s: pa.Array) -> pa.Array:
    """``_dpsql_fg(s)``: the native route's grid ``pow2_floor(max(s, 2**-1000)) * 2**-20``, computed by the
    core's own :func:`fixed_point_grid` so the SQL sums use exactly the core's constant.  Called on literals
    only and folded by DuckDB when it binds the query; never raises (NULL in, NULL out; the route itself
    checks the bounds)."""
    v = pc.fill_null(s, 1.0).to_numpy(zero_copy_only=False).astype(np.float64)
    with np.errstate(all="ignore"):
        out = fixed_point_grid(np.nan_to_num(v, nan=1.0))[1]
    return pa.array(out, type=pa.float64(), mask=pc.is_null(s).to_numpy(zero_copy_only=False))


def _count_method(fn: str, m):  # noqa: ANN001, ANN202
    """``m`` if it releases from row counts (the core's ``Method.counts``), which is all dp_count passes."""
    if m.counts is None or m.counts_interval is None:
        raise ParameterError(f"{fn}: method {m.name!r} is not available for dp_count")
    return m


def _counts(n: pa.Array) -> np.ndarray:
    """DuckDB's per-group counts as int64 (a group with no rows has count 0, never NULL; NULL is taken as 0)."""
    return pc.fill_null(n, 0).to_numpy(zero_copy_only=False).astype(np.int64)


def make_count(rng_factory: Callable[[], Rng]) -> Callable[..., Any]:
    """The Python function behind ``_dpsql_count`` (dp_count from DuckDB's counts): see :func:`make_agg`."""
    def _dpsql_count(n, *values):  # noqa: ANN001, ANN002, ANN202
        fn = "dp_count"
        cols = dict(zip(COUNT_PARAM_NAMES, values, strict=True))
        eps = _num(_constant(cols["epsilon"], "epsilon", fn), "epsilon", fn)
        mname = _constant(cols["method"], "method", fn)
        m = get_method("count", mname)
        params = Params(epsilon=eps)
        validate("count", m, params)
        value = _count_method(fn, m).counts(_counts(n), budget_of(m, params), params, rng_factory())
        return pa.array(value, type=pa.float64())

    return _udf(_dpsql_count, ("n",), COUNT_PARAM_NAMES)


def install(con: duckdb.DuckDBPyConnection, rng: Rng | None = None, *,
            guarded: bool = False) -> duckdb.DuckDBPyConnection:
    """Register dpsql's aggregates on ``con`` and return it.

    ``rng`` is for tests only (a seeded :class:`~dpsql.noise.Rng`); production noise always comes
    from the OS CSPRNG.  ``guarded`` is for the guarded session's executor (:mod:`dpsql.executor`): a value of
    a non-numeric type is then a bind failure (refused uncharged before anything runs), not DPSQL-E060 at run
    time.
    """
    factory = (lambda: rng) if rng is not None else system_rng
    D = duckdb.sqltype("DOUBLE")
    V = duckdb.sqltype("VARCHAR")
    for fname in ("_dpsql_agg", "_dpsql_agg_ci", "_dpsql_count", "_dpsql_fin", "_dpsql_fg"):
        try:
            con.remove_function(fname)
        except Exception:  # noqa: BLE001 - not registered yet
            pass
    con.create_function(
        "_dpsql_agg",
        make_agg(factory),
        [V, duckdb.list_type(D), *_types(PARAM_NAMES)],
        D,
        type="arrow",
        null_handling="special",
        side_effects=False,  # see module docstring: HAVING on aliases needs it; args are never constant
    )
    I = duckdb.sqltype("BIGINT")
    con.create_function(
        "_dpsql_agg_ci",
        make_agg_ci(factory),
        [V, duckdb.list_type(D), I, *_types(CI_PARAM_NAMES)],
        duckdb.struct_type({f: D for f in CI_FIELDS}),
        type="arrow",
        null_handling="special",
        side_effects=False,  # as _dpsql_agg
    )
    con.create_function(
        "_dpsql_fin",
        make_fin(factory),
        [V, I, I, I, *_types(FIN_PARAM_NAMES)],
        D,
        type="arrow",
        null_handling="special",
        side_effects=False,  # as _dpsql_agg: its arguments are aggregates, never constants
    )
    con.create_function(
        "_dpsql_count",
        make_count(factory),
        [I, *_types(COUNT_PARAM_NAMES)],
        D,
        type="arrow",
        null_handling="special",
        side_effects=False,  # see module docstring: HAVING on aliases needs it; args are never constant
    )
    con.create_function("_dpsql_fg", _fixed_point_step, [D], D, type="arrow",
                        side_effects=False)  # constant in, constant out: DuckDB folds the call at bind
    for name in _SQL_FILES:
        for stmt in statements(name):
            con.execute(stmt)
    for stmt in _GUARDED_SQL if guarded else ():
        con.execute(stmt)
    return con
