"""The data owner's administration API: protect tables, declare public keys, grant budgets.

>>> admin = dpsql.admin("hospital.duckdb")                       # doctest: +SKIP
>>> admin.protect("visits", privacy_unit="patient_id", max_rows_per_unit=5)
>>> admin.public_keys("visits", "clinic", ["A", "B", "C"])
>>> admin.grant("alice", epsilon=3.0)

Policy goes into the data file (schema ``dpsql``, :mod:`dpsql.policy`); budgets and grants go into the
ledger file next to it (:mod:`dpsql.ledger`).  Each call opens the data file only for its own duration:
DuckDB lets one process write a file only while nobody else has it open, so policy changes need the
guarded sessions on that database closed.  Budget changes (``grant``) go to the ledger and can be made
while sessions run.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from . import policy
from .ledger import Budget, Entry, Ledger, clean, ledger_path, to_decimal, transaction

if TYPE_CHECKING:
    from .guard.catalog import Catalog

__all__ = ["Admin", "admin"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_MAX_BOUND = 1_000_000


class Admin:
    """Administration handle on one database file.  Use :func:`dpsql.admin`."""

    def __init__(self, database: str | os.PathLike[str], *, ledger_timeout: float = 30.0) -> None:
        self.database = Path(database)
        if not self.database.is_file():
            raise FileNotFoundError(f"no database file {str(self.database)!r}")
        self.ledger_timeout = ledger_timeout
        self._ledger: Ledger | None = None

    # ------------------------------------------------------------------ connections

    @contextlib.contextmanager
    def _write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        try:
            con = duckdb.connect(str(self.database))
        except duckdb.Error as exc:
            raise RuntimeError("cannot open the database for writing; close the guarded sessions and other "
                               f"connections on it first ({type(exc).__name__})") from None
        try:
            with transaction(con):
                policy.ensure_schema(con)
                yield con
        finally:
            con.close()

    @contextlib.contextmanager
    def _read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        try:
            con = duckdb.connect(str(self.database), read_only=True)
        except duckdb.Error:
            with self._write() as con:  # another connection of this process holds it read-write: rare
                yield con
            return
        try:
            yield con
        finally:
            con.close()

    def _dataset_id(self) -> str:
        with self._read() as con:
            found = policy.dataset_id(con)
        if found is not None:
            return found
        with self._write() as con:
            return policy.ensure_schema(con)

    def ledger(self, create: bool = False) -> Ledger:
        """The ledger of this database (verified when first opened; ``create`` makes it if missing)."""
        if self._ledger is None:
            path = ledger_path(self.database)
            self._ledger = Ledger(path, self._dataset_id(), create=create or not path.exists(),
                                  lock_timeout=self.ledger_timeout)
        return self._ledger

    # ------------------------------------------------------------------ policy

    def protect(self, table: str, privacy_unit: str | None = None, max_rows_per_unit: int = 1,
                max_groups_per_unit: int = 1) -> None:
        """Declare ``table`` protected.  ``privacy_unit`` names the column identifying one person (None:
        each row is its own unit); the rewrite keeps at most ``max_rows_per_unit`` rows and
        ``max_groups_per_unit`` groups per unit, and costs scale with these bounds."""
        rows, groups = _bound(max_rows_per_unit, "max_rows_per_unit"), _bound(max_groups_per_unit,
                                                                              "max_groups_per_unit")
        with self._write() as con:
            cols = _columns(con, table)
            if privacy_unit is not None and privacy_unit not in cols:
                raise ValueError(f"table {table!r} has no column {privacy_unit!r}")
            con.execute("DELETE FROM dpsql.public_tables WHERE lower(table_name) = lower(?)", [table])
            con.execute("DELETE FROM dpsql.protected_tables WHERE lower(table_name) = lower(?)", [table])
            con.execute("INSERT INTO dpsql.protected_tables (table_name, privacy_unit, max_rows_per_unit, "
                        "max_groups_per_unit) VALUES (?, ?, ?, ?)", [table, privacy_unit, rows, groups])

    def public_table(self, table: str) -> None:
        """Declare ``table`` public: its contents may be read without noise (lookup tables, key lists)."""
        with self._write() as con:
            _columns(con, table)
            con.execute("DELETE FROM dpsql.protected_tables WHERE lower(table_name) = lower(?)", [table])
            con.execute("DELETE FROM dpsql.public_keys WHERE lower(table_name) = lower(?)", [table])
            con.execute("INSERT OR IGNORE INTO dpsql.public_tables (table_name) VALUES (?)", [table])

    def public_keys(self, table: str, column: str, keys: Iterable[Any]) -> None:
        """Declare the public domain of ``table.column``: GROUP BY that column outputs exactly these keys
        (empty groups too).  The keys are public knowledge, never taken from the data."""
        values = list(keys)
        if not values:
            raise ValueError("the key list is empty")
        text = [None if v is None else str(v) for v in values]
        if any(t is None for t in text):
            raise ValueError("NULL is not a valid public key")
        if len(set(text)) != len(text):
            raise ValueError("the key list has duplicates")
        with self._write() as con:
            cols = _columns(con, table)
            if column not in cols:
                raise ValueError(f"table {table!r} has no column {column!r}")
            if con.execute("SELECT count(*) FROM dpsql.protected_tables WHERE lower(table_name) = lower(?)",
                           [table]).fetchone()[0] == 0:
                raise ValueError(f"table {table!r} is not protected (protect it first)")
            bad = con.execute(f"SELECT count(*) FROM unnest(CAST(? AS VARCHAR[])) u(v) "
                              f"WHERE TRY_CAST(v AS {cols[column]}) IS NULL", [text]).fetchone()[0]
            if bad:
                raise ValueError(f"{bad} key(s) do not convert to the column's type {cols[column]}")
            con.execute("DELETE FROM dpsql.public_keys WHERE lower(table_name) = lower(?) AND column_name = ?",
                        [table, column])
            con.executemany("INSERT INTO dpsql.public_keys VALUES (?, ?, ?, ?)",
                            [[table, column, i, t] for i, t in enumerate(text)])

    def unprotect(self, table: str) -> None:
        """Forget every declaration about ``table`` (guarded sessions then refuse it)."""
        with self._write() as con:
            for t in ("protected_tables", "public_tables", "public_keys"):
                con.execute(f"DELETE FROM dpsql.{t} WHERE lower(table_name) = lower(?)", [table])

    def plain_aggregates(self, principal: str, epsilon: float | Decimal | str | None) -> None:
        """Opt ``principal`` in (or, with ``epsilon=None``, out) of plain aggregates (issue 19): in its queries,
        ``COUNT(*)``, ``COUNT(x)``, ``SUM(x)`` and ``AVG(x)`` over protected rows are rewritten to
        ``dp_count_star``/``dp_count``/``dp_sum``/``dp_mean`` with ``epsilon := epsilon`` per call and
        charged like those (times the contribution bounds), so a BI tool's default metrics work.  Without
        it they are refused (DPSQL-E021).  A policy change: guarded sessions on the database must be closed."""
        if not isinstance(principal, str) or not _NAME.match(principal):
            raise ValueError("principal must be a plain name (letters, digits, underscore)")
        text = None
        if epsilon is not None:
            from .core.registry import ParameterError, privacy_cost

            value = to_decimal(epsilon, "epsilon")
            for aggregate in ("count", "sum", "mean"):  # the range the dp_* calls will accept
                try:
                    privacy_cost(aggregate, None, epsilon=float(value))
                except ParameterError as e:
                    raise ValueError(str(e)) from None
            text = format(clean(value), "f")
        with self._write() as con:
            con.execute("DELETE FROM dpsql.plain_aggregates WHERE principal = ?", [principal])
            if text is not None:
                con.execute("INSERT INTO dpsql.plain_aggregates VALUES (?, ?)", [principal, text])

    def plain_aggregate_defaults(self) -> dict[str, Decimal]:
        """``{principal: epsilon per call}`` of the principals opted in to plain aggregates."""
        with self._read() as con:
            if not policy.has_policy_table(con, "plain_aggregates"):
                return {}
            rows = con.execute("SELECT principal, epsilon FROM dpsql.plain_aggregates ORDER BY 1").fetchall()
        return {p: Decimal(e) for p, e in rows}

    # ------------------------------------------------------------------ budgets

    def grant(self, principal: str, epsilon: float | Decimal | str | None = None,
              rho: float | Decimal | str | None = None, delta: float | Decimal | str = 0,
              per_query_cap: float | Decimal | str | None = None,
              delta_per_query: float | Decimal | str | None = None) -> Budget:
        """Set ``principal``'s total budget: ``epsilon`` (pure DP) or ``rho`` (zCDP), plus an optional
        ``delta`` budget for (ε, δ) features (DP partition selection of undeclared group keys), the δ one
        query may use (``delta_per_query``, default all that remains) and a ``per_query_cap`` (in ε for
        pure budgets, ρ for zCDP).

        Calling it again sets a new limit (recorded in the ledger; spending so far is kept)."""
        if not isinstance(principal, str) or not _NAME.match(principal):
            raise ValueError("principal must be a plain name (letters, digits, underscore)")
        if (epsilon is None) == (rho is None):
            raise ValueError("give exactly one of epsilon= (pure DP) or rho= (zCDP)")
        accounting = "pure" if epsilon is not None else "zcdp"
        limit = to_decimal(epsilon if epsilon is not None else rho, "epsilon" if epsilon is not None else "rho")
        with self._read() as con:
            row = None
            if policy.dataset_id(con) is not None:
                row = con.execute("SELECT accounting, enabled FROM dpsql.principals WHERE principal = ?",
                                  [principal]).fetchone()
        if row is not None and row[0] != accounting:
            raise ValueError(f"principal {principal!r} already has a {row[0]!r} budget")
        if row is not None and row[1]:  # known and enabled: only the ledger changes (sessions may stay open)
            return self.ledger(create=True).grant(principal, accounting, limit, delta, per_query_cap, delta_per_query)
        with self._write() as con:
            budget = self.ledger(create=True).grant(principal, accounting, limit, delta, per_query_cap, delta_per_query)
            con.execute("INSERT OR REPLACE INTO dpsql.principals (principal, accounting, enabled) "
                        "VALUES (?, ?, true)", [principal, accounting])
        return budget

    def revoke(self, principal: str) -> None:
        """Stop ``principal`` from opening new sessions (the ledger keeps the spending)."""
        with self._write() as con:
            con.execute("UPDATE dpsql.principals SET enabled = false WHERE principal = ?", [principal])

    def global_limit(self, epsilon: float | Decimal | str | None = None, rho: float | Decimal | str | None = None,
                     delta: float | Decimal | str = 0) -> None:
        """Set a dataset-wide limit that all principals' charges together may not exceed (against
        colluding analysts or one person with several accounts)."""
        if (epsilon is None) == (rho is None):
            raise ValueError("give exactly one of epsilon= or rho=")
        accounting = "pure" if epsilon is not None else "zcdp"
        self.ledger(create=True).set_global_limit(accounting, epsilon if epsilon is not None else rho, delta)

    def budgets(self) -> list[Budget]:
        """Every principal's budget (limit, spent, remaining), by name."""
        if not ledger_path(self.database).exists():
            return []
        return self.ledger().budgets()

    def charges(self, principal: str | None = None) -> list[Entry]:
        """The charge log (optionally one principal's), oldest first."""
        if not ledger_path(self.database).exists():
            return []
        return self.ledger().entries(principal, kind="charge")

    def log(self, principal: str | None = None) -> list[Entry]:
        """Charges, replays and data-version declarations (optionally one principal's), oldest first."""
        if not ledger_path(self.database).exists():
            return []
        kinds = ("charge", "replay", "data_version")
        return [e for e in self.ledger().entries(principal) if e.kind in kinds]

    def data_version(self) -> int:
        """The declared version of the data (1 until the first :meth:`bump_data_version`)."""
        if not ledger_path(self.database).exists():
            return 1
        return self.ledger().data_version()

    def bump_data_version(self, note: str | None = None) -> int:
        """Declare that the data changed (call it after loading new data): guarded sessions stop replaying
        earlier releases, so the same query is a new release, charged again.  Returns the new version.

        dpsql cannot notice new data by itself (that would make the replay decision depend on the data);
        without a bump, replays keep returning answers computed on the old data (still private, stale)."""
        return self.ledger(create=True).bump_data_version(note)

    def verify(self) -> None:
        """Check the ledger's hash chain and budgets (DPSQL-E090 on mismatch)."""
        self.ledger().verify()

    def catalog(self, principal: str | None = None) -> Catalog:
        """The guard's catalog, as a session of ``principal`` would see it (default: pure DP, no cap)."""
        with self._read() as con:
            tables = policy.load_tables(con)
            plain = None if principal is None else policy.plain_aggregate_epsilon(con, principal)
        if principal is None:
            return policy.build_catalog(tables)
        b = self.ledger().budget(principal)
        return policy.build_catalog(tables, b.accounting, b.query_delta(), b.per_query_cap, plain)

    def __repr__(self) -> str:
        return f"<dpsql.Admin on {str(self.database)!r}>"


def _bound(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_BOUND:
        raise ValueError(f"{what} must be an integer between 1 and {_MAX_BOUND}")
    return value


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    if not isinstance(table, str) or not _NAME.match(table) or table.lower() == "dpsql":
        raise ValueError("table must be a plain table name in the main schema")
    cols = policy.table_columns(con, table)
    if not cols:
        raise ValueError(f"no table {table!r} in the main schema")
    return cols


def admin(database: str | os.PathLike[str], **kwargs: Any) -> Admin:
    """Open the administration handle of ``database`` (a DuckDB file)."""
    return Admin(database, **kwargs)
