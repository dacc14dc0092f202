"""Stand-ins for the guard and the binding, so session tests do not depend on their progress.

``fake_plan`` follows G's contract (``plan(sql, catalog) -> Plan``) on a tiny dialect: it refuses
``SELECT *`` (E020) and relations it does not know (E010), costs each ``dp_*`` call at its literal
``epsilon := x`` (default 1), and executes the text unchanged.  ``fake_install`` registers dp_* macros
that are NOT private (plain aggregates); they only let the plumbing run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal

import duckdb

from dpsql.errors import PrivacyError
from dpsql.surface import FUNCTIONS


@dataclass
class FakePlan:
    sql: str
    cost: Decimal
    delta: Decimal = Decimal(0)
    mechanisms: list = field(default_factory=list)
    output_columns: list = field(default_factory=list)


_EPS = re.compile(r"epsilon\s*:=\s*([0-9.eE+-]+)")
#: a call of any dp_* function of the surface (longest names first); group 1 is the name without dp_
_DP = re.compile(r"\bdp_(" + "|".join(sorted((n[3:] for n in FUNCTIONS), key=len, reverse=True)) + r")\s*\(", re.I)
_FROM = re.compile(r"\bfrom\s+([A-Za-z_][A-Za-z0-9_]*)", re.I)


def fake_plan(sql: str, catalog) -> FakePlan:  # noqa: ANN001
    text = sql.strip().rstrip(";")
    if re.search(r"select\s+\*", text, re.I):
        raise PrivacyError("DPSQL-E020", "SELECT * outputs protected values")
    for name in _FROM.findall(text):
        if catalog.get(name) is None:
            raise PrivacyError("DPSQL-E010", f"relation {name} is not registered")
    calls = _DP.findall(text)
    eps = [Decimal(e) for e in _EPS.findall(text)]
    cost = sum(eps, Decimal(0)) + Decimal(max(len(calls) - len(eps), 0))
    bound = max((t.max_rows_per_unit for t in catalog.tables.values() if t.kind == "protected"), default=1)
    cost = (cost * bound).quantize(Decimal("1e-18"), rounding=ROUND_CEILING)
    if catalog.max_query_epsilon is not None and cost > Decimal(repr(catalog.max_query_epsilon)):
        raise PrivacyError("DPSQL-E061", "query epsilon over the cap")
    mech = [{"agg": c.lower(), "epsilon": str(e)} for c, e in zip(calls, eps, strict=False)]
    return FakePlan(sql=text, cost=cost, mechanisms=mech)


def fake_install(con: duckdb.DuckDBPyConnection) -> None:
    for name, body in (("dp_count", "count(x)"), ("dp_sum", "sum(x)"), ("dp_mean", "avg(x)"),
                       ("dp_median", "median(x)")):
        con.execute(f"CREATE MACRO {name}(x, epsilon := 1.0) AS {body}")
