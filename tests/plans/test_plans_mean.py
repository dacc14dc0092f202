"""Summary plans for dp_mean / dp_sum (issue 17): the DuckDB passes (dpsql.plans.mean.MeanDuckSource) answer what
core.summary_mean's reference (MeanBatchSource) answers, byte for byte (radius histograms, clipped fixed-point
sums, the derived |x - c| source's bucket and tail passes), and the whole release equals the reference's on the
same matching keys."""

from __future__ import annotations

import numpy as np
import pytest
from test_plans import EXTREME, _group, _one_thread, _Replay

from dpsql import plans
from dpsql.core import summary_mean
from dpsql.core.batch import Batch
from dpsql.core.summary import raw_codes
from dpsql.noise import Rng
from dpsql.plans.mean import MeanDuckSource


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
            assert np.array_equal(src.clipped_sums(idx, l, h, centred, sens), ref.clipped_sums(idx, l, h, centred, sens))


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
