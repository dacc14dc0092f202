"""core.summary (issue 17): dp_iqr from summaries (summary.iqr, summary.quantiles at (1/4, 3/4)) releases what
scalefree.run_iqr releases, draw for draw, on the same batch and seeded generator: ties, +-1e300 and +-inf, tiny and
huge groups, several groups, both routes (near: small released counts, read as rows; wide: the passes), the
floor on every row and on a Poisson subsample, the hybrid's rows (``small`` above every count) and random
ladders; and spends epsilon per group."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.core import Params, get_method, scalefree, summary
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_iqr, run_quantile
from dpsql.noise import Rng
from dpsql.testing import random_ladder

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, 5e-324, 2.0**-1060, 9.3e18]


def _lists(r: np.random.Generator) -> list[np.ndarray]:
    out = []
    for _ in range(int(r.integers(1, 6))):
        n = int(r.choice([0, 1, 5, 30, 200, 2000]))
        kind = int(r.integers(0, 6))
        out.append([r.normal(0, 1, n), r.lognormal(0, 3, n) * r.choice([-1, 1], n), np.round(r.normal(5, 2, n)),
                    r.choice(EXTREME, n), r.normal(1e6, 10, n), np.full(n, 7.0)][kind])
    return out


def _case(trial: int) -> tuple[Batch, float]:
    r = np.random.default_rng(4000 + trial)
    lists = _lists(r)
    if trial % 2:  # large groups, so that the wide route runs at every epsilon
        lists.append(r.lognormal(2, 1, 5000) if trial % 4 == 1 else r.choice(EXTREME, 3000))
    return Batch.from_lists(lists), float(r.choice([0.1, 1.0, 5.0]))


def _list_route(b: Batch, eps: float, seed: int) -> np.ndarray:
    params = Params(epsilon=eps)
    return run_iqr(b, budget_of(get_method("iqr", "scalefree"), params), params, Rng.seeded(seed))


@pytest.mark.parametrize("trial", range(40))
def test_iqr_from_summaries_is_the_list_route(trial: int, floor_sample: bool) -> None:
    b, eps = _case(trial)
    got = summary.iqr(summary.BatchSource(b), eps, Rng.seeded(trial))
    assert np.array_equal(got, _list_route(b, eps, trial), equal_nan=True)


@pytest.mark.parametrize("trial", range(20))
def test_iqr_hybrid_all_rows_is_the_list_route(trial: int, floor_sample: bool) -> None:
    """``small`` above every released count (every group read as rows, the count continued from
    :func:`summary.released_count` with the tuple of levels): draw for draw; the groups read are
    :func:`summary.row_groups` of the tuple."""
    b, eps = _case(100 + trial)
    read: list[np.ndarray] = []

    class Recording(summary.BatchSource):
        def batch(self, groups: np.ndarray) -> Batch:
            read.append(np.array(groups, copy=True))
            return super().batch(groups)

    src, rng = Recording(b), Rng.seeded(trial)
    n_hat = summary.released_count(src, eps, rng, summary.IQR_PS)
    got = summary.iqr(src, eps, rng, n_hat=n_hat, small=np.inf)
    assert np.array_equal(got, _list_route(b, eps, trial), equal_nan=True)
    every = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *read]))
    assert np.array_equal(every, summary.row_groups(n_hat, eps, summary.IQR_PS, np.inf))


@pytest.mark.parametrize("trial", range(10))
def test_iqr_does_not_depend_on_the_ladder(trial: int, floor_sample: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    b, eps = _case(200 + 2 * trial + 1)
    want = _list_route(b, eps, trial)
    monkeypatch.setattr(summary, "ladder", random_ladder(np.random.default_rng(trial)))
    assert np.array_equal(summary.iqr(summary.BatchSource(b), eps, Rng.seeded(trial)), want, equal_nan=True)


@pytest.mark.parametrize("trial", range(12))
def test_quantiles_are_tail_quantiles(trial: int, floor_sample: bool) -> None:
    """summary.quantiles on other tuples of levels (one or three, sensitivities that differ) is scalefree's
    _tail_quantiles draw for draw."""
    b, eps = _case(300 + trial)
    ps = [(0.1,), (0.25, 0.75), (0.01, 0.3, 0.9), (0.9, 0.6)][trial % 4]
    want = [q[0] for q in scalefree._tail_quantiles(b.sorted(), ps, eps, Rng.seeded(trial))]
    got = summary.quantiles(summary.BatchSource(b), eps, Rng.seeded(trial), ps)
    assert len(got) == len(ps)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w, equal_nan=True)


def test_quantile_is_quantiles_of_one() -> None:
    b, eps = _case(1)
    params = Params(epsilon=eps, p=0.9)
    want = run_quantile(b, budget_of(get_method("quantile", "scalefree"), params), params, Rng.seeded(3))
    assert np.array_equal(summary.quantile(summary.BatchSource(b), eps, Rng.seeded(3), 0.9), want, equal_nan=True)
    for bad in ((), (0.5,), (0.25, 1.0)):
        with pytest.raises(ValueError):
            summary.quantiles(summary.BatchSource(b), eps, Rng.seeded(3), bad)


@pytest.mark.parametrize("small", [0.0, 200.0, np.inf])
def test_iqr_spends_epsilon_per_group(small: float) -> None:
    """Each group metered alone: exactly epsilon (the count once, one floor, near one centre, two quartiles at
    half the mechanisms' share each), or less when the group is NULL."""
    from dpsql.core.spending import meter

    r = np.random.default_rng(7)
    for n in (0, 30, 150, 400, 3000):
        for eps in (0.5, 2.0):
            src = summary.BatchSource(Batch.from_lists([r.normal(5, 2, n)]))
            with meter() as spent:
                out = summary.iqr(src, eps, Rng.seeded(n), small=small)
            got = spent.spent("pure")
            assert got == pytest.approx(eps, rel=1e-9) or (np.isnan(out[0]) and got < eps), (n, eps, spent.describe())
