"""Guarded dp_* SQL on a user's Apache Spark session (issue 18): ``pip install 'dpsql[spark]'``.

>>> s = dpsql.spark.Session(spark, ledger, analyst="alice")            # doctest: +SKIP
>>> s.protect("visits", df, unit="patient_id", max_rows_per_unit=3, public_keys={"clinic": ("A", "B")})
>>> s.sql("SELECT clinic, dp_mean(cost, epsilon := 0.5) FROM visits GROUP BY clinic").rows

Each query: the guard checks, rewrites and costs it (the same passes as a DuckDB session) -> the translator
(:mod:`dpsql.spark.translate`) writes it as Spark SQL or refuses it (DPSQL-E013) -> Spark analyses the plan
(``df.schema``: the schema only, no data read; a failure is DPSQL-E001) -> the ledger charges the cost ->
exactly one action (``toArrow``) -> the charge is marked released.  A failure after the charge is the
charged DPSQL-E080.  Nothing is refused or charged from data values.

The ledger, the policy and the guard stay on the driver; the ledger is the DuckDB file of :mod:`dpsql.ledger`
(create it and grant budgets with :class:`dpsql.ledger.Ledger` or ``dpsql.admin``).  The dp_* aggregates are
dpsql.duck's Arrow UDFs, registered on the Spark session as nondeterministic ``arrow_udf``s (so Spark never
evaluates one twice): their noise comes from the OS CSPRNG of the executors.  Per-unit contribution bounding
orders a unit's rows by a salted hash whose 128-bit salt is fresh for each query.  Replays of stored releases
are not offered here (each query is charged).  Whoever holds the SparkSession can read the data directly: this
front door is for a trusted process (mode M1 of docs/operations.md), as an in-process DuckDB session is.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import warnings
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..errors import PrivacyError
from ..guard import Plan, plan
from ..guard.catalog import Catalog, TableInfo
from ..ledger import Budget, Ledger, clean
from ..session import Result
from .translate import CODE, UDF_SIGNATURES, Translation, translate

__all__ = ["Session", "translate", "Translation", "CODE", "register_udfs"]

#: Spark type names (``DataType.typeName()``) as the guard's DuckDB type names
_TYPES = {"byte": "TINYINT", "short": "SMALLINT", "integer": "INTEGER", "long": "BIGINT", "float": "FLOAT",
          "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP"}


def _duck_type(dt: Any) -> str:
    name = dt.typeName()
    if name == "decimal":
        return f"DECIMAL({dt.precision},{dt.scale})"
    if name not in _TYPES:
        raise ValueError(f"a column of Spark type {dt.simpleString()} cannot be registered")
    return _TYPES[name]


def register_udfs(spark: Any) -> None:
    """Register dpsql.duck's Arrow UDFs on ``spark`` under the names the macros call (OS CSPRNG noise)."""
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    from .. import duck
    from ..noise import system_rng

    makers = {"_dpsql_agg": duck.make_agg, "_dpsql_agg_ci": duck.make_agg_ci, "_dpsql_fin": duck.make_fin,
              "_dpsql_count": duck.make_count}
    with warnings.catch_warnings():  # pyspark prefers type hints; the surface decides the arguments instead
        warnings.simplefilter("ignore", UserWarning)
        for name, (_, _, returns) in UDF_SIGNATURES.items():
            fn = arrow_udf(makers[name](system_rng), returns, ArrowUDFType.SCALAR).asNondeterministic()
            spark.udf.register(name, fn)


class Session:
    """A guarded session of one analyst on a SparkSession the caller supplies.

    ``ledger``: an open :class:`~dpsql.ledger.Ledger` (or its path and dataset id as a tuple) holding the
    analyst's budget.  Tables are registered with :meth:`protect` and :meth:`public` before querying."""

    def __init__(self, spark: Any, ledger: Ledger | tuple[str, str], analyst: str, *,
                 max_fanout: int = 1000) -> None:
        if not isinstance(analyst, str) or not analyst:
            raise ValueError("analyst must be a non-empty name")
        self.spark = spark
        self.analyst = analyst
        self._ledger = ledger if isinstance(ledger, Ledger) else Ledger(*ledger)
        self.session_id, self._budget = self._ledger.open_session(analyst)
        self._tables: dict[str, TableInfo] = {}
        self._views: dict[str, str] = {}
        self._token = secrets.token_hex(4)
        self._max_fanout = max_fanout
        self._closed = False
        register_udfs(spark)

    # ------------------------------------------------------------------ the owner's policy

    def _register(self, name: str, source: Any) -> tuple[Any, dict[str, str]]:
        if not name.isidentifier() or name.lower().startswith("_dpsql"):
            raise ValueError("a table name must be a plain identifier")
        df = self.spark.table(source) if isinstance(source, str) else source
        columns = {f.name: _duck_type(f.dataType) for f in df.schema.fields}
        view = f"_dpsql_{self._token}_{name.lower()}"
        df.createOrReplaceTempView(view)
        self._views[name.lower()] = view
        return df, columns

    def protect(self, name: str, source: Any, *, unit: str | None = None, max_rows_per_unit: int = 1,
                max_groups_per_unit: int = 1, public_keys: Mapping[str, Sequence[Any]] | None = None) -> TableInfo:
        """Register a DataFrame (or a Spark table name) as the protected table ``name``: ``unit`` is its privacy
        unit column (None: each row is its own unit), with the contribution bounds and the declared public
        key domains of a DuckDB policy.  Reads no data."""
        _, columns = self._register(name, source)
        if unit is not None and unit not in columns:
            raise ValueError(f"the privacy unit column {unit!r} is not a column of {name}")
        info = TableInfo(name.lower(), "protected", columns, privacy_unit=unit, max_rows_per_unit=max_rows_per_unit,
                         max_groups_per_unit=max_groups_per_unit,
                         public_keys={k: tuple(v) for k, v in (public_keys or {}).items()})
        self._tables[name.lower()] = info
        return info

    def public(self, name: str, source: Any) -> TableInfo:
        """Register public data as the table ``name``.  Its row count and, per column, the largest number of
        rows sharing one value (the guard's join fan-out bound) are measured now, in one Spark job."""
        from pyspark.sql import functions as F

        df, columns = self._register(name, source)
        counts = [df.groupBy(c).count().agg(F.max("count").alias(c)) for c in columns]
        row = df.agg(F.count(F.lit(1)).alias("_n")).crossJoin(_cross(counts)).collect()[0] if counts else None
        rows = int(row["_n"]) if row else 0
        multiplicity = {c: int(row[c] or 0) for c in columns} if row else {}
        info = TableInfo(name.lower(), "public", columns, rows=rows, multiplicity=multiplicity)
        self._tables[name.lower()] = info
        return info

    # ------------------------------------------------------------------ the analyst's API

    def catalog(self) -> Catalog:
        b = self._budget
        cap = None if b.per_query_cap is None else float(b.per_query_cap)
        return Catalog(dict(self._tables), accounting=b.accounting, delta=float(b.query_delta()),
                       max_query_epsilon=cap, max_fanout=self._max_fanout)

    def budget(self) -> Budget:
        self._budget = self._ledger.budget(self.analyst)
        return self._budget

    def translate(self, sql: str) -> tuple[Plan, Translation]:
        """The guard's plan of ``sql`` and its Spark SQL, without analysing, charging or running anything."""
        if self._closed:
            raise PrivacyError("DPSQL-E090", "the session is closed")
        if not isinstance(sql, str):
            raise PrivacyError("DPSQL-E001", "the query must be SQL text")
        self.budget()
        try:
            checked = plan(sql, self.catalog())
        except PrivacyError:
            raise
        except Exception as exc:  # a guard bug fails closed, uncharged
            raise PrivacyError("DPSQL-E001", "the query could not be checked") from exc
        return checked, translate(checked.sql, self._views)

    def sql(self, sql: str) -> Result:
        """Check, translate, analyse, charge, run (one action) and release one query."""
        checked, translation = self.translate(sql)
        try:
            df = self.spark.sql(translation.sql)
            df.schema  # noqa: B018 - Spark's analysis: the plan's schema, no data read
        except Exception:  # noqa: BLE001 - any analysis failure is refused uncharged
            raise PrivacyError("DPSQL-E001", "Spark could not analyse the translated query (nothing was "
                               "charged)") from None
        if checked.schema_only:
            table = pa.schema([]).empty_table() if not df.columns else _empty(df)
            return Result(_named(table, checked), Decimal(0), self._budget.remaining, self._budget.accounting)
        cost, delta = clean(Decimal(checked.cost)), clean(Decimal(checked.delta))
        seq = None
        budget = self._budget
        if cost != 0 or delta != 0:
            charge = self._ledger.charge(
                self.analyst, cost, delta, accounting=budget.accounting,
                query_sha256=hashlib.sha256(checked.sql.encode()).hexdigest(), mechanisms=checked.mechanisms,
                session_id=self.session_id)
            seq, cost, delta, budget = charge.seq, charge.cost, charge.delta, charge.budget
            self._budget = budget
        if _after_charge is not None:
            _after_charge()
        try:
            table = df.toArrow()  # the one action
        except Exception:  # noqa: BLE001 - charged: no detail of the failure reaches the analyst
            if seq is not None:
                with contextlib.suppress(Exception):
                    self._ledger.finish(seq, released=False)
            raise PrivacyError("DPSQL-E080", f"the query failed after it was charged (charge {seq})") from None
        if seq is not None:
            with contextlib.suppress(PrivacyError):
                self._ledger.finish(seq, released=True)
        return Result(_named(table, checked), cost, budget.remaining, budget.accounting, delta,
                      list(checked.mechanisms), seq)

    def close(self) -> None:
        """Drop the registered views and end the ledger session (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for view in self._views.values():
            with contextlib.suppress(Exception):
                self.spark.catalog.dropTempView(view)
        with contextlib.suppress(PrivacyError):
            self._ledger.close_session(self.session_id)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: test hook, called after the charge committed and before the action runs
_after_charge = None


def _cross(dfs: list[Any]) -> Any:
    out = dfs[0]
    for d in dfs[1:]:
        out = out.crossJoin(d)
    return out


def _empty(df: Any) -> pa.Table:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema).empty_table()


def _named(table: pa.Table, checked: Plan) -> pa.Table:
    wanted = list(checked.output_columns or [])
    return table.rename_columns(wanted) if len(wanted) == table.num_columns else table
