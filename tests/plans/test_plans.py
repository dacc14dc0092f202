"""Summary plans (issue 17): the compiled dp_median releases what core.summary's reference releases on the same
matching keys, byte for byte under a seeded generator (many groups, sizes, extreme values), and has the list
route's law (KS and chi2 over many runs: the matchings differ draw for draw, both are uniform); other queries fall
back to the macros.  Privacy: tests/plans/test_plans_privacy.py; the matching: tests/plans/test_matching.py."""

from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from plan_statements import blank
from plan_statements import run_recorded as _statements

import dpsql.duck as duck
from dpsql import plans
from dpsql.core import Params, get_method, scalefree, summary
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_quantile
from dpsql.noise import Rng
from dpsql.testing import random_ladder

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, np.nan, 5e-324, 2.0**-1060, 9.3e18]


def _group(r: np.random.Generator, n: int) -> np.ndarray:
    kind = r.integers(0, 6)
    if kind == 0:
        return r.normal(0, 1, n)
    if kind == 1:
        return r.lognormal(0, 3, n) * r.choice([-1, 1], n)
    if kind == 2:
        return np.round(r.normal(5, 2, n))  # ties
    if kind == 3:
        return r.choice(EXTREME, n)
    if kind == 4:
        return np.full(n, 7.0)
    return r.normal(1e6, 10, n)


def _list_route(lists: list[np.ndarray], eps: float, seed: int) -> np.ndarray:
    params = Params(epsilon=eps, p=0.5)
    return run_quantile(Batch.from_lists(lists), budget_of(get_method("quantile", "scalefree"), params), params,
                        Rng.seeded(seed))


class _Replay(summary.BatchSource):
    """core.summary's reference source with the SQL route's matching: a pass over some groups draws one key per
    row of those groups (NULL and NaN rows included) with ``plans.matching_words`` and joins them by position
    (the table's order, with one thread); each group is ordered by its rows' keys and consecutive rows pair.
    ``pos[i]``: the table positions of group i's rows."""

    def __init__(self, lists: list[np.ndarray], pos: list[np.ndarray]) -> None:
        super().__init__(Batch.from_lists(lists))
        self.lists, self.pos = lists, pos

    def gap_histogram(self, groups: np.ndarray, rng: Rng, first: np.ndarray | None = None, rate: float = 1.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        everyone = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *(self.pos[gi] for gi in groups)]))
        words = np.concatenate([np.zeros(0, dtype=np.uint64), *plans.matching_words(rng, everyone.size)])
        group = np.empty(everyone.size, dtype=np.int64)
        value = np.empty(everyone.size)
        for i, gi in enumerate(groups):
            at = np.searchsorted(everyone, self.pos[gi])
            group[at], value[at] = i, self.lists[gi]
        ok = ~np.isnan(value)
        if rate < 1.0:  # the SQL route's coins (a word below 2**64 rate), then new words for the kept rows in order
            ok &= words < np.uint64(round(rate * 2.0**64))
            words = np.zeros(everyone.size, dtype=np.uint64)
            words[ok] = np.concatenate([np.zeros(0, dtype=np.uint64), *plans.matching_words(rng, int(ok.sum()))])
        gs, ks = [], []
        for i in range(groups.size):
            mine = ok & (group == i)
            v, keys = np.clip(value[mine], -(2.0**1000), 2.0**1000), words[mine]
            assert np.unique(keys).size == keys.size  # no tie: no rerun in these tests
            w = v[np.argsort(keys)]
            m = w.size // 2
            gs.append(np.full(m, i))
            ks.append(summary.gap_keys(np.abs(w[0:2 * m:2] - w[1:2 * m:2])))
        return self._count(np.concatenate(gs).astype(np.int64), np.concatenate(ks).astype(np.int64))


def _one_thread(g: np.ndarray | None, x: np.ndarray) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"x": x} if g is None else {"g": g, "x": x}))
    return con


def _replay_case(trial: int, p: float, small: float = 0.0) -> None:
    r = np.random.default_rng(trial)
    G = int(r.integers(1, 5))
    gs, xs = [], []
    for g in range(G):
        n = int(r.choice([0, 1, 5, 40, 300, 3000]))
        gs.append(np.full(n, g))
        xs.append(_group(r, n))
    g, x = np.concatenate(gs), np.concatenate(xs)
    eps = float(r.choice([0.1, 1.0, 5.0]))
    con = _one_thread(g, x)
    call = "dp_median(x, " if p == 0.5 else f"dp_quantile(x, {p!r}, "
    got = plans.run(con, f"SELECT g, {call}epsilon := {eps}) AS m FROM t GROUP BY g", Rng.seeded(trial))
    order = got.column("g").to_pylist()
    pos = np.arange(x.size)
    src = _Replay([x[g == k] for k in order], [pos[g == k] for k in order])
    want = summary.median(src, eps, Rng.seeded(trial), p, small=small)
    assert np.array_equal(got.column("m").to_numpy(zero_copy_only=False).astype(float), want, equal_nan=True)


@pytest.mark.parametrize("trial", range(24))
def test_same_releases_as_the_reference_on_the_same_matching(trial: int, floor_sample: bool) -> None:
    """Byte for byte: the SQL passes and core.summary's reference source, given the same matching keys (the rest
    of the mechanism draws exactly as the list route)."""
    _replay_case(trial, 0.5)


@pytest.mark.parametrize("trial", range(30))
def test_quantile_same_releases_as_the_reference_on_the_same_matching(trial: int, floor_sample: bool) -> None:
    """p != 1/2: wide groups through the passes, near groups through the rows pass, byte for byte."""
    _replay_case(100 + trial, [0.01, 0.1, 0.25, 0.75, 0.9, 0.999][trial % 6])


@pytest.mark.parametrize("trial", range(24))
def test_hybrid_same_releases_as_the_reference(trial: int, floor_sample: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid route (SMALL_ROWS 200: groups of 0-40 rows read as rows, of 300 and 3000 through the passes, the
    split by released count): byte for byte core.summary's reference with the same ``small``."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 200.0)
    _replay_case(900 + trial, [0.5, 0.5, 0.1, 0.9][trial % 4], 200.0)


@pytest.mark.parametrize("trial", range(12))
def test_same_releases_whatever_the_ladder(trial: int, floor_sample: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucket passes' shifts (per group, a column of the parameters when groups differ) change nothing: random
    ladders, other ones in the SQL run and in the reference, byte for byte."""
    monkeypatch.setattr(summary, "ladder", random_ladder(np.random.default_rng(trial)))
    _replay_case(700 + trial, [0.5, 0.1, 0.9][trial % 3])


@pytest.mark.parametrize("trial", range(6))
def test_first_histogram_on_its_own_pass_is_the_same(trial: int, floor_sample: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The first bucket histogram as a pass of its own (DuckSource.FUSE_FIRST off) instead of in the gap pass's
    scan: the same releases, byte for byte."""
    monkeypatch.setattr(plans.DuckSource, "FUSE_FIRST", False)
    monkeypatch.setattr(summary, "ladder", random_ladder(np.random.default_rng(50 + trial)))
    _replay_case(800 + trial, [0.5, 0.1, 0.9][trial % 3])


def test_rate_classes_on_the_same_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of 400, 4,000 and 40,000 rows with FLOOR_KEEP = 512: rates 1, 1/4 and 1/64 in one class of the median,
    three gap histograms whose first-histogram counts are merged for the first bucket pass (no pass of its own):
    byte for byte the reference's releases, with 1 + 1 + 2 + 2 + 2 + 1 passes."""
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 512.0)
    r = np.random.default_rng(21)
    sizes = (400, 4000, 40000)
    xs = [r.lognormal(0, 2, n) for n in sizes]
    g, x = np.repeat(np.arange(3), sizes), np.concatenate(xs)
    con = _one_thread(g, x)
    calls = []
    fetch = plans._fetch

    def counting(c: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pa.Table:
        calls.append(sql)
        return fetch(c, sql, params)

    monkeypatch.setattr(plans, "_fetch", counting)
    got = plans.run(con, "SELECT g, dp_median(x, epsilon := 2.0) AS m FROM t GROUP BY g", Rng.seeded(21))
    order = got.column("g").to_pylist()
    pos = np.arange(x.size)
    want = summary.median(_Replay([x[g == k] for k in order], [pos[g == k] for k in order]), 2.0, Rng.seeded(21))
    assert np.array_equal(got.column("m").to_numpy(zero_copy_only=False).astype(float), want, equal_nan=True)
    assert sorted(scalefree.floor_rate(np.array(sizes, dtype=float), 0.1)) == [1 / 64, 1 / 4, 1.0]
    assert len(calls) == 9  # count; gaps at rate 1; coins and matching at 1/4 and at 1/64; two buckets; tails


def test_passes_do_not_depend_on_the_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the floor subsampled (FLOOR_KEEP = 64: rates below 1), the same group sizes and the same generator
    give the same passes, statement for statement (up to the registered names), whatever the values: tame, or
    +-1e300, +-inf, huge integers, subnormals and a far outlier."""
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 64.0)
    sizes = (30, 300, 3000)
    g = np.repeat(np.arange(3), sizes)
    r = np.random.default_rng(8)
    tame = r.normal(0, 1, g.size)
    wild = r.choice([v for v in EXTREME if not np.isnan(v)], g.size)  # NaN rows would change the sizes
    wild[5] = 1e15
    fetch = plans._fetch
    runs = []
    for x in (tame, wild):
        calls = []

        def counting(c: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None, calls: list = calls
                     ) -> pa.Table:
            calls.append(blank(sql))
            return fetch(c, sql, params)

        monkeypatch.setattr(plans, "_fetch", counting)
        plans.run(_one_thread(g, x), "SELECT g, dp_median(x, epsilon := 1.0) AS m FROM t GROUP BY g", Rng.seeded(8))
        runs.append(calls)
    assert runs[0] == runs[1] and any("_tag" in q for q in runs[0])


def test_one_group_with_a_filter_on_the_same_matching(floor_sample: bool) -> None:
    r = np.random.default_rng(5)
    x = np.concatenate([r.lognormal(3, 2, 2000), r.choice(EXTREME, 50)])
    k = r.integers(0, 3, x.size)
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"x": x, "k": k}))
    got = plans.run(con, "SELECT dp_quantile(x, 0.5, epsilon := 0.5) AS m FROM t WHERE k < 2", Rng.seeded(5))
    keep = k < 2
    want = summary.median(_Replay([x[keep]], [np.arange(keep.sum())]), 0.5, Rng.seeded(5))
    assert np.array_equal(got.column("m").to_numpy(zero_copy_only=False).astype(float), want, equal_nan=True)


DATASETS = {
    "normal": lambda r: r.normal(0, 1, 60),
    "ties": lambda r: np.round(r.normal(5, 2, 60)),
    "equal": lambda r: np.full(40, 7.0),
    "extreme": lambda r: r.choice(EXTREME, 60),
    "far_outlier": lambda r: np.concatenate([r.normal(0, 1, 40), [1e300]]),
}


@pytest.mark.parametrize("name", list(DATASETS))
def test_same_law_as_the_list_route(name: str, floor_sample: bool) -> None:
    """The matching is no longer the list route's draw for draw, only in law (uniform in both): the releases
    of one dataset, 1500 independent runs each (one group per run), pass a two-sample KS test and a chi2 test
    on the released values' quantile bins against the list route; with the floor subsampled too (coins and
    kept rows' matching in SQL, helpers.subsample and random_pairs in the list route)."""
    from scipy.stats import chi2_contingency, ks_2samp

    d = DATASETS[name](np.random.default_rng(11))
    runs, eps = 1500, 1.0
    g = np.repeat(np.arange(runs), d.size)
    con = duckdb.connect()
    con.register("t", pa.table({"g": g, "x": np.tile(d, runs)}))
    a = plans.run(con, f"SELECT g, dp_median(x, epsilon := {eps}) AS m FROM t GROUP BY g", Rng.seeded(1))
    a = a.column("m").to_numpy(zero_copy_only=False).astype(float)
    b = _list_route([d] * runs, eps, 2)
    fa, fb = a[~np.isnan(a)], b[~np.isnan(b)]
    assert abs(fa.size - fb.size) < 6 * np.sqrt(runs) + 1
    assert ks_2samp(fa, fb).pvalue > 1e-3
    edges = np.unique(np.quantile(np.concatenate([fa, fb]), np.linspace(0, 1, 11)[1:-1]))
    ca = np.bincount(np.searchsorted(edges, fa), minlength=edges.size + 1)
    cb = np.bincount(np.searchsorted(edges, fb), minlength=edges.size + 1)
    table = np.array([ca, cb])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] > 1:
        assert chi2_contingency(table).pvalue > 1e-3


def _both_routes(d: np.ndarray, runs: int, p: float, eps: float, seed_plans: int, seed_list: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The answered releases of ``runs`` groups holding ``d`` each, through the plans (dp_median at p = 1/2, else
    dp_quantile) and through the list route's run_quantile, each from its own seeded generator."""
    g = np.repeat(np.arange(runs), d.size)
    con = duckdb.connect()
    con.register("t", pa.table({"g": g, "x": np.tile(d, runs)}))
    call = "dp_median(x, " if p == 0.5 else f"dp_quantile(x, {p}, "
    a = plans.run(con, f"SELECT g, {call}epsilon := {eps}) AS m FROM t GROUP BY g", Rng.seeded(seed_plans))
    a = a.column("m").to_numpy(zero_copy_only=False).astype(float)
    params = Params(epsilon=eps, p=p)
    b = run_quantile(Batch.from_lists([d] * runs), budget_of(get_method("quantile", "scalefree"), params), params,
                     Rng.seeded(seed_list))
    return a[~np.isnan(a)], b[~np.isnan(b)]


@pytest.mark.parametrize("p", [0.1, 0.9])
def test_quantile_same_law_as_the_list_route(p: float) -> None:
    """p != 1/2 on groups of 60 (the near route at eps 1) and of 3000 (the wide route): KS per size."""
    from scipy.stats import ks_2samp

    r = np.random.default_rng(12)
    runs = 600
    for d, eps in ((r.lognormal(0, 2, 60), 1.0), (r.normal(5, 1, 3000), 1.0)):
        fa, fb = _both_routes(d, runs, p, eps, 3, 4)
        assert abs(fa.size - fb.size) < 6 * np.sqrt(runs) + 1
        assert ks_2samp(fa, fb).pvalue > 1e-3, (p, d.size)


def test_compiles_only_what_it_owns() -> None:
    assert plans.compile_query("SELECT g AS k, dp_median(x, epsilon := 1) FROM t WHERE y > 0 GROUP BY g")
    assert plans.compile_query("SELECT dp_quantile(x, 0.9, epsilon := 1) FROM t").calls[0].p == 0.9
    for q in ("SELECT dp_median(x, epsilon := 1, lower := 0) FROM t",
              "SELECT dp_quantile(x, 1.5, epsilon := 1) FROM t",
              "SELECT dp_quantile(x, y, epsilon := 1) FROM t",
              "SELECT dp_quantile(x, 0.9, epsilon := 1, level := 0.9) FROM t",
              "SELECT dp_mean_ci(x, epsilon := 1) FROM t",
              "SELECT g, dp_median(x, epsilon := 1) FROM t GROUP BY g HAVING count(*) > 1",
              "SELECT h, dp_median(x, epsilon := 1) FROM t GROUP BY g",
              "SELECT dp_median(x, epsilon := 1) FROM t ORDER BY 1"):
        assert plans.compile_query(q) is None, q


def test_parameters_by_position_are_the_named_ones() -> None:
    """``dp_median(x, e)`` is ``dp_median(x, epsilon := e)`` (the macros' order, dpsql.surface.NAMED); a NULL
    parameter is one not given; bounds by position are not owned (the macros answer them)."""
    same = {"SELECT dp_median(x, 0.5) FROM t": "SELECT dp_median(x, epsilon := 0.5) FROM t",
            "SELECT dp_quantile(x, 0.9, 2) FROM t": "SELECT dp_quantile(x, 0.9, epsilon := 2) FROM t",
            "SELECT g, dp_mean(x, 1) FROM t GROUP BY g": "SELECT g, dp_mean(x, epsilon := 1) FROM t GROUP BY g",
            "SELECT dp_sum(x, 1, NULL, NULL, 'scalefree') FROM t": "SELECT dp_sum(x, epsilon := 1) FROM t",
            "SELECT dp_var(x, 1, method := 'asymmetric') FROM t":
                "SELECT dp_var(x, epsilon := 1, method := 'asymmetric') FROM t",
            "SELECT dp_var(x, 1) FROM t": "SELECT dp_var(x, epsilon := 1, method := 'scalefree') FROM t",
            "SELECT dp_iqr(x, 1) FROM t": "SELECT dp_iqr(x, epsilon := 1) FROM t",
            "SELECT dp_stddev(x, 0.25) FROM t": "SELECT dp_stddev(x, epsilon := 0.25) FROM t"}
    for q, ref in same.items():
        got, want = plans.compile_query(q), plans.compile_query(ref)
        assert want is not None and got is not None, q
        assert [dataclasses.replace(c, name="") for c in got.calls] == [
            dataclasses.replace(c, name="") for c in want.calls], q
    for q in ("SELECT dp_median(x, 1, 0, 10) FROM t",  # lower and upper
              "SELECT dp_median(x, 1, epsilon := 1) FROM t",  # epsilon twice
              "SELECT dp_median(x, NULL) FROM t",
              "SELECT dp_quantile(x, 0.5, 1, 0) FROM t",
              "SELECT dp_median(x, 1, NULL, NULL, 'threshold') FROM t",
              "SELECT dp_median(x, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL) FROM t"):
        assert plans.compile_query(q) is None, q


def test_positional_epsilon_releases_what_the_named_one_does() -> None:
    g = np.repeat(np.arange(3), 4000)
    x = np.random.default_rng(5).lognormal(0.0, 1.0, g.size)
    named = plans.run(_one_thread(g, x), "SELECT g, dp_median(x, epsilon := 1.0) AS m FROM t GROUP BY g",
                      Rng.seeded(3))
    pos = plans.run(_one_thread(g, x), "SELECT g, dp_median(x, 1.0) AS m FROM t GROUP BY g", Rng.seeded(3))
    assert named.sort_by("g").column("m").to_pylist() == pos.sort_by("g").column("m").to_pylist()


def test_falls_back_to_the_macros() -> None:
    con = duck.install(duckdb.connect(), Rng.seeded(1))
    con.execute("CREATE TABLE t AS SELECT range::DOUBLE AS x FROM range(500)")
    got = plans.run(con, "SELECT dp_median(x, epsilon := 1, lower := 0, upper := 500) AS m FROM t")
    assert got.num_rows == 1 and 150 < got.column("m")[0].as_py() < 350


def test_the_trusted_entry_point_is_the_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """dpsql.sql(con, query): compiled queries through the plans, the rest through the macros.  Seeded (dpsql.sql
    takes no generator): under OS noise the mean of 0..2999 at eps 1 is > 1000 off in ~2.5e-4 of runs."""
    import dpsql

    monkeypatch.setattr(plans, "system_rng", lambda: Rng.seeded(3))
    con = dpsql.install(duckdb.connect())
    con.execute("CREATE TABLE t AS SELECT (range % 3)::INTEGER AS g, range::DOUBLE AS x FROM range(3000)")
    q = "SELECT g, dp_median(x, epsilon := 1) AS m FROM t GROUP BY g"
    assert plans.compile_query(q) is not None
    got = dpsql.sql(con, q)
    assert sorted(got.column("g").to_pylist()) == [0, 1, 2]
    assert all(500 < v < 2500 for v in got.column("m").to_pylist())
    got = dpsql.sql(con, "SELECT dp_mean(x, epsilon := 1) AS m FROM t")
    assert got.num_rows == 1 and 500 < got.column("m")[0].as_py() < 2500


def test_bad_epsilon_names_the_argument() -> None:
    with pytest.raises(plans.ParameterError, match="epsilon"):
        plans.compile_query("SELECT dp_median(x, epsilon := -1) FROM t")


@pytest.mark.parametrize(("sizes", "sampled", "passes"), [((20000, 20000), False, 5), ((20000, 20000), True, 5),
                                                         ((70000, 70000), True, 6)])
def test_production_route(sizes: tuple[int, int], sampled: bool, passes: int,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """CSPRNG matching keys, a fixed number of passes, answers near the median.  Groups of 20,000 rows have the
    floor on every row (rate 1 whether FLOOR_SAMPLE is on or off); of 70,000 rows, with it on, on a Poisson
    subsample at rate 1/4: one pass more (the coins, then the kept rows' matching)."""
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", sampled)
    r = np.random.default_rng(0)
    con = duckdb.connect()
    con.register("t", pa.table({"g": np.repeat(["a", None], sizes), "x": r.normal(100, 1, sum(sizes))}))
    calls = []
    fetch = plans._fetch

    def counting(c: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pa.Table:
        calls.append((sql, params))
        return fetch(c, sql, params)

    plans._fetch = counting
    try:
        got = plans.run(con, "SELECT g, dp_median(x, epsilon := 1) AS m FROM t GROUP BY g")
    finally:
        plans._fetch = fetch
    assert set(got.column("g").to_pylist()) == {"a", None}
    assert all(abs(v - 100) < 0.5 for v in got.column("m").to_pylist())
    # count, then one class: gaps (and the first bucket histogram; rate 1/4: coins and histogram, then the kept
    # rows' matching), two bucket passes, tails
    assert len(calls) == passes



def test_hybrid_one_rows_pass_for_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """dp_median and dp_quantile(0.9) on one value, groups of 50, 400 and 6,000 rows, SMALL_ROWS 1000: the small
    groups of both calls come back in one rows pass (the statement selecting _rows_x), the large group takes the
    passes per call; the releases are the reference's (counts of both calls first, then each call)."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 1000.0)
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", False)
    r = np.random.default_rng(4)
    sizes = (50, 400, 6000)
    g = np.repeat(np.arange(3), sizes)
    x = r.lognormal(0, 1, g.size)
    got, calls = _statements(monkeypatch, _one_thread(g, x), "SELECT g, dp_median(x, epsilon := 2.0) AS m, "
                             "dp_quantile(x, 0.9, epsilon := 2.0) AS q FROM t GROUP BY g", Rng.seeded(4))
    assert sum("_rows_x" in q for q in calls) == 1
    # count, rows, then per call gaps, two buckets, tails
    assert len(calls) == 2 + 2 * 4
    order = got.column("g").to_pylist()
    pos = np.arange(x.size)
    src = [_Replay([x[g == k] for k in order], [pos[g == k] for k in order]) for _ in range(2)]
    rng = Rng.seeded(4)
    n_hat = [summary.released_count(s, 2.0, rng, p) for s, p in zip(src, (0.5, 0.9), strict=True)]
    want = [summary.median(s, 2.0, rng, p, n_hat=h, small=1000.0) for s, p, h in zip(src, (0.5, 0.9), n_hat,
                                                                                       strict=True)]
    for col, w in zip(("m", "q"), want, strict=True):
        assert np.array_equal(got.column(col).to_numpy(zero_copy_only=False).astype(float), w, equal_nan=True)


def test_hybrid_passes_do_not_depend_on_the_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid route (SMALL_ROWS 500, FLOOR_KEEP 64): the same group sizes and the same generator give the same
    statements, whatever the values (tame, or +-1e300, +-inf, huge integers, subnormals and a far outlier): the
    split is by released counts only, the rows pass and the passes by sizes and released values."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 500.0)
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(scalefree, "FLOOR_KEEP", 64.0)
    sizes = (30, 300, 480, 520, 3000)
    g = np.repeat(np.arange(len(sizes)), sizes)
    r = np.random.default_rng(9)
    tame = r.normal(0, 1, g.size)
    wild = r.choice([v for v in EXTREME if not np.isnan(v)], g.size)
    wild[5] = 1e15
    for p in (0.5, 0.1):
        call = "dp_median(x, " if p == 0.5 else f"dp_quantile(x, {p}, "
        sql = f"SELECT g, {call}epsilon := 1.0) AS m FROM t GROUP BY g"
        runs = [_statements(monkeypatch, _one_thread(g, x), sql, Rng.seeded(9))[1] for x in (tame, wild)]
        assert runs[0] == runs[1] and any("_rows_x" in q for q in runs[0])
        assert any("_tag" in q for q in runs[0])


@pytest.mark.parametrize("p", [0.5, 0.9])
def test_hybrid_same_law_as_the_list_route(p: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """SMALL_ROWS at the groups' size (60 rows, eps 1: the released count sends about half the groups each way):
    the releases pass KS and chi2 against the list route (800 runs; the rows route in chunks)."""
    from scipy.stats import chi2_contingency, ks_2samp

    monkeypatch.setattr(plans, "SMALL_ROWS", 60.0)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 5000.0)  # the rows route in chunks of ~80 groups
    d = np.random.default_rng(13).lognormal(0, 2, 60)
    runs, eps = 800, 1.0 if p == 0.5 else 5.0  # at p = 0.9, eps 5 routes 60 rows wide
    fa, fb = _both_routes(d, runs, p, eps, 6, 7)
    assert abs(fa.size - fb.size) < 6 * np.sqrt(runs) + 1
    assert ks_2samp(fa, fb).pvalue > 1e-3
    edges = np.unique(np.quantile(np.concatenate([fa, fb]), np.linspace(0, 1, 11)[1:-1]))
    table = np.array([np.bincount(np.searchsorted(edges, f), minlength=edges.size + 1) for f in (fa, fb)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] > 1:
        assert chi2_contingency(table).pvalue > 1e-3
