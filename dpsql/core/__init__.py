"""Estimator core: numpy only.  Never imports duckdb or sqlglot (a test enforces this)."""

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
