"""core.summary (issue 17): the median and the other quantiles from summaries have the list route's releases draw for
draw (the floor on every row, and on a Poisson subsample: FLOOR_SAMPLE on), and the floor is seed 003's IQR lower
bound on the same pairs."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.core import Params, get_method, summary
from dpsql.core.batch import Batch
from dpsql.core.ranges import iqr_lower_bound, random_pairs
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import E_MIN, E_TOP, FloatCodes, run_quantile
from dpsql.noise import Rng
from dpsql.testing import random_ladder

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, 5e-324, 2.0**-1060]


def _lists(r: np.random.Generator) -> list[np.ndarray]:
    out = []
    for _ in range(int(r.integers(1, 6))):
        n = int(r.choice([0, 1, 5, 30, 200, 2000]))
        kind = int(r.integers(0, 5))
        out.append([r.normal(0, 1, n), r.lognormal(0, 3, n) * r.choice([-1, 1], n), np.round(r.normal(5, 2, n)),
                    r.choice(EXTREME, n), r.normal(1e6, 10, n)][kind])
    return out


@pytest.mark.parametrize("trial", range(40))
def test_median_from_summaries_is_the_list_route(trial: int, floor_sample: bool) -> None:
    r = np.random.default_rng(trial)
    b = Batch.from_lists(_lists(r))
    eps = float(r.choice([0.1, 1.0, 5.0]))
    params = Params(epsilon=eps, p=0.5)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    got = summary.median(summary.BatchSource(b), eps, Rng.seeded(trial))
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(40))
def test_quantile_from_summaries_is_the_list_route(trial: int, floor_sample: bool) -> None:
    """p != 1/2: the wide groups through the summaries, the near groups through their rows, draw for draw."""
    r = np.random.default_rng(1000 + trial)
    lists = _lists(r)
    if trial % 2:  # large groups, so that the wide route runs too
        lists.append(r.lognormal(2, 1, 5000))
    b = Batch.from_lists(lists)
    eps = float(r.choice([0.1, 1.0, 5.0]))
    p = float(r.choice([0.01, 0.1, 0.25, 0.75, 0.9, 0.999]))
    params = Params(epsilon=eps, p=p)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    got = summary.quantile(summary.BatchSource(b), eps, Rng.seeded(trial), p)
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(10))
def test_floor_from_histogram_is_iqr_lower_bound(trial: int) -> None:
    r = np.random.default_rng(trial)
    b = Batch.from_lists(_lists(r)).sorted()
    pairs = random_pairs(b, Rng.seeded(trial))
    want = iqr_lower_bound(b, 0.3, Rng.seeded(100 + trial), pairs, ties=True)
    a, c, pg = pairs
    k = summary.gap_keys(np.abs(a - c))
    key, cnt = np.unique(np.stack([pg, k]), axis=1, return_counts=True) if pg.size else (np.zeros((2, 0), int), [])
    got = summary.floor_from_histogram(key[0], key[1], np.asarray(cnt, dtype=np.int64), b.groups, 0.3,
                                       Rng.seeded(100 + trial))
    assert np.array_equal(got, want)


def test_raw_cells_refine_the_codes() -> None:
    """Every value of a raw cell has the scalefree code of the cell's representative (true_codes is monotone)."""
    r = np.random.default_rng(3)
    x = np.concatenate([r.choice(EXTREME, 200), r.normal(0, 1, 500), r.lognormal(0, 20, 500)])
    x = np.clip(x, -2.0**1000, 2.0**1000)
    for e0 in (-1074, -40, 0, 5, 700, 1002):
        e = np.full(x.size, e0)
        raw = summary.raw_codes(x, e)
        codes = FloatCodes(x, np.arange(x.size + 1), e).take(np.arange(x.size), np.arange(x.size))
        assert np.array_equal(summary.true_codes(raw, e), codes)
        order = np.argsort(x, kind="stable")
        assert np.all(np.diff(raw[order]) >= 0)
    e = r.integers(-1074, 1003, x.size)  # a floor per row: every octave table at once
    codes = FloatCodes(x, np.arange(x.size + 1), e).take(np.arange(x.size), np.arange(x.size))
    assert np.array_equal(summary.true_codes(summary.raw_codes(x, e), e), codes)


@pytest.mark.parametrize("trial", range(20))
def test_releases_do_not_depend_on_the_ladder(trial: int, floor_sample: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any shifts (per group, not increasing pass to pass) give the list route's releases draw for draw: the
    ladder changes what the passes carry, never what the window reads."""
    r = np.random.default_rng(500 + trial)
    lists = _lists(r) + [r.lognormal(0, 1, 3000)]
    b = Batch.from_lists(lists)
    eps = float(r.choice([0.1, 1.0, 5.0]))
    p = float(r.choice([0.5, 0.1, 0.9]))
    params = Params(epsilon=eps, p=p)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    monkeypatch.setattr(summary, "ladder", random_ladder(np.random.default_rng(trial)))
    got = summary.median(summary.BatchSource(b), eps, Rng.seeded(trial), p)
    assert np.array_equal(got, want, equal_nan=True)


def test_ladder_is_bounded_and_refines() -> None:
    """The default ladder: 0 last, never increasing; at most ~n_hat / W buckets per octave at the second shift
    and the square root of that per octave or per kept bucket in each pass (bounded fan-out), from the released
    count only."""
    K = summary.K_BOUND
    n_hat = np.array([-5.0, 0.0, 60.0, 1e3, 1e7, 1e12])
    s = summary.ladder(n_hat, 0.9)
    assert s.shape == (6, 3) and np.all(s[:, -1] == 0) and np.all(np.diff(s, axis=1) <= 0)
    assert np.all(s[:, 0] <= summary.RAW_BITS)
    W = summary.window_reach(np.array([K]), 0.9)
    every = np.arange(E_MIN, E_TOP)
    assert K == FloatCodes(np.zeros(0), np.zeros(every.size + 1, dtype=np.int64), every).K.max()
    per_octave = 2.0 ** (summary.RAW_BITS - s[:, 1])
    assert np.all(per_octave <= np.maximum(2.0 * n_hat / W, 1.0))
    assert np.all(2.0 ** (summary.RAW_BITS - s[:, 0]) <= np.sqrt(2.0 * per_octave))
    assert np.all(2.0 ** (s[:, 0] - s[:, 1]) <= np.sqrt(2.0 * per_octave))


def test_first_buckets_are_the_raw_buckets() -> None:
    """A value's bucket from its sign, floor exponent and top mantissa bits (no floor needed) is its raw code's
    bucket, for every floor and every number of bits (zeros, subnormals, the clamp at 2**1000)."""
    r = np.random.default_rng(11)
    x = np.concatenate([r.choice(EXTREME, 300), r.normal(0, 1, 500), r.lognormal(0, 20, 500), [0.0, -0.0]])
    x = np.clip(x, -2.0**1000, 2.0**1000)
    a = np.abs(x)
    mant, ex2 = np.frexp(a)
    ex = np.where(a == 0, summary.ZERO_EXPONENT, ex2.astype(np.int64) - 1)
    for bits in (0, 1, 2, 5, 17, 36):
        m = np.where(a == 0, 0, np.floor(np.ldexp(2.0 * mant - 1.0, bits)).astype(np.int64))
        for e0 in (-1074, -1060, -40, -3, 0, 5, 700, 1002):
            e = np.full(x.size, e0)
            want = summary.bucket_of(summary.raw_codes(x, e), summary.RAW_BITS - bits)
            assert np.array_equal(summary.first_buckets(x < 0, ex, m, e, np.full(x.size, bits)), want)


class _Recording(summary.BatchSource):
    """A reference source that records the groups read as rows."""

    def __init__(self, batch: Batch) -> None:
        super().__init__(batch)
        self.read: list[np.ndarray] = []

    def batch(self, groups: np.ndarray) -> Batch:
        self.read.append(np.array(groups, copy=True))
        return super().batch(groups)


@pytest.mark.parametrize("trial", range(30))
def test_hybrid_all_rows_is_the_list_route(trial: int, floor_sample: bool) -> None:
    """``small`` above every released count: every group read as rows runs the list route's code, draw for draw
    (the count continued from :func:`summary.released_count`); the groups read are :func:`summary.row_groups`."""
    r = np.random.default_rng(3000 + trial)
    lists = _lists(r)
    if trial % 2:
        lists.append(r.lognormal(2, 1, 5000))
    b = Batch.from_lists(lists)
    eps = float(r.choice([0.1, 1.0, 5.0]))
    p = 0.5 if trial % 3 == 0 else float(r.choice([0.01, 0.1, 0.9, 0.999]))
    params = Params(epsilon=eps, p=p)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    src, rng = _Recording(b), Rng.seeded(trial)
    n_hat = summary.released_count(src, eps, rng, p)
    got = summary.median(src, eps, rng, p, n_hat=n_hat, small=np.inf)
    assert np.array_equal(got, want, equal_nan=True)
    read = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *src.read]))
    assert np.array_equal(read, summary.row_groups(n_hat, eps, p, np.inf))


@pytest.mark.parametrize("p", [0.5, 0.1, 0.9])
@pytest.mark.parametrize("small", [0.0, 200.0, np.inf])
def test_hybrid_spends_epsilon_per_group(p: float, small: float) -> None:
    """Each group metered alone (tests/core/test_spending.py): the rows route and the passes spend exactly
    epsilon (the count once, then the class's steps), or less when the group is NULL."""
    from dpsql.core.spending import meter

    r = np.random.default_rng(7)
    for n in (0, 30, 150, 400, 3000):
        for eps in (0.5, 2.0):
            src = summary.BatchSource(Batch.from_lists([r.normal(5, 2, n)]))
            with meter() as spent:
                out = summary.median(src, eps, Rng.seeded(n), p, small=small)
            got = spent.spent("pure")
            assert got == pytest.approx(eps, rel=1e-9) or (np.isnan(out[0]) and got < eps), (n, eps, spent.describe())
