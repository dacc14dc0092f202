"""Issue 17, every front door: the guarded session answers the guard's rewritten grouped dp_median / dp_quantile
through the summary plans (dpsql.plans.run over its input materialized once), everything else as before; same
columns and types as the macro route, the macro route's law, the same rows in every pass, a stop (timeout,
cancel) ends as the charged E080 with the materialized input dropped."""

from __future__ import annotations

import functools
import importlib.util
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql import plans
from dpsql.core import summary as core_summary
from dpsql.errors import PrivacyError
from dpsql.executor import Executor
from dpsql.noise import Rng

pytestmark = [
    pytest.mark.real_guard,
    pytest.mark.skipif(importlib.util.find_spec("dpsql.guard") is None or importlib.util.find_spec("dpsql.duck")
                       is None, reason="needs dpsql.guard and dpsql.duck"),
]


def _guard_sql(db: Path, sql: str) -> str:
    from dpsql.guard import plan

    with dpsql.connect(db, analyst="alice") as s:
        return plan(sql, s.catalog()).sql


def _temp_tables(ex: Executor) -> list:
    return ex.call(lambda con: con.sql("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall())


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list:
    """The materialized plans runs (one entry per guarded query through the plans)."""
    seen = []
    real = plans.run

    def run(con, sql, rng=None, *, materialize=False):  # noqa: ANN001, ANN202
        if materialize:
            seen.append(sql)
        return real(con, sql, rng, materialize=materialize)

    monkeypatch.setattr(plans, "run", run)
    return seen


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """v(uid, k, x): 150 units with 6 rows each over the keys A, B, C (max 2 rows and 1 group per unit: the
    guard's rewrite draws which rows and which group each unit keeps); public keys A, B, C, D (D has no rows)."""
    path = tmp_path / "shared.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE v AS SELECT (i // 6)::INTEGER AS uid, ['A', 'B', 'C'][i % 3 + 1] AS k, "
                "((i * 7919) % 1000)::DOUBLE / 10 AS x FROM range(900) r(i)")
    con.close()
    adm = dpsql.admin(path)
    adm.protect("v", privacy_unit="uid", max_rows_per_unit=2)
    adm.public_keys("v", "k", ["A", "B", "C", "D"])
    adm.grant("alice", epsilon=1000)
    return path


@pytest.mark.parametrize(("sql", "through_plans"), [
    ("SELECT clinic, dp_median(cost, epsilon := 0.5) AS m FROM visits GROUP BY clinic", True),
    ("SELECT dp_quantile(cost, 0.9, epsilon := 0.5) FROM visits", True),
    ("SELECT clinic, dp_median(cost, epsilon := 0.2) AS a, dp_quantile(cost, 0.25, epsilon := 0.2) FROM visits "
     "GROUP BY clinic", True),
    ("SELECT clinic, dp_count(*, epsilon := 0.5) FROM visits GROUP BY clinic", False),
    ("SELECT dp_median_ci(cost, epsilon := 0.5) AS r FROM visits", False),
    ("SELECT clinic, dp_median(cost, epsilon := 0.5), dp_count(*, epsilon := 0.1) FROM visits GROUP BY clinic",
     False),
])
def test_route(db: Path, spy: list, sql: str, through_plans: bool) -> None:
    with dpsql.connect(db, analyst="alice", replay=False) as s:
        r = s.sql(sql)
    assert len(spy) == int(through_plans)
    assert r.charged > 0 and r.table.num_rows >= 1


@pytest.mark.parametrize("sql", [
    "SELECT clinic, dp_mean(cost, epsilon := 0.5) AS m FROM visits GROUP BY clinic",
    "SELECT dp_sum(cost, epsilon := 0.5) FROM visits",
    "SELECT clinic, dp_var(cost, epsilon := 0.5) AS v FROM visits GROUP BY clinic",
    "SELECT dp_iqr(cost, epsilon := 0.5) FROM visits",
])
def test_other_aggregates_go_through_the_plans_iff_they_compile_them(db: Path, spy: list, sql: str) -> None:
    """The aggregates the plans grow (issue 17: dp_iqr, dp_mean, dp_sum, dp_var, ...) follow compile_query."""
    owned = plans.compile_query(_guard_sql(db, sql)) is not None
    with dpsql.connect(db, analyst="alice") as s:
        s.sql(sql)
    assert len(spy) == int(owned)


@pytest.mark.parametrize("sql", [
    "SELECT k, dp_median(x, epsilon := 1.0) AS m FROM v GROUP BY k",
    "SELECT dp_quantile(x, 0.9, epsilon := 1.0) FROM v",
    "SELECT k AS key, dp_quantile(x + 1, 0.1, epsilon := 1.0), dp_median(x, epsilon := 1.0) AS med FROM v "
    "WHERE x > 3 GROUP BY k",
])
def test_columns_and_types_are_the_macro_routes(shared: Path, sql: str) -> None:
    checked = _guard_sql(shared, sql)
    on, off = Executor(shared), Executor(shared, summary_plans=False)
    try:
        p_on, p_off = on.prepare(checked), off.prepare(checked)
        assert p_on.summary is not None and p_off.summary is None
        a, b = on.run(p_on), off.run(p_off)
        assert a.schema == b.schema and a.column_names == p_on.columns
        assert a.num_rows == b.num_rows
        if p_on.summary.columns[0][0] == "key":  # the public keys, every one (D without rows too)
            assert sorted(a.column(0).to_pylist()) == sorted(b.column(0).to_pylist()) == ["A", "B", "C", "D"]
        assert _temp_tables(on) == []
    finally:
        on.close()
        off.close()
    with dpsql.connect(shared, analyst="alice") as s:  # the session's names, as the analyst wrote them
        assert s.sql(sql).columns == [c for c, _ in s.describe(sql)]


def test_seeded_same_releases_as_the_macro_route(db: Path) -> None:
    """Ungrouped, every unit within its row bound (the rewrite keeps every row): the plans (the hybrid's rows
    route on 121 rows) release the macro route's values draw for draw from the same seed."""
    for sql in ("SELECT dp_median(cost, epsilon := 1.0) AS m FROM visits",
                "SELECT dp_quantile(cost, 0.9, epsilon := 2.0) AS m FROM visits"):
        checked = _guard_sql(db, sql)
        for seed in range(3):
            a = Executor(db, rng=Rng.seeded(seed))
            b = Executor(db, install=functools.partial(dpsql.install, guarded=True, rng=Rng.seeded(seed)),
                         summary_plans=False)
            try:
                pa_, pb = a.prepare(checked), b.prepare(checked)
                assert pa_.summary is not None and pb.summary is None
                assert a.run(pa_).equals(b.run(pb))
            finally:
                a.close()
                b.close()


def test_same_law_as_the_macro_route(shared: Path) -> None:
    """With the rewrite's random choice of rows and groups and an empty public key: A's releases pass a KS test
    against the macro route's, and D (no rows: NULL unless its noisy count runs the mechanism on nothing)
    comes back as often NULL (300 runs each)."""
    from scipy.stats import ks_2samp

    checked = _guard_sql(shared, "SELECT k, dp_median(x, epsilon := 1.0) AS m FROM v GROUP BY k")
    out = {}
    for on in (True, False):
        ex = Executor(shared, summary_plans=on)
        try:
            prepared = ex.prepare(checked)
            a, d = [], 0
            for _ in range(300):
                r = ex.run(prepared).to_pydict()
                by = dict(zip(r["k"], r["m"], strict=True))
                assert sorted(by) == ["A", "B", "C", "D"]
                a.append(by["A"])
                d += by["D"] is None
            out[on] = (np.array([np.nan if v is None else v for v in a]), d)
        finally:
            ex.close()
    (a1, d1), (a0, d0) = out[True], out[False]
    assert ks_2samp(a1[~np.isnan(a1)], a0[~np.isnan(a0)]).pvalue > 1e-6  # OS noise: a false alarm in 1e-6 of runs
    assert abs(np.isnan(a1).sum() - np.isnan(a0).sum()) < 6 * np.sqrt(300) * 0.5 + 1
    assert d1 > 200 and d0 > 200 and abs(d1 - d0) < 6 * np.sqrt(300) * 0.5 + 1


@pytest.mark.parametrize("small", [None, 0.0])
def test_every_pass_sees_the_same_rows(shared: Path, monkeypatch: pytest.MonkeyPatch, small: float | None) -> None:
    """The rewrite draws which rows and group each unit keeps.  Materialized, every pass reads the TEMP table
    only, and the count pass's valid rows per group are exactly those a later pass reads: the rows pass (the
    hybrid, every group as rows) or the gap pass's count of every row (``small`` 0: the summary passes).
    Evaluated in every pass instead (the plan run on the source as written), they disagree."""
    if small is not None:
        monkeypatch.setattr(plans, "SMALL_ROWS", small)
    statements, agree = [], []
    real_fetch, real_batch, real_keep = plans._fetch, plans.DuckSource._batch, plans.DuckSource._keep_first

    def fetch(con, sql, params=None):  # noqa: ANN001, ANN202
        statements.append(sql)
        return real_fetch(con, sql, params)

    def batch(self, groups):  # noqa: ANN001, ANN202
        b = real_batch(self, groups)
        agree.append(np.array_equal(self.n[groups], np.diff(b.offsets)))
        return b

    def keep_first(self, groups, first, g, key, n):  # noqa: ANN001, ANN202
        agree.append(np.array_equal(self.n[groups], np.bincount(g, weights=n, minlength=groups.size)))
        return real_keep(self, groups, first, g, key, n)

    monkeypatch.setattr(plans, "_fetch", fetch)
    monkeypatch.setattr(plans.DuckSource, "_batch", batch)
    monkeypatch.setattr(plans.DuckSource, "_keep_first", keep_first)
    checked = _guard_sql(shared, "SELECT k, dp_median(x, epsilon := 1.0) AS m FROM v GROUP BY k")
    ex = Executor(shared)
    try:
        prepared = ex.prepare(checked)
        for _ in range(5):
            ex.run(prepared)
        assert statements and all("_dpsql_plan_src" in s and "_dpsql_rand" not in s.lower() for s in statements)
        assert len(agree) >= 5 and all(agree)
        assert _temp_tables(ex) == []
        agree.clear()
        for _ in range(5):  # the same plan without the materialization: each pass draws again
            try:
                ex.call(lambda con: plans.run(con, prepared.summary))
            except RuntimeError:  # "the source's row count changed between passes"
                agree.append(False)
        assert not all(agree)
    finally:
        ex.close()


def _charged_e080(s: dpsql.Session, sql: str) -> None:
    before = s.budget().remaining
    with pytest.raises(PrivacyError) as err:
        s.sql(sql)
    assert err.value.code == "DPSQL-E080" and "charged 2 epsilon" in str(err.value)  # 1.0 x 2 rows per unit
    assert s.budget().remaining == before - Decimal("2")
    assert _temp_tables(s._executor) == []


def test_timeout_between_passes_is_charged_e080(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timer fires while the plans compute in Python (no statement runs: DuckDB's interrupt alone would be
    lost): the next pass does not run; charged E080, the TEMP table dropped; the session answers again after."""
    real = core_summary.released_count

    def slow(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        time.sleep(1.0)
        return real(*args, **kwargs)

    sql = "SELECT k, dp_median(x, epsilon := 1.0) AS m FROM v GROUP BY k"
    with dpsql.connect(shared, analyst="alice", replay=False) as s:
        assert s.sql(sql).table.num_rows == 4  # warm (a first query's one-off costs stay out of the timed run)
        s._executor.timeout = 0.5
        monkeypatch.setattr(core_summary, "released_count", slow)
        _charged_e080(s, sql)
        monkeypatch.setattr(core_summary, "released_count", real)
        assert s.sql(sql).table.num_rows == 4


def test_cancel_during_a_pass_is_charged_e080(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's cancel (Session.interrupt) while the plans run: charged E080, the TEMP table dropped."""
    s = dpsql.connect(shared, analyst="alice", replay=False)
    real = plans.DuckSource._run

    def run(self, sql, params=None):  # noqa: ANN001, ANN202
        s.interrupt()
        return real(self, sql, params)

    monkeypatch.setattr(plans.DuckSource, "_run", run)
    try:
        _charged_e080(s, "SELECT k, dp_median(x, epsilon := 1.0) AS m FROM v GROUP BY k")
    finally:
        s.close()
