"""The budget as plain relations of a guarded session: ``dpsql_budget()`` and ``dpsql_last_charge()`` (issue 19).

BI tools wrap what they are given (Superset appends ``LIMIT 1001``, sorts, counts) and many never show a
NOTICE, so the budget is readable as relations that any SELECT may use like a public table:

``dpsql_budget()``
    one row: ``limit``, ``spent``, ``remaining`` (exact decimals, in ε or ρ) and ``accounting``
    ('pure' or 'zcdp') of the session's analyst, read from the ledger when the query is checked.
``dpsql_last_charge()``
    the analyst's latest ledger entry that answered a query, from any session or connection (a BI tool's
    pool opens many): ``seq``, ``kind`` ('charge' or 'replay'), ``charged`` (0 for a replay),
    ``delta_charged``, ``accounting``, ``replayed_from`` (the charge a replay answered again, else NULL),
    ``status`` ('reserved', 'released' or 'failed_after_start'), ``charged_at`` (UTC) and the ``remaining``
    budget now; no row before the first charge.  Queries that cost nothing (public tables, probes,
    pick-lists, these relations) leave no entry, so they do not change it.

Each no-argument call in a FROM clause is replaced, before the guard, by a FROM-less subquery of literals
with that name (or the alias written), so ``SELECT * FROM dpsql_budget() LIMIT 1001`` or
``SELECT remaining FROM dpsql_budget() AS b ORDER BY 1`` are checked and run like a query over a public
table, at no cost.  The values are the analyst's own budget, which the analyst may see anyway.

>>> from dpsql.ledger import Budget
>>> b = Budget("alice", "pure", Decimal(3), Decimal("0.5"), Decimal("2.5"), Decimal(0), Decimal(0))
>>> print(substitute("SELECT remaining FROM dpsql_budget() LIMIT 5", lambda: b, lambda: None)[:91])
SELECT remaining FROM (SELECT CAST('3' AS DECIMAL(38, 0)) AS "limit", CAST('0.5' AS DECIMAL
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from .ledger import clean

if TYPE_CHECKING:
    from .ledger import Budget, Entry

__all__ = ["BUDGET_COLUMNS", "LAST_CHARGE_COLUMNS", "mentions", "substitute"]

BUDGET_COLUMNS = ("limit", "spent", "remaining", "accounting")
LAST_CHARGE_COLUMNS = ("seq", "kind", "charged", "delta_charged", "accounting", "replayed_from", "status",
                       "charged_at", "remaining")
_MENTION = re.compile(r"\bdpsql_(budget|last_charge)\s*\(", re.I)
_TYPES = {"seq": "BIGINT", "kind": "VARCHAR", "accounting": "VARCHAR", "replayed_from": "BIGINT",
          "status": "VARCHAR", "charged_at": "TIMESTAMP"}


def mentions(sql: str) -> bool:
    """Whether the text may call one of the relations (a cheap test before parsing)."""
    return isinstance(sql, str) and _MENTION.search(sql) is not None


def _literal(value: Any, name: str) -> str:
    """A typed SQL literal: decimals keep their exact digits (``DECIMAL(38, scale)``), NULLs their column's type."""
    if value is None:
        return f"CAST(NULL AS {_TYPES.get(name, 'DECIMAL(38, 18)')})"
    if isinstance(value, Decimal):
        d = clean(value)
        scale = max(0, -int(d.as_tuple().exponent))
        return f"CAST('{format(d, 'f')}' AS DECIMAL(38, {min(scale, 37)}))"
    if isinstance(value, datetime):
        return f"CAST('{value.isoformat(sep=' ')}' AS TIMESTAMP)"
    if isinstance(value, int):
        return f"CAST({int(value)} AS BIGINT)"
    return "'" + str(value).replace("'", "''") + "'"


def _select(columns: tuple[str, ...], row: tuple[Any, ...] | None) -> exp.Select:
    """``SELECT <literal> AS "<column>", ...`` (with ``WHERE false`` when there is no row)."""
    values = row if row is not None else (None,) * len(columns)
    items = ", ".join(f'{_literal(v, c)} AS "{c}"' for c, v in zip(columns, values, strict=True))
    return sqlglot.parse_one(f"SELECT {items}" + (" WHERE false" if row is None else ""), read="duckdb")


def budget_row(b: Budget) -> tuple[Any, ...]:
    return (b.limit, b.spent, b.remaining, str(b.accounting))


def last_charge_row(e: Entry | None, b: Budget) -> tuple[Any, ...] | None:
    if e is None:
        return None
    return (int(e.seq), e.kind, e.amount, e.delta, e.accounting, e.ref_seq, e.status, e.ts, b.remaining)


def substitute(sql: str, budget: Callable[[], Budget | None], last: Callable[[], Entry | None]) -> str:
    """``sql`` with every ``dpsql_budget()`` / ``dpsql_last_charge()`` relation replaced by its rows; the text
    unchanged when it names neither (or does not parse as one statement: the guard then refuses it)."""
    if not mentions(sql):
        return sql
    try:
        trees = sqlglot.parse(sql, read="duckdb")
    except (SqlglotError, RecursionError):
        return sql
    if len(trees) != 1 or trees[0] is None:
        return sql
    tree = trees[0]
    found = [t for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Anonymous) and not t.this.expressions
             and str(t.this.name).lower() in ("dpsql_budget", "dpsql_last_charge")]
    if not found:
        return sql
    cache: dict[str, exp.Select] = {}
    for table in found:
        name = str(table.this.name).lower()
        if name not in cache:
            b = budget()
            if b is None:
                return sql
            cache[name] = (_select(BUDGET_COLUMNS, budget_row(b)) if name == "dpsql_budget"
                           else _select(LAST_CHARGE_COLUMNS, last_charge_row(last(), b)))
        alias = table.args.get("alias")
        alias = alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(name))
        table.replace(exp.Subquery(this=cache[name].copy(), alias=alias))
    return tree.sql(dialect="duckdb")
