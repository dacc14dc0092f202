"""A stand-in for the guarded session API (dpsql.connect) so front doors can be tested on their own.

It mimics the contract: sql() checks, charges and returns a result with .table/.rows/.charged/.remaining;
describe() never charges; rejections raise PrivacyError with a DPSQL code.  It is NOT a guard.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal

import duckdb

from dpsql.errors import PrivacyError
from dpsql.guard.catalog import TableInfo
from dpsql.ledger.records import Budget
from dpsql.session import Result

MACROS = """
CREATE MACRO dp_count(x, epsilon := 1.0) AS count(x)::DOUBLE;
CREATE MACRO dp_mean(x, epsilon := 1.0) AS avg(x)::DOUBLE;
CREATE MACRO dp_sum(x, epsilon := 1.0) AS sum(x)::DOUBLE;
"""


class FakeWorld:
    """Shared state of all fake sessions: the data, the budgets and a log of charges and describes."""

    def __init__(self, limit: str = "10") -> None:
        self.con = duckdb.connect(":memory:")
        self.con.execute("CREATE TABLE flights AS SELECT (i % 3)::INTEGER AS month, "
                         "['AA','UA','DL'][i % 3 + 1] AS carrier, (i % 50)::DOUBLE AS dep_delay, "
                         "DATE '2013-01-01' + (i % 365)::INTEGER AS day FROM range(300) r(i)")
        self.con.execute("CREATE TABLE airlines AS SELECT * FROM (VALUES ('AA', 'American'), ('UA', 'United'), "
                         "('DL', 'Delta')) v(carrier, name)")
        for stmt in MACROS.strip().splitlines():
            self.con.execute(stmt)
        self.limit = Decimal(limit)
        self.spent: dict[str, Decimal] = {}
        self.charges: list[tuple[str, Decimal, str]] = []
        self.interrupts = 0
        self.describes: list[str] = []
        self.lock = threading.Lock()

    def connect(self, analyst: str) -> FakeSession:
        if analyst == "nobody":
            raise PrivacyError("DPSQL-E070", "no budget granted to this analyst")
        return FakeSession(self, analyst)


class FakeSession:
    def __init__(self, world: FakeWorld, analyst: str) -> None:
        self.world, self.analyst = world, analyst
        self.cur = world.con.cursor()

    def _check(self, sql: str) -> Decimal:
        low = sql.lower()
        if ";" in low.strip().rstrip(";"):
            raise PrivacyError("DPSQL-E002", "more than one statement")
        if not low.lstrip().startswith(("select", "with")):
            raise PrivacyError("DPSQL-E003", "only SELECT statements are allowed")
        if re.search(r"\bfrom\s+flights\b", low) and "dp_" not in low:
            raise PrivacyError("DPSQL-E021", "non-DP aggregate or raw column over protected table flights")
        eps = [Decimal(m) for m in re.findall(r"epsilon\s*:=\s*([0-9.eE+-]+)", sql)]
        n_dp = len(re.findall(r"\bdp_\w+\s*\(", low))
        cost = sum(eps, Decimal(0)) + Decimal(1) * (n_dp - len(eps))
        if any(e <= 0 for e in eps):
            raise PrivacyError("DPSQL-E060", "epsilon must be a positive finite literal")
        return cost

    def sql(self, sql: str) -> Result:
        cost = self._check(sql)
        w = self.world
        with w.lock:
            spent = w.spent.get(self.analyst, Decimal(0))
            if spent + cost > w.limit:
                raise PrivacyError("DPSQL-E070", "budget exhausted")
            w.spent[self.analyst] = spent + cost
            if cost:
                w.charges.append((self.analyst, cost, sql))
            remaining = w.limit - w.spent[self.analyst]
        table = self.cur.sql(sql).to_arrow_table()
        return Result(table, cost, remaining, "pure")

    def describe(self, sql: str) -> list[tuple[str, str]]:
        self._check(sql)
        self.world.describes.append(sql)
        rel = self.cur.sql(sql)
        return list(zip(rel.columns, [str(x) for x in rel.types], strict=True))

    def budget(self) -> Budget:
        spent = self.world.spent.get(self.analyst, Decimal(0))
        return Budget(self.analyst, "pure", self.world.limit, spent, self.world.limit - spent, Decimal(0), Decimal(0))

    def tables(self) -> list[TableInfo]:
        return [TableInfo("flights", "protected", {"month": "INTEGER", "carrier": "VARCHAR",
                                                   "dep_delay": "DOUBLE", "day": "DATE"}),
                TableInfo("airlines", "public", {"carrier": "VARCHAR", "name": "VARCHAR"})]

    def interrupt(self) -> None:
        self.world.interrupts += 1
        self.cur.interrupt()

    def close(self) -> None:
        self.cur.close()
