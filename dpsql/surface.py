"""The dp_* SQL surface, declared once: every function, its arguments, their types and defaults.

This is the one place to add a dp_* function or parameter.  Everything else reads it:

* ``sql/macros.sql`` is generated from it (``python -m dpsql.macrogen``; tests/test_surface.py checks the
  checked-in file is current);
* the binding (:mod:`dpsql.duck`) takes its UDF argument order and Arrow types from it and builds
  :class:`~dpsql.core.registry.Params` from the parameters by name;
* the guard (:mod:`dpsql.guard.params`) accepts exactly the positional and named arguments declared here;
* tests/test_surface.py checks the SQL reference (docs/sql-reference.md) against it.

Adding a numeric parameter ``trim``: declare ``Parameter("trim")`` in :data:`PARAMETERS`, add it to the
``named`` arguments of the functions that take it (:data:`NAMED` for every non-count function), run
``python -m dpsql.macrogen``, then implement it: a ``trim`` field of ``core.registry.Params`` (and its check
in ``core.registry.validate``), its use in the methods, and a row of the argument table in docs/sql-reference.md.

Pure data and string helpers: this module imports nothing from dpsql and nothing outside the standard
library, so the guard can read it without loading DuckDB or Arrow.

>>> FUNCTIONS["dp_quantile_ci"].positional, FUNCTIONS["dp_quantile_ci"].named[-1]
(('x', 'p'), 'level')
>>> AGGREGATE_FUNCTIONS["dp_stddev"], FUNCTIONS["dp_stddev"].release, FUNCTIONS["dp_median"].fixed
('var', 'stddev', (('p', 0.5),))
>>> signature(FUNCTIONS["dp_count_star_ci"])
'dp_count_star_ci(epsilon := NULL, method := NULL, level := 0.95)'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

__all__ = [
    "Parameter",
    "Function",
    "PARAMETERS",
    "FUNCTIONS",
    "PLAIN_FUNCTIONS",
    "AGGREGATE_FUNCTIONS",
    "VALUE",
    "VALUE_TYPE",
    "NAMED",
    "COUNT_NAMED",
    "CI_SUFFIX",
    "CI_FIELDS",
    "DEFAULT_LEVEL",
    "call_parameters",
    "parameters_of",
    "plain_function",
    "signature",
    "sql_literal",
]


@dataclass(frozen=True)
class Parameter:
    """One parameter of the dp_* functions (positional like ``p`` or named like ``epsilon := e``).

    Every parameter is a constant literal, never a column: the guard refuses anything else (E060) and the
    binding checks each is one value per call."""

    name: str
    #: ``DOUBLE`` (a numeric literal; the guard keeps its exact text) or ``VARCHAR`` (a string literal)
    sql_type: str = "DOUBLE"
    #: the macro's default: None is SQL NULL, "not given" (the core then applies its own default, e.g.
    #: ``beta`` = 1/3 in ``Params``); anything else is also what the guard records when it is not given
    default: float | None = None
    #: taken only by the error-bar twins ``dp_*_ci`` (and never part of the cost)
    interval: bool = False


#: every parameter, in the order the binding's UDFs receive them (``_dpsql_agg(agg, list(x), p, epsilon,
#: ...)``; the *_ci UDF adds the interval parameters)
PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    Parameter("p"),  # the quantile level of dp_quantile (positional)
    Parameter("epsilon"),
    Parameter("rho"),
    Parameter("delta"),
    Parameter("lower"),
    Parameter("upper"),
    Parameter("method", sql_type="VARCHAR"),
    Parameter("beta"),
    Parameter("level", default=0.95, interval=True),
)}

#: the value argument: the column the aggregate reads
VALUE = "x"
#: what a ``NUMERIC`` value is converted to: the type of the macros' value parameter (``dp_mean(x DOUBLE, ...)``,
#: which DuckDB matches by an implicit cast from every integer width, DECIMAL and FLOAT); any other type binds
#: to the macro's second, untyped overload, which raises DPSQL-E060 naming the value and its type
VALUE_TYPE = "DOUBLE"
#: the named arguments of every dp_* function but the counts, in the macros' order (pg_proc shows it)
NAMED = ("epsilon", "lower", "upper", "method", "rho", "delta", "beta")
#: dp_count and dp_count_star accept only these
COUNT_NAMED = ("epsilon", "method")
#: the error-bar twin of dp_f is dp_f_ci: dp_f's arguments plus the interval parameters (``level``)
CI_SUFFIX = "_ci"
#: the fields of a dp_*_ci result, STRUCT(value DOUBLE, lo DOUBLE, hi DOUBLE)
CI_FIELDS = ("value", "lo", "hi")


@dataclass(frozen=True)
class Function:
    """One dp_* SQL function."""

    name: str
    #: the core aggregate whose methods, checks and cost apply (``dpsql.core.registry.AGGREGATES``)
    aggregate: str
    #: positional arguments: :data:`VALUE` and then parameters (``dp_quantile(x, p, ...)``)
    positional: tuple[str, ...] = (VALUE,)
    #: named arguments (``epsilon := e``), in the macro's order
    named: tuple[str, ...] = NAMED
    #: parameters the function sets itself (``dp_median`` is ``dp_quantile`` at p = 0.5)
    fixed: tuple[tuple[str, float], ...] = ()
    #: what the value may be: ``NUMERIC`` columns, or ``ANY`` column or ``*`` (dp_count); None: no value
    value: str | None = "NUMERIC"
    #: what the binding releases, when it is not the aggregate itself (``stddev``: the square root of var)
    release_as: str = ""
    #: an error-bar twin (``dp_f_ci``): returns STRUCT(value, lo, hi) from one release costing what dp_f costs
    interval: bool = False

    @property
    def release(self) -> str:
        return self.release_as or self.aggregate

    @property
    def plain(self) -> str:
        """``dp_mean_ci`` -> ``dp_mean``."""
        return plain_function(self.name)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters a call may give (positional ones first), without the value argument."""
        return tuple(n for n in self.positional if n != VALUE) + self.named

    def with_interval(self) -> Function:
        extra = tuple(n for n, p in PARAMETERS.items() if p.interval)
        return replace(self, name=self.name + CI_SUFFIX, named=self.named + extra, interval=True)


#: the plain dp_* functions, in the SQL reference's (docs/sql-reference.md) and the macro file's order
PLAIN_FUNCTIONS: tuple[Function, ...] = (
    Function("dp_count", "count", named=COUNT_NAMED, value="ANY"),
    Function("dp_count_star", "count", positional=(), named=COUNT_NAMED, value=None),
    Function("dp_sum", "sum"),
    Function("dp_mean", "mean"),
    Function("dp_avg", "mean"),
    Function("dp_var", "var"),
    Function("dp_stddev", "var", release_as="stddev"),
    Function("dp_quantile", "quantile", positional=(VALUE, "p")),
    Function("dp_median", "quantile", fixed=(("p", 0.5),)),
    Function("dp_iqr", "iqr"),
)

#: every dp_* function by name: the plain ones, then their error-bar twins
FUNCTIONS: dict[str, Function] = {f.name: f for f in PLAIN_FUNCTIONS} | {
    t.name: t for t in (f.with_interval() for f in PLAIN_FUNCTIONS)}

#: SQL function name -> core aggregate (the cost and the method registry); the *_ci twins cost what dp_f costs
AGGREGATE_FUNCTIONS: dict[str, str] = {name: f.aggregate for name, f in FUNCTIONS.items()}

#: the confidence level of a dp_*_ci call without ``level :=``
DEFAULT_LEVEL: float = PARAMETERS["level"].default


def plain_function(fn: str) -> str:
    """``dp_mean_ci`` -> ``dp_mean``; a plain name is returned unchanged."""
    return fn[: -len(CI_SUFFIX)] if fn.endswith(CI_SUFFIX) else fn


def call_parameters(interval: bool = False) -> tuple[str, ...]:
    """The parameters the binding's UDFs receive, in order: every parameter of a plain call, and with
    ``interval`` the interval parameters too (``level``)."""
    return tuple(n for n, p in PARAMETERS.items() if interval or not p.interval)


def parameters_of(functions: Iterable[Function]) -> tuple[str, ...]:
    """The parameters any of ``functions`` takes, in the UDFs' order (:func:`call_parameters`)."""
    taken = {n for f in functions for n in f.parameters}
    return tuple(n for n in PARAMETERS if n in taken)


def sql_literal(value: object) -> str:
    """``None`` -> ``NULL``, a number -> its shortest text (``0.95``), a string -> a quoted literal."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def signature(fn: Function) -> str:
    """The macro's signature, ``dp_mean(x, epsilon := NULL, ..., beta := NULL)``."""
    named = [f"{n} := {sql_literal(PARAMETERS[n].default)}" for n in fn.named]
    return f"{fn.name}({', '.join([*fn.positional, *named])})"
