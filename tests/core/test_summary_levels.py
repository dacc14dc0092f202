"""The roundness base measure (scalefree.LEVELS, issue 12; not the default yet) reaches both routes: with it on, the
median and the other quantiles from summaries still have the list route's releases draw for draw, and on tied
integer data the releases change (the measure is wired in) and land on the tied values more often."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.core import Params, get_method, scalefree, summary
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_quantile
from dpsql.noise import Rng

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, 5e-324, 2.0**-1060]


def _lists(r: np.random.Generator) -> list[np.ndarray]:
    out = []
    for _ in range(int(r.integers(1, 6))):
        n = int(r.choice([0, 1, 5, 30, 200, 2000]))
        kind = int(r.integers(0, 5))
        out.append([r.normal(0, 1, n), np.round(r.lognormal(3, 1, n)), np.round(r.normal(5, 2, n)),
                    r.choice(EXTREME, n), r.normal(1e6, 10, n)][kind])
    return out


@pytest.fixture
def levels(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(scalefree, "LEVELS", 16)
    return 16


@pytest.mark.parametrize("trial", range(16))
def test_median_with_levels_from_summaries_is_the_list_route(trial: int, floor_sample: bool, levels: int) -> None:
    r = np.random.default_rng(trial)
    b = Batch.from_lists(_lists(r))
    eps = float(r.choice([0.1, 1.0, 5.0]))
    params = Params(epsilon=eps, p=0.5)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    got = summary.median(summary.BatchSource(b), eps, Rng.seeded(trial))
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(12))
def test_quantile_with_levels_from_summaries_is_the_list_route(trial: int, floor_sample: bool, levels: int) -> None:
    r = np.random.default_rng(2000 + trial)
    lists = _lists(r)
    if trial % 2:
        lists.append(np.round(r.lognormal(2, 1, 5000)))
    b = Batch.from_lists(lists)
    eps = float(r.choice([0.1, 1.0, 5.0]))
    p = float(r.choice([0.1, 0.25, 0.75, 0.9]))
    params = Params(epsilon=eps, p=p)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(trial))
    got = summary.quantile(summary.BatchSource(b), eps, Rng.seeded(trial), p)
    assert np.array_equal(got, want, equal_nan=True)


def test_levels_pull_medians_of_tied_integers_onto_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """dep_delay-like data: integer minutes with a tie block whose upper edge lies 24 ranks above the median's
    target (n = 10**4, eps = 1): the uniform measure mostly misses the tied value, Z = 16 returns it (up to the
    code's cell, ~1e-10)."""
    r = np.random.default_rng(4)
    x = np.concatenate([np.full(4321, 15.0), np.full(703, 18.0), np.full(4976, 27.0)])
    r.shuffle(x)
    b = Batch.from_lists([x] * 200)
    params = Params(epsilon=1.0, p=0.5)
    budget = budget_of(get_method("quantile", "scalefree"), params)
    hits = []
    for z in (0, 16):
        monkeypatch.setattr(scalefree, "LEVELS", z)
        got = run_quantile(b, budget, params, Rng.seeded(9))
        hits.append(float(np.mean(np.abs(got - 18.0) < 1e-9)))  # a code decodes to its cell's midpoint
    assert hits[0] < 0.2 and hits[1] > 0.9, hits
