"""Property tests: generated queries are either planned with the exact cost or refused with a code."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import sqlglot
from conftest import exact_binding, hospital
from corpus import extended_catalog, hospital_catalog
from hypothesis import HealthCheck, example, given, settings
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
@example(["SELECT", "visits"])
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
    reads = {t.name.lower() for t in sqlglot.parse_one(p.sql, read="duckdb").find_all(sqlglot.exp.Table)}
    if "visits" in reads:  # (a bare 'SELECT visits' names a column, reads no table, and fails to bind)
        assert p.mechanisms, "an allowed query over protected data must go through dp_* aggregates"
    try:
        rows = _CON.sql(p.sql).fetchall()
    except duckdb.Error:
        return  # a type or binding error: the session turns it into a refusal or E080
    assert "CANARY" not in repr(rows)


@given(st.text(max_size=60))
@example("CONNECT")
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
    if p.mechanisms:
        assert p.cost > 0
    else:  # a pick-list of declared keys (issue 19): answered from the keys, free, reading no table
        assert p.cost == 0 and not list(sqlglot.parse_one(p.sql, read="duckdb").find_all(sqlglot.exp.Table))
    try:
        rows = _CON.sql(p.sql).fetchall()
    except duckdb.Error:
        return
    assert "CANARY" not in repr(rows)


def _neighbour() -> duckdb.DuckDBPyConnection:
    """The hospital plus one more patient (2000) with 6 visits in A, A, A, B, B, D and 4 diagnoses."""
    con = duckdb.connect()
    hospital(con)
    con.execute("INSERT INTO visits VALUES (2000, 'A', 5, 'p1'), (2000, 'A', 6, 'p2'), (2000, 'A', 7, 'p3'), "
                "(2000, 'B', 8, 'p4'), (2000, 'B', 9, 'p5'), (2000, 'D', 10, 'p6')")
    con.execute("INSERT INTO diag VALUES (2000, 'x0'), (2000, 'x0'), (2000, 'x1'), (2000, 'x9')")
    exact_binding(con)
    return con


_NEIGHBOUR = _neighbour()

# (no FILTER here: it applies after the random per-unit sample, so its exact total varies between runs)
COUNT_ITEMS = st.sampled_from(["dp_count(*, epsilon := 1)", "dp_count(cost, epsilon := 1)",
                               "dp_count_star(epsilon := 1)"])
SENS_RELS = st.sampled_from([
    "visits v", "visits v JOIN clinics c ON v.clinic = c.clinic",
    "visits v JOIN visits w ON v.patient_id = w.patient_id",
    "visits v JOIN visits w ON v.clinic = w.clinic", "(visits v JOIN visits w ON v.clinic = w.clinic)",
    "visits v JOIN diag d ON v.patient_id = d.patient_id", "visits v JOIN diag d ON v.clinic <> d.code",
    "(SELECT * FROM visits) v JOIN (SELECT patient_id AS pid FROM diag) d ON v.patient_id = d.pid",
    "(SELECT cost AS patient_id, clinic, cost FROM visits) v JOIN diag d USING (patient_id)",
    "visits v, diag d", "visits v CROSS JOIN clinics c", "visits v JOIN clinics c ON true",
    "(SELECT * FROM visits UNION ALL SELECT * FROM visits) v",
    "visits v LEFT JOIN diag d ON v.patient_id = d.patient_id",
])
SENS_GROUPS = st.sampled_from(["", " GROUP BY v.clinic", " GROUP BY c.name", " GROUP BY d.code"])
# conditions that single out the new person's rows on the *other* side of a join
SENS_CONDS = st.sampled_from(["", " WHERE v.cost > 50", " WHERE w.patient_id = 2000", " WHERE d.patient_id = 2000",
                              " WHERE d.code = 'x9'", " WHERE w.note LIKE 'p%'"])


@settings(max_examples=500)
@given(st.lists(COUNT_ITEMS, min_size=1, max_size=2), SENS_RELS, SENS_CONDS, SENS_GROUPS)
@example(["dp_count(*, epsilon := 1)"], "(visits v JOIN visits w ON v.clinic = w.clinic)",
         " WHERE w.patient_id = 2000", "")  # a nested join once slipped past the join check
def test_one_more_person_moves_counts_by_at_most_the_bound(items, rel, cond, group) -> None:  # noqa: ANN001
    """Sensitivity, checked on data: with noise-free counts, adding one person (6 visits, 4 diagnoses)
    changes the total of every dp count by at most the multiplier the plan charges for it."""
    keys = group.replace(" GROUP BY ", "")
    sql = f"SELECT {(keys + ', ') if keys else ''}{', '.join(items)} FROM {rel}{cond}{group}"
    try:
        p = plan(sql, extended_catalog())
    except PrivacyError:
        return
    totals = []
    for con in (_CON, _NEIGHBOUR):
        rows = con.sql(p.sql).fetchall()
        offset = 1 if keys else 0
        totals.append([sum(r[offset + i] for r in rows) for i in range(len(items))])
    for i, m in enumerate(p.mechanisms):
        assert abs(totals[1][i] - totals[0][i]) <= m["multiplier"], (sql, totals, m)
