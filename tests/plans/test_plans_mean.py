"""Summary plans for dp_mean / dp_sum (issue 17): the DuckDB passes (dpsql.plans.MeanDuckSource) answer what
core.summary_mean's reference (MeanBatchSource) answers, byte for byte (radius histograms, clipped fixed-point
sums, the derived |x - c| source's bucket and tail passes), and the whole release equals the reference's on the
same matching keys."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from test_plans import EXTREME, _group, _one_thread, _Replay

import dpsql
from dpsql import plans
from dpsql.core import Params, get_method, scalefree, summary_mean
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.summary import raw_codes
from dpsql.noise import Rng
from dpsql.plans import MeanDuckSource


def _table(r: np.random.Generator, sizes: tuple[int, ...] = (0, 1, 5, 40, 300, 3000)) -> tuple[np.ndarray, ...]:
    G = int(r.integers(1, 6))
    gs, xs = [], []
    for g in range(G):
        n = int(r.choice(sizes))
        gs.append(np.full(n, g))
        xs.append(_group(r, n) if r.random() < 0.8 else r.choice(EXTREME, n))
    return np.concatenate(gs), np.concatenate(xs)


def _sources(g: np.ndarray, x: np.ndarray, rng: Rng) -> tuple[MeanDuckSource, np.ndarray, list, list]:
    """The DuckDB source over ``SELECT g, ... FROM t GROUP BY g`` (the count pass as plans.run runs it), the group
    order, and the lists and table positions of each group in that order."""
    con = _one_thread(g, x)
    plan = plans.compile_query("SELECT g, dp_median(x, epsilon := 1.0) FROM t GROUP BY g")
    groups = plans._fetch(con, "SELECT g AS _k0, count(*) FILTER (WHERE x IS NOT NULL AND NOT isnan(x)) AS _n, "
                               "count(*) AS _rows FROM t GROUP BY ALL")
    src = MeanDuckSource(con, plan, 0, groups.select(["_k0"]), plans._np(groups, "_n"), rng,
                         plans._np(groups, "_rows"))
    order = groups.column("_k0").to_pylist()
    pos = np.arange(x.size)
    return src, np.array(order), [x[g == k] for k in order], [pos[g == k] for k in order]


class _MeanReplay(_Replay, summary_mean.MeanBatchSource):
    """The reference with the SQL route's matching keys (tests/plans/test_plans.py) and the mean's summaries."""


@pytest.mark.parametrize("trial", range(16))
def test_radius_histogram_and_clipped_sums_are_the_reference(trial: int) -> None:
    r = np.random.default_rng(trial)
    g, x = _table(r)
    src, _, lists, _ = _sources(g, x, Rng.seeded(trial))
    ref = summary_mean.MeanBatchSource(Batch.from_lists(lists))
    G = len(lists)
    idx = np.arange(G)
    for _ in range(4):
        c = np.clip(r.choice([0.0, -0.0, 1.0, -2.5, 5.0, 1e6, 1e300, -1e300, 5e-324, 7.0, np.inf], G), -2.0**1000,
                    2.0**1000)
        s0 = np.ldexp(1.0, r.integers(-1000, 60, G))
        got, want = src.radius_histogram(idx, c, s0), ref.radius_histogram(idx, c, s0)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b)
        rad = np.where(r.random(G) < 0.2, 0.0, np.ldexp(1.0, r.integers(-30, 1002, G)) * r.random(G))
        l, h = c - rad, c + rad
        cc = l / 2.0 + h / 2.0
        for centred, sens in ((cc, h / 2.0 - l / 2.0), (None, np.maximum(np.abs(l), np.abs(h)))):
            want = ref.clipped_sums(idx, l, h, centred, sens)
            assert np.array_equal(src.clipped_sums(idx, l, h, centred, sens), want)


@pytest.mark.parametrize("trial", range(10))
def test_derived_source_is_the_reference(trial: int) -> None:
    r = np.random.default_rng(100 + trial)
    g, x = _table(r)
    src, _, lists, _ = _sources(g, x, Rng.seeded(trial))
    ref = summary_mean.MeanBatchSource(Batch.from_lists(lists))
    G = len(lists)
    sub = np.flatnonzero(r.random(G) < 0.7)
    if not sub.size:
        sub = np.arange(G)
    c = np.clip(r.choice([0.0, 1.0, 1e300, -1e300, 2.0**1000, 5.0], sub.size), -2.0**1000, 2.0**1000)
    d, dref = src.derived(sub, c), ref.derived(sub, c)
    local = np.arange(sub.size)
    assert np.array_equal(d.sizes(), dref.sizes())
    e = r.integers(-1074, 1000, sub.size)
    for shift in (36, 20, 0):
        for a, b in zip(d.bucket_histogram(local, e, np.full(sub.size, shift), None, None, None),
                        dref.bucket_histogram(local, e, np.full(sub.size, shift), None, None, None), strict=True):
            assert np.array_equal(a, b)
    vals = np.concatenate([np.abs(v[~np.isnan(v)].clip(-2.0**1000, 2.0**1000) - cg) for v, cg in
                           zip((lists[i] for i in sub), c, strict=True)] + [np.zeros(0)])
    which = np.repeat(local, 2)
    thr = raw_codes(vals[:which.size], e[which]) if vals.size >= which.size else np.zeros(which.size, np.int64)
    assert np.array_equal(d.rank_counts(local, e, which, thr), dref.rank_counts(local, e, which, thr))


def _radius_sources(lists: list, c: np.ndarray, s0: np.ndarray, trial: int) -> tuple:
    """The DuckDB source over the groups ``lists`` (:func:`_sources`), the reference source over the same lists in
    the source's group order, c and s0 in that order, and the reference's radius histogram."""
    x = np.concatenate(lists)
    gcol = np.repeat(np.arange(len(lists)), [a.size for a in lists])
    src, order, got_lists, _ = _sources(gcol, x, Rng.seeded(trial))
    ref = summary_mean.MeanBatchSource(Batch.from_lists(got_lists))
    cc, ss = c[order], s0[order]
    return src, ref, cc, ss, ref.radius_histogram(np.arange(len(lists)), cc, ss)


@pytest.mark.parametrize("trial", range(12))
def test_radius_histogram_on_the_ladders_edges(trial: int) -> None:
    """Rows on and next to the range ends ``c -+ x_k`` (and to powers of two and their sqrt 2 multiples around c,
    where the window's estimate of k0 may be off by one), c itself and extremes: the pass's exact one-sided
    comparisons, with and without the cap's first shift, give the reference's histogram (and never trip the
    guard)."""
    from dpsql.core.ranges import _step

    r = np.random.default_rng(700 + trial)
    G = int(r.integers(1, 4))
    c = np.clip(r.choice([0.0, -0.0, 1.0, -3.0, 1e-300, 5e-324, 1e300, -2.0**1000, 7.5], G), -2.0**1000, 2.0**1000)
    s0 = np.ldexp(1.0, r.integers(-1000, 40, G))
    lists = []
    for g in range(G):
        k = r.integers(2, summary_mean.RADIUS_QUERIES + 1, 60)
        with np.errstate(over="ignore"):
            x = _step(np.full(k.size, s0[g]), k - 2, True)
            ends = np.concatenate([c[g] + x, c[g] - x])
            e = r.integers(-1074, 1000, 40)
            pw = np.concatenate([np.ldexp(1.0, e), np.ldexp(1.0, e) * np.sqrt(2.0)])
            near = np.concatenate([c[g] + pw, c[g] - pw])
        v = np.concatenate([ends, near, [c[g]] * 3, EXTREME])
        v = v[np.isfinite(v)]
        v = np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf)])
        lists.append(r.permutation(np.clip(v, -2.0**1000, 2.0**1000)))
    src, ref, cc, ss, want = _radius_sources(lists, c, s0, trial)
    idx = np.arange(G)
    for first in (None, np.full(G, 29)):
        for a, b in zip(src.radius_histogram(idx, cc, ss, first), want, strict=True):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("trial", range(10))
def test_radius_pass_counts_the_caps_first_bucket_pass(trial: int) -> None:
    """radius_histogram with ``first`` (the cap's first shift per group): the same radius histogram, and the
    derived source of the same groups and c answers its first bucket pass from that scan (no pass of its own) with
    the reference's counts; another c, or another shift, runs the pass."""
    r = np.random.default_rng(500 + trial)
    g, x = _table(r)
    src, _, lists, _ = _sources(g, x, Rng.seeded(trial))
    ref = summary_mean.MeanBatchSource(Batch.from_lists(lists))
    G = len(lists)
    sub = np.flatnonzero(r.random(G) < 0.7)
    if not sub.size:
        sub = np.arange(G)
    local = np.arange(sub.size)
    for rep in range(3):
        c = np.clip(r.choice([0.0, -0.0, 1.0, -2.5, 1e300, -1e300, 5e-324, 2.0**1000], sub.size), -2.0**1000,
                    2.0**1000)
        s0 = np.ldexp(1.0, r.integers(-1000, 60, sub.size))
        first = r.integers(0, 37, sub.size) if rep else np.full(sub.size, int(r.integers(0, 37)))
        got, want = src.radius_histogram(sub, c, s0, first), ref.radius_histogram(sub, c, s0, first)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b)
        e = r.integers(-1074, 1000, sub.size)
        before = src.passes
        d = src.derived(sub, c)
        for a, b in zip(d.bucket_histogram(local, e, first, None, None, None),
                        ref.derived(sub, c).bucket_histogram(local, e, first, None, None, None), strict=True):
            assert np.array_equal(a, b)
        assert src.passes == before  # counted in the radius pass
        src.radius_histogram(sub, c, s0, first)
        other = src.derived(sub, c * 0.5 + 1.0)  # another c (none is 2)
        other.bucket_histogram(local, e, first, None, None, None)
        assert src.passes == before + 2  # the radius pass and the other c's own first pass


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("trial", range(12))
def test_same_releases_as_the_reference_on_the_same_matching(trial: int, kind: str, floor_sample: bool) -> None:
    r = np.random.default_rng(200 + trial)
    g, x = _table(r, (0, 1, 40, 300, 900, 3000))
    eps = float(r.choice([0.1, 0.5, 1.0, 5.0]))
    src, _, lists, pos = _sources(g, x, Rng.seeded(trial))
    fn = getattr(summary_mean, kind)
    got = fn(src, eps, Rng.seeded(trial))
    want = fn(_MeanReplay(lists, pos), eps, Rng.seeded(trial))
    assert np.array_equal(got, want, equal_nan=True)


def _run(g: np.ndarray, x: np.ndarray, kind: str, eps: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    con = _one_thread(g, x)
    got = plans.run(con, f"SELECT g, dp_{kind}(x, epsilon := {eps!r}) AS m FROM t GROUP BY g", Rng.seeded(seed))
    return np.array(got.column("g").to_pylist()), got.column("m").to_numpy(zero_copy_only=False).astype(float)


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("trial", range(8))
def test_run_is_the_reference_on_the_same_matching(trial: int, kind: str, floor_sample: bool) -> None:
    """plans.run end to end (count pass, passes, dispatch) against the reference on the same keys: every group
    through the passes (SMALL_ROWS 0), and a mixed split (SMALL_ROWS 500: groups of 300 rows read as rows)."""
    r = np.random.default_rng(300 + trial)
    g, x = _table(r, (0, 1, 40, 300, 900, 3000))
    eps = float(r.choice([0.5, 1.0, 5.0]))
    for small in (0.0, 500.0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(plans, "SMALL_ROWS", small)
            order, got = _run(g, x, kind, eps, trial)
        pos = np.arange(x.size)
        src = _MeanReplay([x[g == k] for k in order], [pos[g == k] for k in order])
        want = getattr(summary_mean, kind)(src, eps, Rng.seeded(trial), small=small)
        assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("trial", range(8))
def test_run_all_rows_is_the_list_route(trial: int, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid route reading every group as rows releases what the list route releases, draw for draw."""
    monkeypatch.setattr(plans, "SMALL_ROWS", np.inf)
    r = np.random.default_rng(400 + trial)
    g, x = _table(r, (0, 1, 40, 300, 900, 3000))
    eps = float(r.choice([0.1, 0.5, 1.0, 5.0]))
    order, got = _run(g, x, kind, eps, trial)
    params = Params(epsilon=eps)
    run = scalefree.run_mean if kind == "mean" else scalefree.run_sum
    want = run(Batch.from_lists([x[g == k] for k in order]), budget_of(get_method(kind, "scalefree"), params), params,
               Rng.seeded(trial))
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("kind", ["mean", "sum"])
def test_one_group_all_rows_is_the_macro(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One group read as rows: plans.run and the installed macro (the list route) release the same value from the
    same seed."""
    monkeypatch.setattr(plans, "SMALL_ROWS", np.inf)
    x = np.random.default_rng(5).lognormal(0, 2, 2000)
    con = duckdb.connect()
    con.register("t", pa.table({"x": x}))
    got = plans.run(con, f"SELECT dp_{kind}(x, epsilon := 1.0) AS m FROM t", Rng.seeded(9)).column("m").to_pylist()
    dpsql.install(con, rng=Rng.seeded(9))
    want = con.sql(f"SELECT dp_{kind}(x, epsilon := 1.0) AS m FROM t").fetchall()
    assert got == [want[0][0]]


def test_compile_accepts_mean_and_sum_only_plain() -> None:
    plan = plans.compile_query("SELECT g, dp_mean(x, epsilon := 0.5) AS a, dp_sum(y, epsilon := 1, method := "
                               "'scalefree') AS b, dp_median(x, epsilon := 1) AS c FROM t GROUP BY g")
    assert [(c.aggregate, c.value, c.epsilon) for c in plan.calls] == [("mean", "x", 0.5), ("sum", "y", 1.0),
                                                                       ("quantile", "x", 1.0)]
    for sql in ("SELECT dp_mean(x, epsilon := 1, lower := 0, upper := 1) FROM t",
                "SELECT dp_sum(x, epsilon := 1, method := 'clipped') FROM t",
                "SELECT dp_mean_ci(x, epsilon := 1) FROM t", "SELECT dp_mean(x) FROM t",
                "SELECT dp_sum(x, 2, epsilon := 1) FROM t"):
        assert plans.compile_query(sql) is None, sql
    with pytest.raises(plans.ParameterError):
        plans.compile_query("SELECT dp_mean(x, epsilon := 0) FROM t")


def test_mean_sum_and_median_share_the_count_and_rows_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """dp_mean, dp_sum and dp_median of one value in one query: one rows pass for every small group of the three."""
    monkeypatch.setattr(plans, "SMALL_ROWS", np.inf)
    r = np.random.default_rng(7)
    g, x = np.repeat(np.arange(3), 500), r.normal(3, 1, 1500)
    con = _one_thread(g, x)
    seen = []
    real = plans._fetch
    monkeypatch.setattr(plans, "_fetch", lambda c, sql, params=None: seen.append(sql) or real(c, sql, params))
    out = plans.run(con, "SELECT g, dp_mean(x, epsilon := 1) AS a, dp_sum(x, epsilon := 1) AS b, "
                         "dp_median(x, epsilon := 1) AS c FROM t GROUP BY g", Rng.seeded(1))
    assert out.num_rows == 3 and len(seen) == 2  # the count pass and one rows pass
    assert np.all(np.abs(np.array(out.column("a").to_pylist()) - 3) < 0.5)


@pytest.mark.parametrize("trial", range(8))
def test_radius_pass_bits_on_subnormals_clamps_and_signed_zeros(trial: int) -> None:
    """The radius pass's IEEE-bits exponent, 2**ex, sqrt 2 flag and mantissa bits (normal |v - c|) and _exm's
    expressions (zero and subnormal |v - c|): differences that are zero (-0.0 - 0.0 is -0.0), subnormal, near powers
    of two and their sqrt 2 multiples down to 2**-1074, ladders from the mechanism's smallest s0 (B_MIN =
    2**-1000: the window clamped at 2 for every tiny difference) up; one group (literals) and several (columns),
    with and without the cap's first shift: the reference's radius histogram and the cap's first bucket counts."""
    r = np.random.default_rng(900 + trial)
    G = int(r.choice([1, 1, 3]))
    c = r.choice([0.0, -0.0, 5e-324, -1e-310, 2.0**-1022, 1.0], G)
    s0 = np.ldexp(1.0, r.choice([-1000, -999, -990, -500, 0], G))
    lists = []
    for g in range(G):
        e = r.integers(-1074, 1001, 60)
        pw = np.concatenate([np.ldexp(1.0, e), np.ldexp(1.0, e) * np.sqrt(2.0), np.ldexp(r.random(20), -1050)])
        v = np.concatenate([c[g] + pw, c[g] - pw, [0.0, -0.0, 5e-324, -5e-324, 2.0**1000, -2.0**1000, c[g]]])
        v = np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf)])
        lists.append(r.permutation(np.clip(v, -2.0**1000, 2.0**1000)))
    src, ref, cc, ss, want = _radius_sources(lists, c, s0, trial)
    idx = np.arange(G)
    for first in (None, np.full(G, 29), r.integers(0, 37, G)):
        for a, b in zip(src.radius_histogram(idx, cc, ss, first), want, strict=True):
            assert np.array_equal(a, b)
        if first is not None:
            e = r.integers(-1074, 1000, G)
            before = src.passes
            got = src.derived(idx, cc).bucket_histogram(idx, e, first, None, None, None)
            assert src.passes == before  # from the radius pass's keys
            for a, b in zip(got, ref.derived(idx, cc).bucket_histogram(idx, e, first, None, None, None), strict=True):
                assert np.array_equal(a, b)
