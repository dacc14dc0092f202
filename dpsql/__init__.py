"""dpsql: bound-free differentially private aggregates for DuckDB.

Layers (each imports only those below it; tests/test_layers.py holds the table and checks it):
front doors (cli, shell, demo, server) -> this package's API -> session/admin -> policy -> guard, ledger
-> duck (binding) -> core (estimators, numpy only) -> noise (CSPRNG); text helpers (sqltext, display) and
errors at the bottom.
"""

from __future__ import annotations

from .core import ParameterError, Privacy, privacy_cost
from .errors import PrivacyError

__version__ = "0.1.0"

__all__ = ["install", "sql", "connect", "admin", "privacy_cost", "PrivacyError", "ParameterError", "Privacy"]


def install(con, **kwargs):  # noqa: ANN001 - duckdb connection
    """Register the dp_* aggregates on a DuckDB connection (trusted, data-owner mode: no ledger)."""
    from .duck import install as _install

    return _install(con, **kwargs)


def sql(con, query: str):  # noqa: ANN001, ANN201 - duckdb connection, pyarrow Table
    """Run ``query`` in trusted mode and return a pyarrow Table: the default dp_median, dp_quantile, dp_iqr,
    dp_mean, dp_sum, dp_var and dp_stddev of a simple grouped query through summary plans (native DuckDB passes,
    :mod:`dpsql.plans`, the same law as the macros), anything else as written through the macros (``install(con)``
    first)."""
    from .plans import run as _run

    return _run(con, query)


def connect(database: str, analyst: str, **kwargs):  # noqa: ANN201
    """Open a guarded session for an untrusted analyst (every query checked and charged)."""
    from .session import connect as _connect

    return _connect(database, analyst=analyst, **kwargs)


def admin(database: str, **kwargs):  # noqa: ANN201
    """Open the data owner's administration handle (protect tables, declare keys, grant budgets)."""
    from .administration import admin as _admin

    return _admin(database, **kwargs)
