"""Property tests: generated queries are either planned with the exact cost or refused with a code."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import sqlglot
from conftest import exact_binding, hospital
from corpus import extended_catalog, hospital_catalog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsql.errors import PrivacyError
from dpsql.guard import plan

EPS = st.decimals(min_value=Decimal("0.001"), max_value=Decimal("5"), places=3)
CALLS = st.sampled_from([
    "dp_count(*, epsilon := {e})", "dp_count(cost, epsilon := {e})", "dp_sum(cost, epsilon := {e})",
    "dp_mean(cost, epsilon := {e})", "dp_var(cost, epsilon := {e})", "dp_stddev(cost, epsilon := {e})",
    "dp_median(cost, epsilon := {e})", "dp_quantile(cost, 0.25, epsilon := {e})", "dp_iqr(cost, epsilon := {e})",
    "dp_sum(cost, epsilon := {e}) FILTER (WHERE clinic = 'B')",
])
WHERES = st.sampled_from(["", " WHERE cost > 10", " WHERE clinic IN ('A', 'B') AND note <> 'x'",
                          " WHERE TRY_CAST(note AS INTEGER) IS NULL", " WHERE cost / (cost - 1) > 0"])
KEYS = st.sampled_from([None, "clinic", "v.clinic"])

_CON = duckdb.connect()
hospital(_CON)
exact_binding(_CON)

settings.register_profile("guard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("guard")


@given(st.lists(st.tuples(CALLS, EPS), min_size=1, max_size=4), WHERES, KEYS)
def test_generated_dp_queries_cost_exactly(calls, where, key) -> None:  # noqa: ANN001
    items = [c.format(e=e) for c, e in calls]
    head = f"{key}, " if key else ""
    group = f" GROUP BY {key}" if key else ""
    sql = f"SELECT {head}{', '.join(items)} FROM visits v{where}{group}"
    p = plan(sql, hospital_catalog())
    assert p.cost == sum((e for _, e in calls), Decimal(0)) * 3  # k = 3, g = 1
    assert len(sqlglot.parse(p.sql, read="duckdb")) == 1
    assert len(p.mechanisms) == len(calls)
    assert p.output_columns[0] == ("clinic" if key else p.output_columns[0])


@given(EPS, st.sampled_from(["pure", "zcdp"]), st.integers(1, 5), st.integers(1, 4))
def test_cost_scales_with_contribution_bounds(eps, accounting, k, g) -> None:  # noqa: ANN001
    from dataclasses import replace

    cat = extended_catalog(accounting=accounting)
    diag = replace(cat.tables["diag"], max_rows_per_unit=k, max_groups_per_unit=g, public_keys={"code": ("x0",)})
    cat = replace(cat, tables={**cat.tables, "diag": diag})
    grouped = plan(f"SELECT code, dp_count(*, epsilon := {eps}) FROM diag GROUP BY code", cat).cost
    single = plan(f"SELECT dp_count(*, epsilon := {eps}) FROM diag", cat).cost
    if accounting == "pure":
        assert grouped == eps * k * g and single == eps * k
    else:
        assert grouped == eps * eps / 2 * (k * g) ** 2 and single == eps * eps / 2 * k * k


VOCAB = st.sampled_from([
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT 1", "JOIN", "ON", "USING (patient_id)",
    "visits", "clinics", "secrets", "v", "c", "*", ",", "(", ")", "=", "AND", "OR", "1", "0.5", "'A'",
    "patient_id", "clinic", "cost", "note", "name", "dp_count(*, epsilon := 1)", "dp_sum(cost, epsilon := 0.5)",
    "count(*)", "sum(cost)", "UNION ALL", "WITH x AS", "AS", "x", ";", "DISTINCT", "OVER ()", "::INTEGER",
    "random()", "main.", ".", "IN", "EXISTS", "LATERAL", "CROSS", "LEFT", "SELECT * FROM visits",
])


@settings(max_examples=300)
@given(st.lists(VOCAB, min_size=1, max_size=14))
def test_token_soup_never_crashes(tokens) -> None:  # noqa: ANN001
    """Any text is either planned or refused with a DPSQL code; nothing else escapes the guard."""
    sql = " ".join(tokens)
    try:
        p = plan(sql, hospital_catalog())
    except PrivacyError as e:
        assert e.code.startswith("DPSQL-E0") and int(e.code[-3:]) < 70
        return
    assert len(sqlglot.parse(p.sql, read="duckdb")) == 1
    assert p.cost >= 0
    if "visits" in sql.lower():
        assert p.mechanisms, "an allowed query over protected data must go through dp_* aggregates"
    try:
        rows = _CON.sql(p.sql).fetchall()
    except duckdb.Error:
        return  # a type or binding error: the session turns it into a refusal or E080
    assert "CANARY" not in repr(rows)


@given(st.text(max_size=60))
def test_arbitrary_text_never_crashes(text: str) -> None:
    try:
        plan(text, hospital_catalog())
    except PrivacyError as e:
        assert int(e.code[-3:]) < 70


ITEMS = st.sampled_from([
    "v.clinic", "clinic", "note", "cost", "patient_id", "c.name", "*", "1", "count(*)", "max(note)",
    "dp_count(*, epsilon := 1)", "dp_sum(cost, epsilon := 1)", "dp_mean(cost, epsilon := 1) AS m",
    "dp_count(note, epsilon := 1)", "row_number() OVER ()", "(SELECT max(note) FROM visits)",
    "dp_count(*, epsilon := 1) FILTER (WHERE note = 'CANARY_7731')", "lower(note)", "TRY_CAST(note AS INT)",
])
RELS = st.sampled_from([
    "visits v", "visits v JOIN clinics c ON v.clinic = c.clinic", "visits v LEFT JOIN clinics c USING (clinic)",
    "(SELECT * FROM visits) v", "(SELECT patient_id, note, clinic, cost FROM visits WHERE cost > 1) v",
    "visits v JOIN visits w ON v.patient_id = w.patient_id", "visits v JOIN visits w ON v.note = w.note",
    "clinics c JOIN visits v ON c.clinic = v.clinic", "(SELECT note AS clinic, cost, patient_id FROM visits) v",
])
CONDS = st.sampled_from(["", " WHERE note = 'CANARY_7731'", " WHERE cost > 50", " WHERE patient_id = 1000",
                         " WHERE note LIKE 'CAN%'"])
GROUPS = st.sampled_from(["", " GROUP BY v.clinic", " GROUP BY note", " GROUP BY 1", " GROUP BY ALL",
                          " GROUP BY clinic HAVING dp_count(*, epsilon := 1) > 2",
                          " GROUP BY clinic HAVING count(*) > 1"])
TAILS = st.sampled_from(["", " ORDER BY 1", " LIMIT 3", " ORDER BY note"])


@settings(max_examples=400)
@given(st.lists(ITEMS, min_size=1, max_size=3), RELS, CONDS, GROUPS, TAILS, st.sampled_from([0.0, 1e-6]))
def test_generated_hostile_shapes_never_leak(items, rel, cond, group, tail, delta) -> None:  # noqa: ANN001
    """Structured queries mixing raw columns, aggregates, joins and keys: either refused with a static code
    or planned so that (with noise-free aggregates) no raw value of the canary row reaches the output
    except as a noisy statistic; with delta > 0 a one-person key is never released."""
    sql = f"SELECT {', '.join(items)} FROM {rel}{cond}{group}{tail}"
    try:
        p = plan(sql, hospital_catalog(delta=delta))
    except PrivacyError as e:
        assert int(e.code[-3:]) < 70
        return
    assert p.mechanisms and p.cost > 0
    try:
        rows = _CON.sql(p.sql).fetchall()
    except duckdb.Error:
        return
    assert "CANARY" not in repr(rows)
