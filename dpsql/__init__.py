"""dpsql: bound-free differentially private aggregates for DuckDB.

Layers (each imports only those below it):
front doors (cli, shell, server) -> session/admin -> guard, ledger, policy -> duck (binding)
-> core (estimators, numpy only) -> noise (CSPRNG).
"""

from __future__ import annotations

from .core import ParameterError, Privacy, privacy_cost
from .errors import PrivacyError

__version__ = "0.1.0"

__all__ = ["install", "connect", "admin", "privacy_cost", "PrivacyError", "ParameterError", "Privacy"]


def install(con, **kwargs):  # noqa: ANN001 - duckdb connection
    """Register the dp_* aggregates on a DuckDB connection (trusted, data-owner mode: no ledger)."""
    from .duck import install as _install

    return _install(con, **kwargs)


def connect(database: str, analyst: str, **kwargs):  # noqa: ANN201
    """Open a guarded session for an untrusted analyst (every query checked and charged)."""
    from .session import connect as _connect

    return _connect(database, analyst=analyst, **kwargs)


def admin(database: str, **kwargs):  # noqa: ANN201
    """Open the data owner's administration handle (protect tables, declare keys, grant budgets)."""
    from .administration import admin as _admin

    return _admin(database, **kwargs)
