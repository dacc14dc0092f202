"""Guarded sessions: the one place that runs a query for an untrusted analyst.

``dpsql.connect("hospital.duckdb", analyst="alice")`` returns a :class:`Session`.  For each query:

1. the policy metadata is read (``dpsql`` schema, through the executor's read-only connection) and
   turned into the guard's catalog for this analyst's budget;
2. the guard checks, rewrites and costs the query (``dpsql.guard.plan``); a refusal raises
   :class:`~dpsql.errors.PrivacyError` before anything is read or charged;
3. DuckDB binds the rewritten SQL without running it (schema only; a failure is refused uncharged);
4. the ledger charges the cost, durably (DPSQL-E070 when the budget would be exceeded);
5. the executor runs the SQL (through the summary plans when :func:`dpsql.plans.compile_query` owns it,
   :meth:`dpsql.executor.Executor.run`); a failure from here on is the generic, charged DPSQL-E080;
6. the charge is marked released and the rows are returned with the amount charged and remaining.

Consistent answers (issue 19): step 4 first looks for a stored release of the same checked query by the
same analyst on the same data version; if there is one, it is returned again (same rows, same noise) at
no cost, recorded as a zero-cost replay entry of the ledger's hash chain, and nothing runs.  Released
rows are stored (in the ledger file) after step 6.  See :func:`release_key` and :meth:`Session.sql`.

BI tools (issue 19): ``dpsql_budget()`` and ``dpsql_last_charge()`` in a FROM clause are replaced by the
analyst's budget and latest charge as literal rows before step 2 (:mod:`dpsql.budget_views`), so any
SELECT may read them; a zero-row probe (the guard's ``schema_only`` plan) stops after step 3 with an empty
table of its columns: nothing is charged, nothing runs.

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

from . import budget_views, policy
from .errors import PrivacyError
from .executor import Executor
from .ledger import Budget, Ledger, clean, ledger_path
from .sqltext import quote_ident

if TYPE_CHECKING:
    from .guard import Plan
    from .guard.catalog import Catalog, TableInfo

__all__ = ["Session", "Result", "Budget", "connect", "release_key", "normalize_sql"]

_clock = time.monotonic  # module-level so that tests can replace them without touching the time module
_sleep = time.sleep

# Test hook, called after a charge has committed and before the query runs (the kill -9 test uses it).
_after_charge: Callable[[], None] | None = None


def _default_planner(sql: str, catalog: Catalog) -> Plan:
    from .guard import plan

    return plan(sql, catalog)


def normalize_sql(sql: str) -> str:
    """The checked SQL as sqlglot regenerates it (DuckDB dialect) without comments: whitespace, comments
    and the letter case of keywords and function names no longer matter; identifiers, aliases and literals
    stay exactly as written.  Text that does not parse as one statement is only stripped."""
    import sqlglot

    try:
        trees = sqlglot.parse(sql, read="duckdb")
        if len(trees) == 1 and trees[0] is not None:
            return trees[0].sql(dialect="duckdb", comments=False)
    except Exception:  # noqa: BLE001 - any parse failure: the text itself is the key
        pass
    return sql.strip()


def release_key(sql: str) -> str:
    """The key a release is stored and replayed under: sha256 of :func:`normalize_sql` of the guard's
    checked, rewritten SQL.  A function of the text alone (with the analyst and the data version, it is
    all that decides a replay)."""
    return hashlib.sha256(("dpsql-release-v1\x1f" + normalize_sql(sql)).encode()).hexdigest()


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@dataclass(frozen=True)
class Result:
    """The released rows of one query and what it cost.

    ``charged`` and ``remaining`` are in ε for 'pure' accounting and in ρ for 'zcdp'.  ``seq`` is the
    ledger entry of this answer (its charge, or its replay) and ``replayed_from`` the charge whose stored
    release was replayed (then ``charged`` is 0), None for a fresh release."""

    table: pa.Table
    charged: Decimal
    remaining: Decimal
    accounting: str
    delta_charged: Decimal = Decimal(0)
    mechanisms: list[dict[str, Any]] = field(default_factory=list)
    seq: int | None = None
    replayed_from: int | None = None

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        cols = [c.to_pylist() for c in self.table.columns]
        return list(zip(*cols, strict=True)) if cols else []

    def __repr__(self) -> str:
        replay = "" if self.replayed_from is None else f", replayed_from={self.replayed_from}"
        return (f"Result({self.table.num_rows} rows, columns={self.columns}, charged={self.charged}, "
                f"remaining={self.remaining}, accounting={self.accounting!r}{replay})")


class Session:
    """A guarded session of one analyst on one database.  Use :func:`connect`.

    ``replay`` (default True): a query already released to this analyst on the current data version is
    answered again from the stored release, at no cost; False runs and charges every query afresh (fresh
    noise), and the new release then replaces the stored one.  It may be changed on an open session."""

    def __init__(self, database: str | Path, analyst: str, *, ledger_timeout: float = 30.0,
                 timeout: float | None = None, latency_quantum: float | None = None,
                 install: Callable[..., Any] | None = None, replay: bool = True) -> None:
        if not isinstance(analyst, str) or not analyst:
            raise ValueError("analyst must be a non-empty name")
        if latency_quantum is not None and not latency_quantum > 0:
            raise ValueError("latency_quantum must be a positive number of seconds")
        self.latency_quantum = latency_quantum
        self.replay = bool(replay)
        self.database = Path(database)
        self.analyst = analyst
        self._planner = _default_planner
        self._lock = threading.Lock()
        self._policy: dict[str, TableInfo] | None = None
        self._plain: str | None = None  # the owner's opt-in epsilon for plain aggregates, read with the policy
        self._executor = Executor(self.database, install=install, timeout=timeout)
        try:
            con, alias = self._executor.con, self._executor.alias
            dataset = policy.dataset_id(con, alias)
            if dataset is None:
                raise PrivacyError("DPSQL-E090", "the database has no dpsql policy (protect a table with dpsql.admin)")
            row = con.execute(f"SELECT enabled FROM {quote_ident(alias)}.dpsql.principals "
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
        tables = self._tables()
        b = self._budget
        return policy.build_catalog(tables, b.accounting, b.query_delta(), b.per_query_cap, self._plain)

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
        """Check, charge, run and release one query, or replay its stored release.

        Replay: if this analyst already had the same checked query (:func:`release_key` of the guard's
        rewritten SQL) released on the current data version, and the release is still stored, the stored
        rows are returned (same rows, same noise), nothing runs, and the ledger records a zero-cost replay
        entry naming the original charge (``Result.replayed_from``).  This costs no privacy: a replay is
        post-processing of a release the analyst already received, whose charge was paid then.  The
        decision to replay depends only on the analyst, the query text, the declared data version and
        which releases are still stored (a function of earlier released outputs), never on data values,
        so being charged or not reveals nothing new.  Refusals, timeouts and failures are never stored;
        queries that cost nothing (public tables only) are neither stored nor replayed.

        With a latency quantum, every answer after the guard accepted the query (a release, a replay, or
        the charged E080 of a timeout, a cancel or a failure) leaves at a whole number of quanta after this
        call began: the guard, the charge and the run are all inside the padded time.  Refusals before the
        charge depend only on the query text and are not padded."""
        started = _clock()
        plan, prepared = self._check(sql)
        if getattr(plan, "schema_only", False):  # a zero-row probe: its columns, from the schema; nothing runs
            table = self._executor.empty(prepared)
            names = self._names(plan, table.column_names)
            table = table.rename_columns(names) if names != table.column_names else table
            return Result(table, Decimal(0), self._budget.remaining, self._budget.accounting)
        cost, delta = clean(Decimal(plan.cost)), clean(Decimal(plan.delta))
        seq = key = None
        version = 1
        if cost != 0 or delta != 0:
            key = release_key(plan.sql)
            charge = self._ledger.charge(
                self.analyst, cost, delta, accounting=self._budget.accounting,
                query_sha256=hashlib.sha256(plan.sql.encode()).hexdigest(),
                mechanisms=plan.mechanisms, session_id=self.session_id, release_key=key if self.replay else None)
            seq, cost, delta, budget = charge.seq, charge.cost, charge.delta, charge.budget
            version = charge.data_version
            with self._lock:
                self._budget = budget
            if charge.replayed_from is not None and charge.stored is not None:
                try:
                    table = pa.ipc.open_stream(charge.stored).read_all()
                except (pa.ArrowException, ValueError):
                    raise PrivacyError("DPSQL-E090", "the stored release could not be read; nothing was "
                                       "charged (ask with replay off for a fresh release)") from None
                self._pad(started)
                return Result(table, Decimal(0), budget.remaining, budget.accounting, Decimal(0),
                              list(plan.mechanisms), seq, charge.replayed_from)
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
        names = self._names(plan, table.column_names)
        if names != table.column_names:
            table = table.rename_columns(names)
        if seq is not None:
            with contextlib.suppress(PrivacyError):  # the release stands even if the status update fails
                self._ledger.finish(seq, released=True, defer=True)  # written with the store, next charge or close
            if key is not None:
                with contextlib.suppress(Exception):  # not stored: the next ask is simply charged again
                    self._ledger.store_release(self.analyst, seq, key, version, _ipc(table))
        self._pad(started)
        return Result(table, cost, budget.remaining, budget.accounting, delta, list(plan.mechanisms), seq)

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

            self._plain = self._executor.call(lambda con: policy.plain_aggregate_epsilon(con, self.analyst, alias))
            self._policy = self._executor.call(lambda con: policy.load_tables(con, alias, measure))
        return self._policy

    def _check(self, sql: str) -> tuple[Plan, Any]:
        if not isinstance(sql, str):
            raise PrivacyError("DPSQL-E001", "the query must be SQL text")
        catalog = self.catalog()
        sql = budget_views.substitute(sql, self.budget, lambda: self._ledger.last_entry(self.analyst))
        try:
            plan = self._planner(sql, catalog)
        except PrivacyError:
            raise
        except Exception as exc:  # a guard bug must fail closed, uncharged
            raise PrivacyError("DPSQL-E001", "the query could not be checked") from exc
        try:
            return plan, self._executor.prepare(plan.sql)
        except PrivacyError as exc:
            if exc.code == "DPSQL-E001":
                self._explain_bind_failure(sql, catalog)
            raise

    def _explain_bind_failure(self, sql: str, catalog: Catalog) -> None:
        """Raise the schema-level cause of a checked query that DuckDB did not bind, if it is a dp_* value of a
        non-numeric type (DPSQL-E060, issue 14; :mod:`dpsql.guard.value_types`): each probe is only bound,
        so the answer depends on the query and the schema, and nothing has been charged."""
        from .guard.value_types import numeric, type_error, value_probes

        for probe in value_probes(sql, catalog):
            types = self._executor.bind_types(probe.sql)
            if types and len(types) == 1 and not numeric(types[0]):
                raise type_error(probe.function, probe.text, types[0]) from None

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
    (seconds: execution time is padded to a multiple of it, blunting timing channels), ``replay``
    (default True: a query already released to this analyst on this data version is answered again
    from the stored release at no cost; False: fresh noise, charged every time)."""
    return Session(database, analyst, **kwargs)
