"""Estimator core: numpy only.  Never imports duckdb or sqlglot (a test enforces this).

Layers inside (tests/test_layers.py checks there is no import cycle): :mod:`.accounting`, :mod:`.batch` and
:mod:`.intervals` at the bottom; :mod:`.primitives` (mechanisms over flat groups, noise from :mod:`dpsql.noise`);
:mod:`.registry` (parameters, method records, checks, lookups); :mod:`.helpers` and :mod:`.ranges` (what several
families share); the families (:mod:`.universal`, :mod:`.scalefree`, :mod:`.asymmetric`, :mod:`.subset`,
:mod:`.smooth`, :mod:`.instance`, :mod:`.clipped`), each exporting ``METHODS``; :mod:`.estimators`, the table of
them, which this package hands to the registry.  Every mechanism charges what it spends to :mod:`.spending`
(a no-op unless a test meters the run), so a test can check that each method spends what it declares.
"""

from . import registry as _registry
from .accounting import Privacy, pure, zcdp
from .batch import DOMAIN, Batch
from .registry import (
    AGGREGATES,
    Method,
    ParameterError,
    Params,
    default_method,
    get_method,
    methods,
    privacy_cost,
    run,
    run_interval,
)

__all__ = [
    "AGGREGATES",
    "DOMAIN",
    "Batch",
    "Method",
    "ParameterError",
    "Params",
    "Privacy",
    "default_method",
    "get_method",
    "methods",
    "privacy_cost",
    "pure",
    "run",
    "run_interval",
    "zcdp",
]


def _methods() -> tuple:
    from .estimators import METHODS  # on first use: the families take ~0.2 s to import, dpsql need not wait

    return METHODS


_registry.install(_methods)
