"""Summary plans (issue 17): the compiled dp_iqr (core.summary.iqr: Q1 and Q3 of one count, floor and centre)
releases what core.summary's reference releases on the same matching keys, byte for byte under a seeded generator
(many groups, sizes, extreme values, the floor whole and subsampled, random ladders, a mixed hybrid split); read
as rows it releases scalefree.run_iqr's draws (the macro route's code); and it has the list route's law (KS and chi2
over many runs, all passes and across a split).  Privacy: tests/plans/test_plans_iqr_privacy.py."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from plan_statements import run_recorded as _statements
from test_plans import EXTREME, _group, _one_thread, _Replay

from dpsql import plans
from dpsql.core import Params, get_method, scalefree, summary
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_iqr
from dpsql.noise import Rng
from dpsql.testing import random_ladder


def _table(trial: int) -> tuple[np.ndarray, np.ndarray, float]:
    r = np.random.default_rng(trial)
    gs, xs = [], []
    for g in range(int(r.integers(1, 5))):
        n = int(r.choice([0, 1, 5, 40, 300, 3000]))
        gs.append(np.full(n, g))
        xs.append(_group(r, n))
    return np.concatenate(gs), np.concatenate(xs), float(r.choice([1.0, 5.0, 20.0]))


def _iqr_plans(g: np.ndarray, x: np.ndarray, eps: float, seed: int) -> tuple[list, np.ndarray]:
    got = plans.run(_one_thread(g, x), f"SELECT g, dp_iqr(x, epsilon := {eps}) AS r FROM t GROUP BY g",
                    Rng.seeded(seed))
    return got.column("g").to_pylist(), got.column("r").to_numpy(zero_copy_only=False).astype(float)


def _replay_case(trial: int, small: float = 0.0) -> None:
    g, x, eps = _table(trial)
    order, got = _iqr_plans(g, x, eps, trial)
    pos = np.arange(x.size)
    want = summary.iqr(_Replay([x[g == k] for k in order], [pos[g == k] for k in order]), eps, Rng.seeded(trial),
                       small=small)
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(24))
def test_iqr_same_releases_as_the_reference_on_the_same_matching(trial: int, floor_sample: bool) -> None:
    """Byte for byte: wide groups through the passes (one gap pass, two bucket passes per quartile, one tail pass),
    near groups through the rows pass; eps 1, 5, 20 put groups of 40-3000 rows on either route."""
    _replay_case(2000 + trial)


@pytest.mark.parametrize("trial", range(12))
def test_iqr_hybrid_same_releases_as_the_reference(trial: int, floor_sample: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid route (SMALL_ROWS 200): wide groups of 40 rows read as rows, of 300 and 3000 through the passes
    (a mixed split by released count), byte for byte the reference with the same ``small``."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 200.0)
    _replay_case(2100 + trial, 200.0)


@pytest.mark.parametrize("trial", range(8))
def test_iqr_same_releases_whatever_the_ladder(trial: int, floor_sample: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary, "ladder", random_ladder(np.random.default_rng(trial)))
    _replay_case(2200 + trial)


@pytest.mark.parametrize("trial", range(16))
def test_iqr_read_as_rows_is_the_list_route(trial: int, floor_sample: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every group read as rows (SMALL_ROWS above every count; one rows chunk): scalefree.run_iqr's releases, draw
    for draw, on the groups in the plan's output order with the same seeded generator."""
    monkeypatch.setattr(plans, "SMALL_ROWS", np.inf)
    g, x, eps = _table(2300 + trial)
    order, got = _iqr_plans(g, x, eps, trial)
    params = Params(epsilon=eps)
    want = run_iqr(Batch.from_lists([x[g == k] for k in order]), budget_of(get_method("iqr", "scalefree"), params),
                   params, Rng.seeded(trial))
    assert np.array_equal(got, want, equal_nan=True)



def test_iqr_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """One wide class (groups of 6,000 and 9,000 rows, the floor whole): count, gaps (with the first bucket
    histogram), two bucket passes per quartile, one tail pass for both: 7 statements."""
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", False)
    r = np.random.default_rng(3)
    g = np.repeat([0, 1], (6000, 9000))
    x = r.lognormal(0, 1, g.size)
    got, calls = _statements(monkeypatch, _one_thread(g, x), "SELECT g, dp_iqr(x, epsilon := 1.0) AS r FROM t "
                             "GROUP BY g", Rng.seeded(3))
    assert len(calls) == 7
    exact = [np.subtract(*np.quantile(x[g == k], [0.75, 0.25])) for k in got.column("g").to_pylist()]
    assert np.allclose(got.column("r").to_numpy(), exact, rtol=0.1)


def test_hybrid_one_rows_pass_for_median_and_iqr(monkeypatch: pytest.MonkeyPatch) -> None:
    """dp_median and dp_iqr on one value, groups of 50, 400 and 6,000 rows, SMALL_ROWS 1000: one rows pass for the
    small groups of both calls; releases as the reference (both counts first, then each call)."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 1000.0)
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", False)
    r = np.random.default_rng(4)
    sizes = (50, 400, 6000)
    g = np.repeat(np.arange(3), sizes)
    x = r.lognormal(0, 1, g.size)
    got, calls = _statements(monkeypatch, _one_thread(g, x), "SELECT g, dp_median(x, epsilon := 2.0) AS m, "
                             "dp_iqr(x, epsilon := 2.0) AS r FROM t GROUP BY g", Rng.seeded(4))
    assert sum("_rows_x" in q for q in calls) == 1
    # count, rows, median: gaps, two buckets, tails; iqr: gaps, 2 x two buckets, tails
    assert len(calls) == 2 + 4 + 6
    order = got.column("g").to_pylist()
    pos = np.arange(x.size)
    src = [_Replay([x[g == k] for k in order], [pos[g == k] for k in order]) for _ in range(2)]
    rng = Rng.seeded(4)
    n_hat = [summary.released_count(src[0], 2.0, rng), summary.released_count(src[1], 2.0, rng, summary.IQR_PS)]
    want = [summary.median(src[0], 2.0, rng, n_hat=n_hat[0], small=1000.0),
            summary.iqr(src[1], 2.0, rng, n_hat=n_hat[1], small=1000.0)]
    for col, w in zip(("m", "r"), want, strict=True):
        assert np.array_equal(got.column(col).to_numpy(zero_copy_only=False).astype(float), w, equal_nan=True)


@pytest.mark.parametrize("small", [0.0, 500.0])
def test_iqr_passes_do_not_depend_on_the_values(small: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same group sizes and generator give the same statements whatever the values (tame, or +-1e300, +-inf,
    huge integers, subnormals and a far outlier), the floor subsampled (FLOOR_KEEP 64), all passes or hybrid."""
    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 64.0)
    sizes = (30, 100, 300, 480, 520, 3000)
    g = np.repeat(np.arange(len(sizes)), sizes)
    r = np.random.default_rng(9)
    tame = r.normal(0, 1, g.size)
    wild = r.choice([v for v in EXTREME if not np.isnan(v)], g.size)
    wild[5] = 1e15
    sql = "SELECT g, dp_iqr(x, epsilon := 2.0) AS r FROM t GROUP BY g"
    runs = [_statements(monkeypatch, _one_thread(g, x), sql, Rng.seeded(9))[1] for x in (tame, wild)]
    assert runs[0] == runs[1] and any("_tag" in q for q in runs[0])
    assert any("_rows_x" in q for q in runs[0])  # the near groups' (and at 500 the small groups') rows


def _both_routes(d: np.ndarray, runs: int, eps: float, seed_plans: int, seed_list: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    g = np.repeat(np.arange(runs), d.size)
    con = duckdb.connect()
    con.register("t", pa.table({"g": g, "x": np.tile(d, runs)}))
    a = plans.run(con, f"SELECT g, dp_iqr(x, epsilon := {eps}) AS r FROM t GROUP BY g", Rng.seeded(seed_plans))
    a = a.column("r").to_numpy(zero_copy_only=False).astype(float)
    params = Params(epsilon=eps)
    b = run_iqr(Batch.from_lists([d] * runs), budget_of(get_method("iqr", "scalefree"), params), params,
                Rng.seeded(seed_list))
    return a[~np.isnan(a)], b[~np.isnan(b)]


def _same_law(fa: np.ndarray, fb: np.ndarray, runs: int) -> None:
    from scipy.stats import chi2_contingency, ks_2samp

    assert abs(fa.size - fb.size) < 6 * np.sqrt(runs) + 1
    assert ks_2samp(fa, fb).pvalue > 1e-3
    edges = np.unique(np.quantile(np.concatenate([fa, fb]), np.linspace(0, 1, 11)[1:-1]))
    table = np.array([np.bincount(np.searchsorted(edges, f), minlength=edges.size + 1) for f in (fa, fb)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] > 1:
        assert chi2_contingency(table).pvalue > 1e-3


@pytest.mark.parametrize("name", ["normal_3000", "ties_2000", "lognormal_60"])
def test_iqr_same_law_as_the_list_route(name: str) -> None:
    """Every group through the passes (wide at eps 1: 3,000 and 2,000 rows) or the near route's rows (60 rows at eps
    2): KS and chi2 against run_iqr, 600 runs."""
    r = np.random.default_rng(14)
    d, eps = {"normal_3000": (r.normal(5, 1, 3000), 1.0), "ties_2000": (np.round(r.normal(5, 2, 2000)), 1.0),
              "lognormal_60": (r.lognormal(0, 2, 60), 2.0)}[name]
    _same_law(*_both_routes(d, 600, eps, 3, 4), 600)


def test_iqr_hybrid_same_law_as_the_list_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """SMALL_ROWS at the groups' size (500 rows at eps 1: wide, the released count sends about half of the groups
    to the rows and half to the passes), the rows in chunks: KS and chi2 against run_iqr."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 500.0)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 20000.0)
    d = np.random.default_rng(15).lognormal(0, 1, 500)
    _same_law(*_both_routes(d, 600, 1.0, 6, 7), 600)


def test_compiles_iqr() -> None:
    c = plans.compile_query("SELECT g, dp_iqr(x, epsilon := 0.5) AS r FROM t GROUP BY g").calls[0]
    assert (c.aggregate, c.p, c.epsilon) == ("iqr", summary.IQR_PS, 0.5)
    assert plans.compile_query("SELECT dp_iqr(x + 1, epsilon := 1, method := 'scalefree') FROM t")
    for q in ("SELECT dp_iqr(x, epsilon := 1, lower := 0) FROM t",
              "SELECT dp_iqr(x, epsilon := 1, method := 'smooth') FROM t",
              "SELECT dp_iqr(x, 0.5, epsilon := 1) FROM t",
              "SELECT dp_iqr(x) FROM t",
              "SELECT dp_iqr_ci(x, epsilon := 1) FROM t",
              "SELECT dp_iqr(x, epsilon := 1, level := 0.9) FROM t"):
        assert plans.compile_query(q) is None, q
    with pytest.raises(plans.ParameterError, match="epsilon"):
        plans.compile_query("SELECT dp_iqr(x, epsilon := 0) FROM t")
