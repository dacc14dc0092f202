"""Guarded sessions: the one place that runs a query for an untrusted analyst.

``dpsql.connect("hospital.duckdb", analyst="alice")`` returns a :class:`Session`.  For each query:

1. the policy metadata is read (``dpsql`` schema, through the executor's read-only connection) and
   turned into the guard's catalog for this analyst's budget;
2. the guard checks, rewrites and costs the query (``dpsql.guard.plan``); a refusal raises
   :class:`~dpsql.errors.PrivacyError` before anything is read or charged;
3. DuckDB binds the rewritten SQL without running it (schema only; a failure is refused uncharged);
4. the ledger charges the cost, durably (DPSQL-E070 when the budget would be exceeded);
5. the executor runs the SQL; a failure from here on is the generic, charged DPSQL-E080;
6. the charge is marked released and the rows are returned with the amount charged and remaining.

The analyst never holds a DuckDB connection.  In-process use (mode M1 of the threat model) still
trusts the analyst not to reach into the process; only a gateway (the PostgreSQL-wire server run as
another OS user) resists a malicious one.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import policy
from .errors import PrivacyError
from .executor import Executor
from .ledger import Budget, Ledger, clean, ledger_path

if TYPE_CHECKING:
    from .guard import Plan
    from .guard.catalog import Catalog, TableInfo

__all__ = ["Session", "Result", "Budget", "connect"]

_clock = time.monotonic  # module-level so that tests can replace them without touching the time module
_sleep = time.sleep

# Test hook, called after a charge has committed and before the query runs (the kill -9 test uses it).
_after_charge: Callable[[], None] | None = None


def _default_planner(sql: str, catalog: Catalog) -> Plan:
    from .guard import plan

    return plan(sql, catalog)


@dataclass(frozen=True)
class Result:
    """The released rows of one query and what it cost.

    ``charged`` and ``remaining`` are in ε for 'pure' accounting and in ρ for 'zcdp'."""

    table: pa.Table
    charged: Decimal
    remaining: Decimal
    accounting: str
    delta_charged: Decimal = Decimal(0)
    mechanisms: list[dict[str, Any]] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        cols = [c.to_pylist() for c in self.table.columns]
        return list(zip(*cols, strict=True)) if cols else []

    def __repr__(self) -> str:
        return (f"Result({self.table.num_rows} rows, columns={self.columns}, charged={self.charged}, "
                f"remaining={self.remaining}, accounting={self.accounting!r})")


class Session:
    """A guarded session of one analyst on one database.  Use :func:`connect`."""

    def __init__(self, database: str | Path, analyst: str, *, ledger_timeout: float = 30.0,
                 timeout: float | None = None, latency_quantum: float | None = None,
                 install: Callable[..., Any] | None = None) -> None:
        if not isinstance(analyst, str) or not analyst:
            raise ValueError("analyst must be a non-empty name")
        if latency_quantum is not None and not latency_quantum > 0:
            raise ValueError("latency_quantum must be a positive number of seconds")
        self.latency_quantum = latency_quantum
        self.database = Path(database)
        self.analyst = analyst
        self._planner = _default_planner
        self._lock = threading.Lock()
        self._policy: dict[str, TableInfo] | None = None
        self._executor = Executor(self.database, install=install, timeout=timeout)
        try:
            con, alias = self._executor.con, self._executor.alias
            dataset = policy.dataset_id(con, alias)
            if dataset is None:
                raise PrivacyError("DPSQL-E090", "the database has no dpsql policy (protect a table with dpsql.admin)")
            row = con.execute(f"SELECT enabled FROM {policy.quote_ident(alias)}.dpsql.principals "
                              "WHERE principal = ?", [analyst]).fetchone()
            if row is None or not row[0]:
                raise PrivacyError("DPSQL-E070", f"analyst {analyst!r} has no budget on this database")
            self._ledger = Ledger(ledger_path(self.database), dataset, lock_timeout=ledger_timeout)
            self.session_id, self._budget = self._ledger.open_session(analyst)
        except BaseException:
            self._executor.close()
            raise
        self._closed = False

    # ------------------------------------------------------------------ analyst API

    @property
    def accounting(self) -> str:
        """'pure' (budget in ε) or 'zcdp' (budget in ρ)."""
        return self._budget.accounting

    def catalog(self) -> Catalog:
        """The guard's view of the database for this analyst (from dpsql metadata only)."""
        b = self._budget
        return policy.build_catalog(self._tables(), b.accounting, b.query_delta(), b.per_query_cap)

    def tables(self) -> list[TableInfo]:
        """The protected and public tables this analyst may query, from dpsql's metadata."""
        return list(self._tables().values())

    def budget(self) -> Budget:
        """This analyst's budget, read from the ledger."""
        self._check_open()
        b = self._ledger.budget(self.analyst)
        with self._lock:
            self._budget = b
        return b

    def describe(self, sql: str) -> list[tuple[str, str]]:
        """``[(name, type)]`` of the query's result columns, without running or charging it.

        Refuses exactly like :meth:`sql` (same codes), since it runs the same guard."""
        plan, prepared = self._check(sql)
        return list(zip(self._names(plan, prepared.columns), prepared.types, strict=True))

    def sql(self, sql: str) -> Result:
        """Check, charge, run and release one query.

        With a latency quantum, every answer after the guard accepted the query (a release, or the charged
        E080 of a timeout, a cancel or a failure) leaves at a whole number of quanta after this call
        began: the guard, the charge and the run are all inside the padded time.  Refusals before the
        charge depend only on the query text and are not padded."""
        started = _clock()
        plan, prepared = self._check(sql)
        cost, delta = clean(Decimal(plan.cost)), clean(Decimal(plan.delta))
        seq = None
        if cost != 0 or delta != 0:
            charge = self._ledger.charge(
                self.analyst, cost, delta, accounting=self._budget.accounting,
                query_sha256=hashlib.sha256(plan.sql.encode()).hexdigest(),
                mechanisms=plan.mechanisms, session_id=self.session_id)
            seq, cost, delta, budget = charge.seq, charge.cost, charge.delta, charge.budget
            with self._lock:
                self._budget = budget
        else:
            budget = self._budget
        if _after_charge is not None:
            _after_charge()
        unit = "epsilon" if budget.accounting == "pure" else "rho"
        try:
            table = self._executor.run(prepared, f"charged {cost} {unit}")
        except BaseException:
            if seq is not None:
                with contextlib.suppress(Exception):
                    self._ledger.finish(seq, released=False)
            self._pad(started)
            raise
        self._pad(started)
        if seq is not None:
            with contextlib.suppress(PrivacyError):  # the release stands even if the status update fails
                self._ledger.finish(seq, released=True, defer=True)  # written with the next charge or close
        names = self._names(plan, table.column_names)
        if names != table.column_names:
            table = table.rename_columns(names)
        return Result(table, cost, budget.remaining, budget.accounting, delta, list(plan.mechanisms))

    def interrupt(self) -> None:
        """Stop this session's running query from another thread (a client's CancelRequest): it ends as
        the charged DPSQL-E080, exactly like a timeout; a query not yet charged is not affected."""
        if not getattr(self, "_closed", True):
            self._executor.interrupt()

    def close(self) -> None:
        """End the session (idempotent)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._executor.close()
        with contextlib.suppress(PrivacyError):
            self._ledger.close_session(self.session_id)  # also writes deferred release marks

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<dpsql.Session {self.analyst!r} on {str(self.database)!r} ({state})>"

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise PrivacyError("DPSQL-E090", "the session is closed")

    def _tables(self) -> dict[str, TableInfo]:
        """The policy, read once: while this session has the data file attached, DuckDB refuses any
        writer (the admin included), so the policy cannot change under it."""
        self._check_open()
        if self._policy is None:
            alias = self._executor.alias

            def measure(table: str, column: str) -> int:  # on the guard's first question, on the executor
                return self._executor.call(lambda con: policy.max_multiplicity(con, table, column, alias))

            self._policy = self._executor.call(lambda con: policy.load_tables(con, alias, measure))
        return self._policy

    def _check(self, sql: str) -> tuple[Plan, Any]:
        if not isinstance(sql, str):
            raise PrivacyError("DPSQL-E001", "the query must be SQL text")
        catalog = self.catalog()
        try:
            plan = self._planner(sql, catalog)
        except PrivacyError:
            raise
        except Exception as exc:  # a guard bug must fail closed, uncharged
            raise PrivacyError("DPSQL-E001", "the query could not be checked") from exc
        return plan, self._executor.prepare(plan.sql)

    def _pad(self, started: float) -> None:
        """Sleep until the time since ``started`` is a whole number of latency quanta (if one is set), so
        that the response time reveals less about the data (a residual risk, not a guarantee)."""
        if self.latency_quantum is None:
            return
        q = self.latency_quantum
        _sleep(q - (_clock() - started) % q)

    @staticmethod
    def _names(plan: Plan, actual: list[str]) -> list[str]:
        wanted = list(getattr(plan, "output_columns", None) or [])
        return wanted if len(wanted) == len(actual) else list(actual)


def connect(database: str | Path, analyst: str, **kwargs: Any) -> Session:
    """Open a guarded session: every query is checked by the guard and charged to ``analyst``'s budget.

    Keyword arguments: ``timeout`` (seconds per query; a timeout is the charged DPSQL-E080),
    ``ledger_timeout`` (seconds to wait for the ledger lock before DPSQL-E071), ``latency_quantum``
    (seconds: execution time is padded to a multiple of it, blunting timing channels)."""
    return Session(database, analyst, **kwargs)
