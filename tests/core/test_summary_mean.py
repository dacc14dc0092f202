"""core.summary_mean (issue 17): dp_mean and dp_sum from summaries have the list route's releases draw for draw
(every route class, the floor whole and subsampled), and the radius histogram answers radius's queries."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.core import Params, get_method, summary_mean
from dpsql.core.batch import Batch
from dpsql.core.ranges import radius
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_mean, run_sum
from dpsql.noise import Rng

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, 5e-324, 2.0**-1060]


def _lists(r: np.random.Generator) -> list[np.ndarray]:
    out = []
    for _ in range(int(r.integers(1, 7))):
        n = int(r.choice([0, 1, 5, 30, 200, 800, 3000]))
        kind = int(r.integers(0, 7))
        out.append([r.normal(0, 1, n), r.lognormal(0, 3, n) * r.choice([-1, 1], n), np.round(r.normal(5, 2, n)),
                    r.choice(EXTREME, n), r.normal(1e6, 10, n), np.full(n, 7.0),
                    np.concatenate([r.normal(0, 1, n), [1e300] * min(n, 1)])][kind])
    return out


def _both(trial: int, kind: str, lists: list[np.ndarray], eps: float) -> tuple[np.ndarray, np.ndarray]:
    b = Batch.from_lists(lists)
    params = Params(epsilon=eps)
    run = run_mean if kind == "mean" else run_sum
    want = run(b, budget_of(get_method(kind, "scalefree"), params), params, Rng.seeded(trial))
    fn = summary_mean.mean if kind == "mean" else summary_mean.sum
    got = fn(summary_mean.MeanBatchSource(b), eps, Rng.seeded(trial))
    return got, want


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("trial", range(24))
def test_mean_sum_from_summaries_is_the_list_route(trial: int, kind: str, floor_sample: bool) -> None:
    r = np.random.default_rng(trial)
    lists = _lists(r)
    eps = float(r.choice([0.1, 0.5, 1.0, 5.0]))
    got, want = _both(trial, kind, lists, eps)
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("n", [230, 260, 330, 500, 900, 5000])
def test_every_route_class(kind: str, n: int, floor_sample: bool) -> None:
    """At eps = 1 the released counts put groups of these sizes in few / mid / low / high (230 and 330: in the mid
    and low classes' route-check zones, the second count drawn in both routes); several groups, huge values and
    ties."""
    r = np.random.default_rng(n)
    lists = [r.normal(0, 1, n), r.choice(EXTREME, n), np.full(n, -3.5), r.normal(1e6, 10, n),
             np.concatenate([r.lognormal(0, 2, n - 1), [-1e300]])]
    for trial in range(3):
        got, want = _both(trial, kind, lists, 1.0)
        assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(6))
def test_hybrid_all_rows_is_the_list_route(trial: int) -> None:
    r = np.random.default_rng(50 + trial)
    lists = _lists(r)
    b = Batch.from_lists(lists)
    for kind, run in (("mean", run_mean), ("sum", run_sum)):
        params = Params(epsilon=1.0)
        want = run(b, budget_of(get_method(kind, "scalefree"), params), params, Rng.seeded(trial))
        got = getattr(summary_mean, kind)(summary_mean.MeanBatchSource(b), 1.0, Rng.seeded(trial), small=np.inf)
        assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("trial", range(8))
def test_radius_histogram_answers_radius(trial: int) -> None:
    r = np.random.default_rng(trial)
    b = Batch.from_lists(_lists(r) + [r.choice(EXTREME, 50)]).sorted()
    G = b.groups
    c = np.clip(r.choice([0.0, 1.0, -2.5, 1e6, 1e300, -1e300, 5e-324], G), -2.0**1000, 2.0**1000)
    s0 = np.ldexp(1.0, r.integers(-1000, 40, G))
    want = radius(b, c, s0, 0.7, Rng.seeded(trial), 0.5, outside=3.0, monotone=True, fine=True)
    src = summary_mean.MeanBatchSource(b)
    got = summary_mean._radius(src.radius_histogram(np.arange(G), c, s0), b.sizes, s0, 0.7, Rng.seeded(trial), 3.0)
    assert np.array_equal(got, want)


def test_inside_index_is_the_first_inside_radius() -> None:
    r = np.random.default_rng(1)
    v = np.clip(np.concatenate([r.choice(EXTREME, 300), r.normal(0, 1, 300), r.lognormal(0, 30, 300)]),
                -2.0**1000, 2.0**1000)
    for c0 in (0.0, 1.0, 1e6, -1e300, 2.0**1000):
        for e0 in (-1000, -30, 0, 20, 900):
            c, s0 = np.full(v.size, c0), np.full(v.size, 2.0**e0)
            k = summary_mean.inside_index(v, c, s0)
            assert np.all(summary_mean._inside(v, c, s0, k) | (k == summary_mean.RADIUS_QUERIES))
            assert not np.any(summary_mean._inside(v, c, s0, np.maximum(k - 1, 1)) & (k > 1))
