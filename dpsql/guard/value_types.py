"""Why a checked query did not bind: a dp_* value of a non-numeric type (issue 14).

The guard refuses a dp_* value that is a registered table's column of a non-numeric type itself (E060, from the
catalog: :mod:`dpsql.guard.params`).  A derived value (``note || 'x'``, ``CAST(d AS DATE)``, ``cost > 10``, a
column of a subquery or CTE) has no type in the catalog: DuckDB types it when it binds the checked query, and
the guarded binding (``dpsql.install(con, guarded=True)``) makes a non-numeric one a bind failure.  When the
checked query does not bind, the session asks :func:`value_probes` for one zero-row query per numeric dp_*
value, ``[WITH <the CTEs in its scope>] SELECT <value> FROM <its FROM and joins> LIMIT 0``, binds each (schema
only: nothing runs, no row is read) and turns the first, in the order of the query text, whose type is not
numeric into :func:`type_error`, the same E060 text as the guard's column check.  Anything else stays the
generic uncharged E001.

Why DuckDB's binder and not sqlglot's type annotation: the binder is what picks the macro overload that fails,
so its type is the fact; sqlglot's annotator does not know DuckDB's typing of every function and operator, and
a wrong "not numeric" would send the analyst the wrong way.  Why only after a failed bind: a query that binds
pays nothing for it.  Privacy: the probes are built from the query text alone and bound against the schema;
the refusal names the value as written and its type, so it depends on the query and the schema only, and it
comes before any charge.  The probes are built from the query as written, with the owner's plain-aggregate
opt-in applied (``AVG(x)`` is ``dp_mean(x)``), not from the checked rewrite; the message quotes the value as the
analyst wrote it (``cost::VARCHAR``; from the tokens' offsets), else as sqlglot writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from ..errors import PrivacyError
from ..surface import FUNCTIONS
from .catalog import Catalog
from .context import dp_name, refuse
from .lineage import is_numeric_type
from .plain import rewrite_plain_aggregates

__all__ = ["ValueProbe", "value_probes", "type_error", "numeric"]

#: the clauses of the value's SELECT that a probe drops: only the value and what it reads (FROM, joins) remain
_DROPPED = ("where", "group", "having", "qualify", "order", "limit", "offset", "distinct", "windows")
_OPEN = (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE)
_CLOSE = (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE)
#: the argument holding a query's WITH (sqlglot 30 calls it ``with_``)
_WITH = "with_" if "with_" in exp.Select.arg_types else "with"


@dataclass(frozen=True)
class ValueProbe:
    """One numeric dp_* value: the function, the value as written, and a zero-row query of it alone."""

    function: str
    text: str
    sql: str


def type_error(function: str, text: str, typ: str) -> PrivacyError:
    """DPSQL-E060 for a value ``text`` of the non-numeric type ``typ`` (the guard's and trusted mode's text)."""
    return refuse("060", f"{function}: its value must be numeric; {text} is {typ} "
                         f"(convert it, e.g. TRY_CAST({text} AS DOUBLE), or count it with dp_count)")


def numeric(typ: str) -> bool:
    """A type the dp_* macros take as their value: every integer width, DECIMAL, FLOAT, DOUBLE (and a NULL
    literal, which DuckDB casts to anything)."""
    return is_numeric_type(typ.upper()) or typ.strip('"').upper() == "NULL"


def value_probes(sql: str, catalog: Catalog) -> list[ValueProbe]:
    """The probes of ``sql``'s numeric dp_* values, in the order of the query text; ``[]`` if it does not parse."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except (SqlglotError, RecursionError):
        return []
    tree = rewrite_plain_aggregates(tree, catalog)
    written = _written_values(sql)
    probes = []
    for node in _text_order(tree):
        fn = dp_name(node)
        if fn is None or FUNCTIONS[fn].value != "NUMERIC" or not node.expressions:
            continue
        value = node.expressions[0]
        select = node.find_ancestor(exp.Select)
        if isinstance(value, exp.PropertyEQ | exp.Kwarg | exp.Star) or select is None:
            continue
        text = value.sql("duckdb")
        same = written.get(text)
        probes.append(ValueProbe(fn, same.pop(0) if same else text, _probe(select, value).sql("duckdb")))
    return probes


def _written_values(sql: str) -> dict[str, list[str]]:
    """The first argument of each dp_* call as the analyst wrote it (``CAST(x AS VARCHAR)``, which sqlglot
    writes ``CAST(x AS TEXT)``), keyed by sqlglot's text of it; from the tokens' offsets in ``sql``."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    except (SqlglotError, RecursionError):
        return {}
    out: dict[str, list[str]] = {}
    for i in range(len(tokens) - 2):
        if tokens[i].text.lower() not in FUNCTIONS or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        depth, j = 0, i + 2
        while j < len(tokens):
            kind = tokens[j].token_type
            if kind in _OPEN:
                depth += 1
            elif kind in _CLOSE and depth == 0 or kind == TokenType.COMMA and depth == 0:
                break
            elif kind in _CLOSE:
                depth -= 1
            j += 1
        if j == i + 2:
            continue
        text = sql[tokens[i + 2].start: tokens[j - 1].end + 1].strip()
        try:
            key = sqlglot.parse_one(text, read="duckdb").sql("duckdb")
        except (SqlglotError, RecursionError):
            continue
        out.setdefault(key, []).append(" ".join(text.split()) if "\n" in text else text)
    return out


def _text_order(root: exp.Expression):  # noqa: ANN202
    """``root``'s nodes in pre-order, a query's WITH before the rest (as written), else in argument order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        children = list(node.iter_expressions())
        children.sort(key=lambda c: c.arg_key != _WITH)  # stable: only the WITH moves to the front
        stack.extend(reversed(children))


def _probe(select: exp.Select, value: exp.Expression) -> exp.Select:
    """``SELECT value`` from ``select``'s FROM and joins, with the CTEs in its scope, LIMIT 0."""
    probe = select.copy()
    for arg in _DROPPED:
        probe.set(arg, None)
    probe.set("expressions", [value.copy()])
    outer = _ctes_in_scope(select)
    if outer:
        own = probe.args.get(_WITH)
        with_ = exp.With(expressions=[c.copy() for c in outer] + (list(own.expressions) if own else []),
                         recursive=bool(own and own.args.get("recursive")))
        probe.set(_WITH, with_)
    return probe.limit(0)


def _ctes_in_scope(select: exp.Select) -> list[exp.CTE]:
    """The CTEs of the queries around ``select`` that it may name, outermost first (its own WITH stays on it):
    all of an enclosing query's CTEs, and of a WITH that ``select`` is defined in, those before its own CTE."""
    found: list[list[exp.CTE]] = []
    child, node = select, select.parent
    while node is not None:
        if isinstance(node, exp.With):
            ctes = list(node.expressions)
            found.append(ctes[: next((i for i, c in enumerate(ctes) if c is child), len(ctes))])
        elif isinstance(node, exp.Query) and node.args.get(_WITH) is not None and node.args[_WITH] is not child:
            found.append(list(node.args[_WITH].expressions))
        child, node = node, node.parent
    return [c for group in reversed(found) for c in group]
