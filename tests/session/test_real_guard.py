"""End to end with the real guard (dpsql.guard) and binding (dpsql.install): refusals charge nothing and
never reach the executor; accepted queries are charged once; costs match on neighbouring databases."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from conftest import CANARY, make_db

import dpsql
from dpsql.errors import PrivacyError

pytestmark = [
    pytest.mark.real_guard,
    pytest.mark.skipif(importlib.util.find_spec("dpsql.guard") is None or importlib.util.find_spec("dpsql.duck")
                       is None, reason="needs dpsql.guard and dpsql.duck"),
]

HOSTILE = [
    "SELECT * FROM visits",
    "SELECT note FROM visits",
    "SELECT count(*) FROM visits",
    "SELECT dp_count(*, epsilon := 0.1) FROM visits; SELECT 1",
    "CREATE TEMP TABLE t AS SELECT * FROM visits",
    "SELECT dp_count(*, epsilon := 0.1) FROM secrets",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM duckdb_tables()",
    "SELECT dp_count(*, epsilon := -1) FROM visits",
    "SELECT dp_count(*, epsilon := (SELECT 1.0)) FROM visits",
    "SELECT note, dp_count(*, epsilon := 0.1) FROM visits GROUP BY note",
    "SELECT patient_id, dp_count(*, epsilon := 0.1) FROM visits GROUP BY patient_id",
    "SELECT dp_count(*, epsilon := 0.1) FROM visits a JOIN visits b ON a.clinic = b.clinic",
    "SELECT main.sum(cost) FROM visits",
    "SELECT error(note) FROM visits",
    "PRAGMA storage_info('visits')",
    "EXPLAIN ANALYZE SELECT dp_count(*, epsilon := 0.1) FROM visits",
    "SUMMARIZE visits",
    "SELECT dp_count(*, epsilon := 0.1) FROM (SELECT * FROM visits LIMIT 5)",
    "SELECT clinic, dp_count(*, epsilon := 0.1) FROM visits GROUP BY clinic HAVING count(*) > 3",
]


@pytest.fixture
def real(db: Path):
    s = dpsql.connect(db, analyst="alice")
    yield s
    s.close()


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_queries_are_refused_uncharged_and_never_run(real, db: Path, tripwire, sql: str) -> None:
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        real.sql(sql)
    e = err.value
    assert e.code.startswith("DPSQL-E0") and int(e.code[-3:]) < 70, e.code
    assert CANARY not in str(e)
    assert tripwire.calls == 0
    assert real.budget().spent == 0
    assert dpsql.admin(db).charges() == []


def _guard_corpus():  # noqa: ANN202
    path = Path(__file__).resolve().parents[1] / "guard" / "corpus.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("dpsql_guard_corpus", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CORPUS = _guard_corpus() if importlib.util.find_spec("dpsql.guard") is not None else None
needs_corpus = pytest.mark.skipif(CORPUS is None, reason="tests/guard/corpus.py not there")


@needs_corpus
def test_the_session_builds_the_catalog_the_guard_corpus_assumes(real) -> None:
    assert real.catalog() == CORPUS.hospital_catalog()


@needs_corpus
def test_guard_corpus_refused_through_the_session_uncharged(real, db: Path, tripwire) -> None:
    tripwire.armed = True
    wrong = []
    for sql, code in CORPUS.HOSPITAL:
        try:
            real.sql(sql)
            wrong.append((sql, "accepted"))
        except PrivacyError as e:
            if e.code != code:
                wrong.append((sql, e.code, code))
            assert CANARY not in str(e)
    assert wrong == []
    assert len(CORPUS.HOSPITAL) >= 100
    assert tripwire.calls == 0 and real.budget().spent == 0 and dpsql.admin(db).charges() == []


@needs_corpus
def test_guard_corpus_over_the_cap_refused_uncharged(tmp_path: Path, tripwire) -> None:
    db = make_db(tmp_path / "h.duckdb")
    dpsql.admin(db).grant("alice", epsilon=3, per_query_cap=1)
    tripwire.armed = True
    with dpsql.connect(db, analyst="alice") as s:
        for sql, code in CORPUS.CAPPED:
            with pytest.raises(PrivacyError) as err:
                s.sql(sql)
            assert err.value.code == code
        assert s.budget().spent == 0


@needs_corpus
def test_guard_corpus_allowed_queries_are_charged_their_cost(tmp_path: Path) -> None:
    db = make_db(tmp_path / "h.duckdb")
    total = sum(Decimal(cost) for _, cost in CORPUS.ALLOWED)
    dpsql.admin(db).grant("alice", epsilon=total)
    with dpsql.connect(db, analyst="alice") as s:
        for sql, cost in CORPUS.ALLOWED:
            r = s.sql(sql)
            assert r.charged == Decimal(cost), sql
        assert s.budget().remaining == 0
    charged = [c.amount for c in dpsql.admin(db).charges()]
    assert sum(charged) == total and all(c > 0 for c in charged)


def test_accepted_query_is_charged_once(real, db: Path) -> None:
    r = real.sql("SELECT clinic, dp_mean(cost, epsilon := 0.5) AS m FROM visits GROUP BY clinic ORDER BY clinic")
    assert r.columns == ["clinic", "m"] and [x[0] for x in r.rows] == ["A", "B", "C"]
    assert r.charged == Decimal("1.5")  # 0.5 x max_rows_per_unit 3
    real.close()
    [c] = dpsql.admin(db).charges()
    assert (c.amount, c.status) == (Decimal("1.5"), "released")


def test_cast_failure_cannot_leak(real) -> None:
    try:
        r = real.sql("SELECT dp_sum(CAST(note AS INTEGER), epsilon := 0.2) AS s FROM visits")
        assert r.charged > 0
    except PrivacyError as e:  # either made total by the guard, or the generic charged error
        assert e.code == "DPSQL-E080" and CANARY not in str(e)


NEIGHBOUR_QUERIES = [
    "SELECT clinic, dp_mean(cost, epsilon := 0.5) AS m FROM visits GROUP BY clinic",
    "SELECT dp_count(*, epsilon := 0.25) AS n FROM visits WHERE cost > 10",
    "SELECT dp_median(cost, epsilon := 0.3) AS q FROM visits",
] + ([q for q, cost in CORPUS.ALLOWED if cost != "0"] if CORPUS is not None else [])


@pytest.mark.parametrize("query", NEIGHBOUR_QUERIES)
def test_ledger_rows_identical_on_neighbouring_databases(tmp_path: Path, query: str) -> None:
    rows = []
    for name, extra in (("d1.duckdb", False), ("d2.duckdb", True)):
        db = make_db(tmp_path / name, extra_patient=extra)
        with dpsql.connect(db, analyst="alice") as s:
            s.sql(query)
        [c] = dpsql.admin(db).charges()
        rows.append((c.kind, c.accounting, c.amount, c.delta, c.query_sha256, c.mechanisms, c.status))
    assert rows[0] == rows[1]


# issue 11: parameters at the extremes are refused with E060 before any data is read or any charge is made
EXTREME_PARAMETERS = [
    # the repro: a tiny epsilon used to release the exact count (noise saturated to 0)
    "SELECT dp_count(*, epsilon := 1e-30) FROM visits WHERE patient_id = 7 AND clinic = 'A'",
    "SELECT dp_sum(cost, epsilon := 1e-30, method := 'clipped', lower := 0, upper := 100) FROM visits",
    "SELECT dp_mean(cost, epsilon := 1e-30, method := 'bounded', lower := 0, upper := 100) FROM visits",
    "SELECT dp_median(cost, epsilon := 1e-30) FROM visits",
    "SELECT dp_iqr(cost, epsilon := 1e-30) FROM visits",
    "SELECT dp_count(*, epsilon := 9.9e-7) FROM visits",
    "SELECT dp_count(*, epsilon := 5e-324) FROM visits",
    "SELECT dp_count(*, epsilon := 1000.5) FROM visits",
    "SELECT dp_var(cost, epsilon := 1, method := 'clipped', lower := -1e308, upper := 1e308) FROM visits",
    "SELECT dp_var(cost, epsilon := 1, method := 'clipped', lower := -1e301, upper := 1e301) FROM visits",
    "SELECT dp_mean(cost, epsilon := 1e-5, delta := 1e-300, method := 'trimmed_lln') FROM visits",
    "SELECT clinic, dp_count(*, epsilon := 1e-16) FROM visits WHERE cost > 98 GROUP BY clinic",
]


@pytest.mark.parametrize("sql", EXTREME_PARAMETERS)
def test_extreme_parameters_are_refused_with_e060_uncharged(real, db: Path, tripwire, sql: str) -> None:
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        real.sql(sql)
    assert err.value.code == "DPSQL-E060", (err.value.code, str(err.value))
    assert tripwire.calls == 0 and real.budget().spent == 0 and dpsql.admin(db).charges() == []


@pytest.mark.parametrize("eps", ["1e-6", "1000"])
def test_the_epsilon_floor_and_ceiling_are_accepted(tmp_path: Path, eps: str) -> None:
    db = make_db(tmp_path / "h.duckdb")
    dpsql.admin(db).grant("alice", epsilon=20000)  # 6 queries x 3 rows per unit x 1000
    with dpsql.connect(db, analyst="alice") as s:
        for agg in ("dp_count(*", "dp_sum(cost", "dp_mean(cost", "dp_var(cost", "dp_median(cost", "dp_iqr(cost"):
            rows = s.sql(f"SELECT {agg}, epsilon := {eps}) FROM visits").rows
            assert len(rows) == 1


def test_a_join_that_fans_out_on_one_persons_data_is_refused_before_the_charge(tmp_path: Path) -> None:
    """Issue 13, finding 1, on a real database: the session measures the public table (rows, largest
    multiplicity per column); the attack's join is refused (E043) uncharged, a keyed join runs."""
    import duckdb

    db = make_db(tmp_path / "h.duckdb")
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE big AS SELECT i AS k, 0 AS grp FROM range(5000) r(i)")
    con.close()
    dpsql.admin(db).public_table("big")
    with dpsql.connect(db, analyst="alice") as s:
        big = next(t for t in s.tables() if t.name == "big")
        assert big.rows == 5000 and big.multiplicity == {"k": 1, "grp": 5000}
        for sql in ("SELECT dp_count(*, epsilon := 0.1) FROM visits v JOIN big b ON v.note = 'canary'",
                    "SELECT dp_count(*, epsilon := 0.1) FROM visits v JOIN big b ON b.grp = v.cost"):
            with pytest.raises(PrivacyError) as e:
                s.sql(sql)
            assert e.value.code == "DPSQL-E043"
        assert s.budget().spent == 0
        r = s.sql("SELECT dp_count(*, epsilon := 0.1) FROM visits v JOIN big b ON b.k = v.cost")
        assert r.charged == Decimal("0.3")  # 0.1 x max_rows_per_unit 3


# issue 14: the error-bar twins dp_*_ci are charged what the plain call is charged, and their parameters
# (level among them) are checked before any data is read
def test_a_ci_query_is_charged_what_the_plain_query_is(tmp_path: Path) -> None:
    charged = {}
    for name, fn, extra in (("plain", "dp_mean", ""), ("ci", "dp_mean_ci", ", level := 0.9"),
                            ("ci999", "dp_mean_ci", ", level := 0.999")):
        db = make_db(tmp_path / f"{name}.duckdb")
        with dpsql.connect(db, analyst="alice") as s:
            r = s.sql(f"SELECT clinic, {fn}(cost, epsilon := 0.5{extra}) AS m FROM visits GROUP BY clinic "
                      "ORDER BY clinic")
            assert r.columns == ["clinic", "m"] and [x[0] for x in r.rows] == ["A", "B", "C"]
            if fn.endswith("_ci"):
                # a small group's mean may be NULL (its noisy count is small): then the whole struct is
                assert all(m is None or (list(m) == ["value", "lo", "hi"] and m["lo"] <= m["hi"]) for _, m in r.rows)
            charged[name] = (r.charged, s.budget().spent)
        [c] = dpsql.admin(db).charges()
        assert c.amount == r.charged
    assert charged["plain"] == charged["ci"] == charged["ci999"] == (Decimal("1.5"), Decimal("1.5"))


@pytest.mark.parametrize("sql", [
    "SELECT dp_mean_ci(cost, epsilon := 0.5, level := 1.5) FROM visits",
    "SELECT dp_count_ci(*, epsilon := 0.5, level := cost) FROM visits",
    "SELECT clinic, dp_median_ci(cost, epsilon := 0.5, level := 0.01) FROM visits GROUP BY clinic",
    "SELECT dp_sum(cost, epsilon := 0.5, level := 0.9) FROM visits",
])
def test_ci_parameters_are_checked_before_the_data_is_read(real, db: Path, tripwire, sql: str) -> None:
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        real.sql(sql)
    assert err.value.code == "DPSQL-E060" and "level" in err.value.message
    assert tripwire.calls == 0 and real.budget().spent == 0 and dpsql.admin(db).charges() == []


def _e060(fn: str, text: str, typ: str) -> str:
    return (f"DPSQL-E060: {fn}: its value must be numeric; {text} is {typ} (convert it, e.g. TRY_CAST({text} AS "
            "DOUBLE), or count it with dp_count)")


@pytest.mark.parametrize(("sql", "message"), [
    # a table column: the guard says why, from the catalog
    ("SELECT dp_mean(note, epsilon := 0.5) FROM visits", _e060("dp_mean", "note", "VARCHAR")),
    # derived values: the checked query does not bind, and the session's probes say why (issue 14)
    ("SELECT dp_mean(upper(note), epsilon := 0.5) FROM visits", _e060("dp_mean", "upper(note)", "VARCHAR")),
    ("SELECT dp_sum(note || 'a', epsilon := 0.5) FROM visits", _e060("dp_sum", "note || 'a'", "VARCHAR")),
    ("SELECT dp_stddev(cost::VARCHAR, epsilon := 0.5), dp_iqr(\n  CAST(cost AS VARCHAR), epsilon := 0.5) FROM visits",
     _e060("dp_stddev", "cost::VARCHAR", "VARCHAR")),  # the value as written (sqlglot would write TEXT)
    ("SELECT clinic, dp_median_ci(cost > 10, epsilon := 0.5) FROM visits GROUP BY clinic",
     _e060("dp_median_ci", "cost > 10", "BOOLEAN")),
    ("SELECT dp_mean(v, epsilon := 0.5) FROM (SELECT patient_id, note AS v FROM visits) q",
     _e060("dp_mean", "v", "VARCHAR")),
    ("WITH q AS (SELECT patient_id, DATE '2020-01-01' + patient_id AS d FROM visits) "
     "SELECT dp_quantile(d, 0.5, epsilon := 0.5) FROM q", _e060("dp_quantile", "d", "DATE")),
    ("SELECT dp_mean(cost, epsilon := 0.5) FILTER (WHERE cost > 1), dp_var(clinic = 'A', epsilon := 0.5) "
     "FROM visits", _e060("dp_var", "clinic = 'A'", "BOOLEAN")),
    ("SELECT dp_mean(v.note, epsilon := 0.5) FROM visits v JOIN clinics c ON v.clinic = c.clinic",
     _e060("dp_mean", "v.note", "VARCHAR")),
    # another bind failure stays the generic refusal
    ("SELECT dp_mean(abs(note), epsilon := 0.5) FROM visits",
     "DPSQL-E001: the checked query could not be bound by DuckDB"),
])
def test_a_non_numeric_value_is_refused_before_the_charge(real, db: Path, tripwire, sql: str, message: str) -> None:
    """Issue 14: a non-numeric dp_* value is refused with E060 naming the value and its type before anything is
    charged or run: a table column by the guard (catalog), a derived value by binding zero-row probes after the
    checked query failed to bind (the guarded binding makes it a bind failure, never a charged E080)."""
    tripwire.armed = True
    with pytest.raises(PrivacyError) as err:
        real.sql(sql)
    assert str(err.value) == message and CANARY not in str(err.value)
    assert tripwire.calls == 0 and real.budget().spent == 0 and dpsql.admin(db).charges() == []


def test_a_type_error_depends_on_the_schema_only(tmp_path: Path) -> None:
    """The same text on neighbouring databases and on an empty table of the same schema."""
    sql = "SELECT clinic, dp_mean(note || cost, epsilon := 0.5) FROM visits GROUP BY clinic"
    messages = set()
    for name, extra in (("a", False), ("b", True)):
        path = make_db(tmp_path / f"{name}.duckdb", extra_patient=extra)
        with dpsql.connect(path, analyst="alice") as s:
            with pytest.raises(PrivacyError) as err:
                s.sql(sql)
            messages.add(str(err.value))
    path = make_db(tmp_path / "empty.duckdb")
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM visits")
    con.close()
    with dpsql.connect(path, analyst="alice") as s, pytest.raises(PrivacyError) as err:
        s.sql(sql)
    messages.add(str(err.value))
    assert messages == {_e060("dp_mean", "note || cost", "VARCHAR")}
