"""The executor: the only DuckDB connection that runs analyst-derived SQL, hardened.

The analyst never holds it; :class:`dpsql.session.Session` keeps it private.  Each executor is its own
in-memory DuckDB instance with the data file ``ATTACH``-ed ``READ_ONLY``, so its locked configuration
cannot touch any other connection.  Before any query runs:

* ``dpsql.install(con, guarded=True)`` registers the dp_* macros (before ``USE``, so they live in the in-memory
  catalog, which stays on the search path after the data catalog); ``guarded``: a dp_* value of a non-numeric
  type fails when the query is bound (uncharged; the session then names the value and its type, E060, by
  binding zero-row probes: :meth:`Executor.bind_types`), not as it runs (trusted mode's run-time E060);
* ``_dpsql_rand()`` is registered: a random BIGINT per row from the OS CSPRNG
  (``dpsql.noise.system_rng().words``), used by the guard's rewrite to choose which rows of a unit to keep;
* extension autoload/autoinstall and Python replacement scans are off from the start,
  ``error_on_division_by_zero`` is off (division by zero gives NULL, never an error), and
  ``enable_external_access=false`` then ``lock_configuration=true`` close files, ``ATTACH``, ``SET``.

The ledger is never attached here.  Any failure while a charged query runs becomes the generic,
charged DPSQL-E080, whose text holds no data (DuckDB's own messages quote values, e.g. failed casts).

Summary plans (issue 17): when the guard's rewritten SQL is a query :func:`dpsql.plans.compile_query` owns
(the grouped default aggregates), :meth:`Executor.run` answers it with :func:`dpsql.plans.run` (native passes
over per-group summaries, the list route's law) instead of the macros' ``list(x)`` route; anything else runs as
prepared.  The route is a function of the SQL text and the schema (decided in :meth:`Executor.prepare`, before
the charge).  The plans' input is materialized once per query (:func:`dpsql.plans.materialized`, a TEMP table
in this in-memory instance, dropped afterwards, also on failure) because the rewritten FROM draws
``_dpsql_rand()``: every pass must see the rows ONE evaluation chose, as the macro route's single evaluation
does.  So the rows the mechanism reads have the macro route's law, the plans release the list route's law on
them, and the guard's cost stands unchanged.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from . import noise
from .errors import PrivacyError
from .sqltext import quote_ident

__all__ = ["Executor", "Prepared", "HARDENING"]

# set at connect time (instance config), then checked by tests
_CONNECT_CONFIG = {
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "python_enable_replacements": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}
# set after the data file is attached and the UDFs are registered, in this order (lock last)
HARDENING = (
    ("error_on_division_by_zero", "false"),
    ("enable_external_access", "false"),
    ("lock_configuration", "true"),
)
_RESERVED_ALIASES = {"memory", "system", "temp", "main"}


def _rand_words(x: pa.Array) -> pa.Array:
    """Arrow UDF body of ``_dpsql_rand()``: one CSPRNG word per row of the chunk, as signed BIGINT."""
    return pa.array(noise.system_rng().words(len(x)).view(np.int64))


class Prepared:
    """A bound (not executed) query: its output columns and types are known, no data has been read.
    ``summary``: its summary plan (:func:`dpsql.plans.compile_query`) when the executor runs it through the
    plans, else None (the prepared relation runs)."""

    def __init__(self, relation: duckdb.DuckDBPyRelation, summary: Any = None) -> None:
        self._relation = relation
        self.columns: list[str] = list(relation.columns)
        self.types: list[str] = [str(t) for t in relation.types]
        self.summary = summary


class _Checked:
    """The connection as the summary plans see it.  DuckDB's ``interrupt()`` stops the statement running and is
    lost when none runs (the plans compute in Python between passes), so a stop (timeout, cancel) also sets
    ``stop``, and every later statement the plans start (``sql``: all their passes) raises instead of running.
    ``execute`` (the materialized input's create and drop) and the rest pass through unchecked."""

    def __init__(self, con: duckdb.DuckDBPyConnection, stop: threading.Event) -> None:
        self._con, self._stop = con, stop

    def sql(self, *args: Any, **kwargs: Any) -> duckdb.DuckDBPyRelation:
        if self._stop.is_set():
            raise duckdb.InterruptException("the query was stopped")
        return self._con.sql(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


class Executor:
    """A hardened, read-only DuckDB connection to one data file.

    ``install`` replaces :func:`dpsql.install` (tests without the binding pass a stand-in).  ``summary_plans``:
    run the queries :func:`dpsql.plans.compile_query` owns through the plans (default: with the real binding
    only, as the plans implement its dp_* functions, not a stand-in's).  ``rng``: a seeded generator for the
    plans, for tests only (production noise comes from the OS CSPRNG)."""

    def __init__(self, database: str | Path, *, install: Callable[[duckdb.DuckDBPyConnection], Any] | None = None,
                 timeout: float | None = None, summary_plans: bool | None = None, rng: Any = None) -> None:
        path = Path(database)
        if not path.is_file():
            raise FileNotFoundError(f"no database file {str(path)!r}")
        self.timeout = timeout
        self.summary_plans = install is None if summary_plans is None else bool(summary_plans)
        self._rng = rng
        self._lock = threading.Lock()
        self._stop = threading.Event()
        con = duckdb.connect(":memory:", config=dict(_CONNECT_CONFIG))
        try:
            stem = path.name.split(".", 1)[0] or "data"
            self.alias = "data" if stem.lower() in _RESERVED_ALIASES or not stem.isidentifier() else stem
            con.execute(f"ATTACH {_literal(str(path))} AS {quote_ident(self.alias)} (READ_ONLY)")
            (install or _default_install())(con)
            con.create_function("_dpsql_rand_words", _rand_words, ["INTEGER"], "BIGINT", type="arrow",
                                side_effects=True, null_handling="special")
            con.execute("CREATE OR REPLACE TEMP MACRO _dpsql_rand() AS _dpsql_rand_words(0)")
            con.execute(f"USE {quote_ident(self.alias)}")
            con.execute(f"SET search_path = {_literal(self.alias + '.main,memory.main,temp.main')}")
            for name, value in HARDENING:
                con.execute(f"SET {name} = {value}")
        except BaseException:
            con.close()
            raise
        self._con: duckdb.DuckDBPyConnection | None = con

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection (never handed to an analyst); callers other than this class use :meth:`call`."""
        if self._con is None:
            raise PrivacyError("DPSQL-E090", "the session is closed")
        return self._con

    def call(self, fn: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        """``fn(con)`` under the executor's lock: dpsql's own metadata reads, one caller at a time."""
        with self._lock:
            return fn(self.con)

    def prepare(self, sql: str) -> Prepared:
        """Bind ``sql`` without running it.  Binding reads the schema only, so a failure here depends on
        the query text and the schema, never on the data: it is refused uncharged (DPSQL-E001)."""
        with self._lock:
            try:
                relation = self.con.sql(sql)
            except PrivacyError:
                raise
            except Exception:
                raise PrivacyError("DPSQL-E001", "the checked query could not be bound by DuckDB") from None
            prepared = Prepared(relation)
        prepared.summary = self._summary(sql, prepared) if self.summary_plans else None
        return prepared

    @staticmethod
    def _summary(sql: str, prepared: Prepared) -> Any:
        """The summary plan of ``sql`` if the plans answer it with the prepared relation's columns (their dp
        columns DOUBLE, as the macros'), else None.  A function of the text and the schema only."""
        from . import plans

        try:
            summary = plans.compile_query(sql)
        except Exception:  # noqa: BLE001 - e.g. a parameter the plans refuse: the macros answer as before
            return None
        if summary is None or len(summary.columns) != len(prepared.columns):
            return None
        if any(kind == "dp" and typ != "DOUBLE" for (kind, _, _), typ in zip(summary.columns, prepared.types,
                                                                               strict=True)):
            return None
        if any(kind == "key" and plans._BIT.search(typ) for (kind, _, _), typ in zip(summary.columns, prepared.types,
                                                                                     strict=True)):
            return None  # a BIT key does not survive the passes' Arrow round trip (plans._types_ok)
        return summary

    def bind_types(self, sql: str) -> list[str] | None:
        """The result types of ``sql`` as DuckDB binds it (schema only: nothing runs, no row is read), or None
        if it does not bind; for the session's diagnosis of a checked query that did not bind."""
        with self._lock:
            try:
                return [str(t) for t in self.con.sql(sql).types]
            except Exception:  # noqa: BLE001 - a probe that does not bind says nothing
                return None

    def empty(self, prepared: Prepared) -> pa.Table:
        """An empty table with the prepared query's columns and types, without running that query: the
        answer to a zero-row probe.  Only typed NULL constants are evaluated (no relation is named)."""
        with self._lock:
            try:
                return self._empty(prepared)
            except Exception:
                raise PrivacyError("DPSQL-E001", "the query's result types could not be described") from None

    def _empty(self, prepared: Prepared) -> pa.Table:
        items = ", ".join(f"CAST(NULL AS {typ}) AS c{i}" for i, typ in enumerate(prepared.types))
        table = self.con.sql(f"SELECT {items or '1 AS c0'} LIMIT 0").to_arrow_table()
        if not prepared.types:
            return pa.table({})
        return table.rename_columns(prepared.columns)

    def run(self, prepared: Prepared, cost_text: str = "") -> pa.Table:
        """Execute a prepared query and return its rows.  Any failure is the generic DPSQL-E080.

        With a summary plan (:meth:`prepare`) the rows come from :func:`dpsql.plans.run` over the plan's
        input materialized once (module docstring), with the prepared relation's column names and types.  A
        timeout or :meth:`interrupt` stops the statement running, or the plans' next one."""
        with self._lock:
            con = self.con
            self._stop.clear()
            timer = None
            if self.timeout is not None:
                timer = threading.Timer(self.timeout, self._interrupt, (con,))
                timer.daemon = True
                timer.start()
            try:
                if prepared.summary is not None:
                    return self._run_summary(con, prepared)
                return prepared._relation.to_arrow_table()
            except BaseException:
                raise PrivacyError("DPSQL-E080", "execution failed after the query was charged"
                                   + (f" ({cost_text})" if cost_text else "") + "; no result is released") from None
            finally:
                if timer is not None:
                    timer.cancel()

    def _run_summary(self, con: duckdb.DuckDBPyConnection, prepared: Prepared) -> pa.Table:
        from . import plans

        table = plans.run(_Checked(con, self._stop), prepared.summary, self._rng, materialize=True)
        return table.rename_columns(prepared.columns).cast(self._empty(prepared).schema)

    def _interrupt(self, con: duckdb.DuckDBPyConnection) -> None:
        self._stop.set()
        con.interrupt()

    def interrupt(self) -> None:
        """Stop the query running on this connection, from another thread (it then fails as E080)."""
        con = self._con
        if con is not None:
            self._interrupt(con)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def _default_install() -> Callable[[duckdb.DuckDBPyConnection], Any]:
    from .duck import install  # the binding: dp_* macros and their UDFs

    return functools.partial(install, guarded=True)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
