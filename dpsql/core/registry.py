"""The method registry: every DP aggregate method, with its privacy declaration, in one place.

A :class:`Method` is a frozen record: the aggregate it computes, its name (``method := '<name>'`` in
SQL), its privacy notion, a function that runs it on a :class:`~dpsql.core.batch.Batch`, and whether it
needs public bounds.  Its cost is computed from the parameters alone by :func:`privacy_cost`; the
binding, the guard and the docs all call that function, so a method is added in one place.  What a call is
charged is that cost priced by :mod:`~dpsql.core.accounting`'s exact algebra (``Privacy.exact(...).charge(...)``,
then ``total``), which the guard applies and the ledger rounds with.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..noise import Rng
from .accounting import Notion, Privacy, epsilon_to_rho, pure, zcdp
from .batch import Batch

__all__ = [
    "AGGREGATES",
    "Method",
    "Params",
    "ParameterError",
    "install",
    "get_method",
    "methods",
    "default_method",
    "privacy_cost",
    "validate",
    "MIN_EPSILON",
    "MAX_EPSILON",
    "MIN_RHO",
    "MAX_RHO",
    "MIN_LEVEL",
    "MAX_LEVEL",
    "run_interval",
]

#: aggregates the core computes; SQL adds dp_stddev (sqrt of var) and dp_median (quantile 0.5)
AGGREGATES = ("count", "sum", "mean", "var", "quantile", "iqr")

#: Accepted budgets per call.  The floor keeps every mechanism's noise scale (at most ~1.6e7 / eps grid
#: steps, the subset mean's; measured over all methods) below ``noise.MAX_SCALE`` = 2**48 (2.8e14), where
#: the samplers are exact: an 18x margin.  Below it noise used to saturate to 0 (a tiny epsilon released
#: exact answers) and would now be refused after the data were read.
MIN_EPSILON = 1e-6
MAX_EPSILON = 1000.0
MIN_RHO = pure(MIN_EPSILON).as_rho()  # the zCDP cost of MIN_EPSILON-DP
MAX_RHO = 1000.0
#: public bounds must lie in the data domain (values are clamped to +-2**1000 anyway)
MAX_BOUND = 2.0**1000
#: accepted confidence levels of an interval (``dp_*_ci(..., level := 0.95)``)
MIN_LEVEL = 0.5
MAX_LEVEL = 0.999


class ParameterError(ValueError):
    """A bad query parameter (never a bad data value).  The message names the argument."""


@dataclass(frozen=True)
class Params:
    """Public parameters of one aggregate call (all literals; none may come from data)."""

    epsilon: float | None = None
    rho: float | None = None
    delta: float | None = None
    lower: float | None = None
    upper: float | None = None
    p: float | None = None  # quantile level
    beta: float = 1.0 / 3.0  # failure probability used for thresholds (never affects privacy)
    level: float | None = None  # confidence level of the interval (the dp_*_ci functions); None: no interval
    extra: dict = field(default_factory=dict)


RunFn = Callable[[Batch, Privacy, Params, Rng], np.ndarray]
#: (value, lo, hi) per group: the same release as ``run`` (same cost) and an interval meant to cover the exact
#: answer with probability ``params.level``; NaN is NULL, and lo = -inf / hi = +inf mean "no finite bound"
IntervalFn = Callable[[Batch, Privacy, Params, Rng], tuple[np.ndarray, np.ndarray, np.ndarray]]
#: the release from the groups' row counts alone (int64 per group), for a method whose output depends on the data only
#: through them: the binding passes DuckDB's per-group count() instead of the rows; same law as ``run`` on a batch
#: of groups of those sizes
CountsFn = Callable[[np.ndarray, Privacy, Params, Rng], np.ndarray]
CountsIntervalFn = Callable[[np.ndarray, Privacy, Params, Rng], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Method:
    aggregate: str
    name: str
    notion: Notion
    run: RunFn
    summary: str
    requires_bounds: bool = False
    source: str = ""  # e.g. "seed 003, Alg. 8"
    #: extra parameter-only checks of this method (raise ParameterError); run by :func:`validate`, so the
    #: guard refuses the call (E060) before any charge instead of the method failing after it
    check: Callable[[Params], None] | None = None
    #: the release with its interval (module :mod:`~dpsql.core.intervals` documents each); None: no interval
    interval: IntervalFn | None = None
    #: ``run`` and ``interval`` from the groups' row counts (dp_count's route in the binding); None: rows only
    counts: CountsFn | None = None
    counts_interval: CountsIntervalFn | None = None


#: where the methods come from: set once by :mod:`dpsql.core` to a function returning
#: :data:`dpsql.core.estimators.METHODS` (the families import this module, so it never imports them)
_source: Callable[[], tuple[Method, ...]] | None = None
_TABLE: dict[str, dict[str, Method]] | None = None


#: the default method per aggregate, chosen by issue 12's panel (benchmarks/panel.py: geometric mean and worst cell
#: against peers with exact bounds and the lower-bound lines; the table in docs/benchmarks.md)
DEFAULTS: dict[str, str] = {
    "count": "laplace",
    "sum": "scalefree",
    "mean": "scalefree",
    "var": "scalefree",
    "quantile": "scalefree",
    "iqr": "scalefree",
}


def install(source: Callable[[], tuple[Method, ...]]) -> None:
    """Say where the method table comes from (called once, by :mod:`dpsql.core`); it is read on first use."""
    global _source, _TABLE
    _source, _TABLE = source, None


def _table() -> dict[str, dict[str, Method]]:
    """The methods by aggregate and name, built once from the installed source (each family's ``METHODS``, in
    the order of :data:`dpsql.core.estimators.FAMILIES`); the defaults are :data:`DEFAULTS`."""
    global _TABLE
    if _TABLE is None:
        table: dict[str, dict[str, Method]] = {a: {} for a in AGGREGATES}
        for m in _source():
            if m.aggregate not in table:
                raise ValueError(f"unknown aggregate {m.aggregate!r}")
            if m.name in table[m.aggregate]:
                raise ValueError(f"two methods {m.name!r} for {m.aggregate!r}")
            table[m.aggregate][m.name] = m
        _TABLE = table
    return _TABLE


def methods(aggregate: str) -> dict[str, Method]:
    return dict(_table()[aggregate])


def default_method(aggregate: str) -> str:
    return DEFAULTS[aggregate]


def get_method(aggregate: str, name: str | None) -> Method:
    table = _table()
    if aggregate not in table:
        raise ParameterError(f"unknown aggregate {aggregate!r}")
    if name is None or name == "" or name == "default":
        name = DEFAULTS[aggregate]
    try:
        return table[aggregate][name]
    except KeyError:
        known = ", ".join(sorted(table[aggregate]))
        raise ParameterError(f"dp_{aggregate}: method: unknown method {name!r} (known: {known})") from None


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, int | float) and math.isfinite(x)


def validate(aggregate: str, method: Method, params: Params) -> None:
    """Check the parameters alone (no data); raise :class:`ParameterError` naming the argument."""
    fn = f"dp_{aggregate}"
    if params.epsilon is not None and not (_finite(params.epsilon) and MIN_EPSILON <= params.epsilon <= MAX_EPSILON):
        raise ParameterError(f"{fn}: epsilon must be a finite number in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]")
    if params.rho is not None and not (_finite(params.rho) and MIN_RHO <= params.rho <= MAX_RHO):
        raise ParameterError(f"{fn}: rho must be a finite number in [{MIN_RHO:g}, {MAX_RHO:g}]")
    if params.delta is not None and not (_finite(params.delta) and 0 < params.delta < 1):
        raise ParameterError(f"{fn}: delta must be a finite number in (0, 1)")
    if params.epsilon is None and params.rho is None:
        raise ParameterError(f"{fn}: epsilon is required")
    for name in ("lower", "upper"):
        v = getattr(params, name)
        if v is not None and not (_finite(v) and abs(v) <= MAX_BOUND):
            raise ParameterError(f"{fn}: {name} must be a finite number in [-2**1000, 2**1000] (about 1.07e301)")
    if params.lower is not None and params.upper is not None and params.lower > params.upper:
        raise ParameterError(f"{fn}: lower must not exceed upper")
    if method.requires_bounds and (params.lower is None or params.upper is None):
        raise ParameterError(f"{fn}: method {method.name!r} needs lower := and upper :=")
    if aggregate == "quantile":
        if not (_finite(params.p) and 0.0 <= params.p <= 1.0):
            raise ParameterError(f"{fn}: p must be a finite number in [0, 1]")
    if not (_finite(params.beta) and 0 < params.beta < 1):
        raise ParameterError(f"{fn}: beta must be in (0, 1)")
    if method.notion == "pure" and params.rho is not None:
        raise ParameterError(f"{fn}: method {method.name!r} is pure DP; give epsilon, not rho")
    if method.notion == "zcdp" and params.rho is None and params.delta is None:
        raise ParameterError(
            f"{fn}: method {method.name!r} is zCDP; give rho := ..., or epsilon := ... with delta := ..."
        )
    if params.level is not None:
        if not (_finite(params.level) and MIN_LEVEL <= params.level <= MAX_LEVEL):
            raise ParameterError(f"{fn}: level must be a finite number in [{MIN_LEVEL:g}, {MAX_LEVEL:g}]")
        if method.interval is None:
            with_ci = ", ".join(f"dp_{a}" for a in AGGREGATES if (m := _table()[a].get(DEFAULTS[a])) and m.interval)
            raise ParameterError(f"{fn}: method {method.name!r} has no interval (the defaults of {with_ci} have one)")
    if method.check is not None:
        method.check(params)
    if method.notion == "zcdp" and params.rho is None and epsilon_to_rho(params.epsilon, params.delta) < MIN_RHO:
        raise ParameterError(f"{fn}: the rho implied by epsilon and delta is below the floor {MIN_RHO:g}")


def privacy_cost(aggregate: str, method: str | None = None, **kw: float | None) -> Privacy:
    """What one call of ``dp_<aggregate>(..., method := method, **kw)`` costs, from parameters alone.

    Pure methods cost ``pure(epsilon)``.  zCDP methods cost ``zcdp(rho)``; given ``epsilon`` and
    ``delta`` instead, rho is the largest value whose (eps, delta) conversion is at most epsilon.
    """
    m = get_method(aggregate, method)
    params = Params(**{k: v for k, v in kw.items() if k in Params.__dataclass_fields__})
    validate(aggregate, m, params)
    return budget_of(m, params)


def budget_of(m: Method, params: Params) -> Privacy:
    if m.notion == "pure":
        return pure(float(params.epsilon))
    if params.rho is not None:
        return zcdp(float(params.rho))
    return zcdp(epsilon_to_rho(float(params.epsilon), float(params.delta)))


def run(aggregate: str, batch: Batch, params: Params, method: str | None = None, rng: Rng | None = None) -> np.ndarray:
    """Validate, then run one method on a batch; returns one float64 per group (NaN means NULL)."""
    from ..noise import system_rng

    m = get_method(aggregate, method)
    validate(aggregate, m, params)
    out = m.run(batch, budget_of(m, params), params, rng or system_rng())
    return np.asarray(out, dtype=np.float64)


def run_interval(aggregate: str, batch: Batch, params: Params, method: str | None = None,
                 rng: Rng | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate, then run one method with its interval at ``params.level`` (default 0.95): (value, lo, hi)
    per group, float64 (NaN means NULL; -inf / +inf mean no finite bound).  Costs what :func:`run` costs."""
    from ..noise import system_rng

    m = get_method(aggregate, method)
    if params.level is None:
        params = replace(params, level=0.95)
    validate(aggregate, m, params)
    value, lo, hi = m.interval(batch, budget_of(m, params), params, rng or system_rng())
    return tuple(np.asarray(a, dtype=np.float64) for a in (value, lo, hi))
