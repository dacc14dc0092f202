"""core.summary (issue 17): the median and the other quantiles from summaries have the list route's releases draw for
draw, and the floor is seed 003's IQR lower bound on the same pairs."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.core import Params, get_method, summary
from dpsql.core.batch import Batch
from dpsql.core.primitives import ceil_log2
from dpsql.core.ranges import iqr_lower_bound, random_pairs
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import FloatCodes, run_quantile
from dpsql.noise import Rng

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
def test_median_from_summaries_is_the_list_route(trial: int) -> None:
    r = np.random.default_rng(trial)
    b = Batch.from_lists(_lists(r))
    eps = float(r.choice([0.1, 1.0, 5.0]))
    params = Params(epsilon=eps, p=0.5)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    got = summary.median(summary.BatchSource(b), eps, Rng.seeded(trial))
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(40))
def test_quantile_from_summaries_is_the_list_route(trial: int) -> None:
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
    want = iqr_lower_bound(b, 0.3, Rng.seeded(100 + trial), pairs)
    a, c, pg = pairs
    k = np.clip(ceil_log2(np.abs(a - c)), summary.GAP_LO, summary.GAP_HI)
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
