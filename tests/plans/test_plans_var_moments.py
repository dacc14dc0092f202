"""dp_var's default through the summary plans (issue 12's top class, dpsql.core.moments; dpsql.plans._moments):
the groups its released count puts in the top class get the mean c and the mean of ``(x - c)**2`` through the
passes, and the releases are the core composition's on the reference sources with the SQL route's matching
(tests/plans/test_plans.py's replay); every group read as rows, they are the list route's draw for draw.  The
asymmetric class of the same query is tests/plans/test_plans_var.py's."""

from __future__ import annotations

import numpy as np
import pytest
from test_plans import EXTREME, _group, _one_thread
from test_plans_mean import _MeanReplay

from dpsql import plans
from dpsql.core import moments as M
from dpsql.core import summary_mean, summary_var
from dpsql.core.accounting import pure
from dpsql.core.batch import DOMAIN, Batch
from dpsql.core.registry import Params
from dpsql.noise import Rng


def _table(r: np.random.Generator, sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    G = int(r.integers(1, 5))
    gs, xs = [], []
    for g in range(G):
        n = int(r.choice(sizes))
        gs.append(np.full(n, g))
        xs.append(_group(r, n) if r.random() < 0.8 else r.choice(EXTREME, n))
    return np.concatenate(gs), np.concatenate(xs)


def _run(g: np.ndarray, x: np.ndarray, eps: float, seed: int, fn: str = "dp_var") -> tuple[list, np.ndarray]:
    got = plans.run(_one_thread(g, x), f"SELECT g, {fn}(x, epsilon := {eps!r}) AS v FROM t GROUP BY g",
                    Rng.seeded(seed))
    return got.column("g").to_pylist(), got.column("v").to_numpy(zero_copy_only=False).astype(float)


def _reference(lists: list[np.ndarray], pos: list[np.ndarray], eps: float, seed: int, small: float) -> np.ndarray:
    """plans._variance's steps on the reference sources (the SQL route's matching replayed)."""
    rng = Rng.seeded(seed)
    every = summary_var.VarBatchSource(Batch.from_lists(lists))
    n_hat = summary_var.released_count(every, eps, rng)
    low, top = M.classes(n_hat, eps)
    v = np.zeros(len(lists))
    if low.size:
        v[low] = summary_var.variance(every, eps, rng, n_hat=n_hat, small=small, groups=low)
    if top.size:
        xl, pl = [lists[i] for i in top], [pos[i] for i in top]

        def squares(c: np.ndarray, e: float) -> np.ndarray:
            yl = []
            for xi, ci in zip(xl, c, strict=True):
                d = np.clip(xi, -DOMAIN, DOMAIN) - ci
                with np.errstate(over="ignore", invalid="ignore"):
                    yl.append(np.where(np.isnan(xi), np.nan, np.minimum(d * d, DOMAIN)))
            return summary_mean.mean(_MeanReplay(yl, pl), e, rng, small=small)

        v[top] = M.moments(lambda e: summary_mean.mean(_MeanReplay(xl, pl), e, rng, small=small), squares, eps)
    return v


@pytest.mark.parametrize("small", [0.0, 500.0])
@pytest.mark.parametrize("trial", range(8))
def test_top_class_is_the_reference_on_the_same_matching(trial: int, small: float,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of 0-3,000 rows at eps 10-40 (n eps up to 1.2e5: both classes), extreme values among them; every group
    through the passes (SMALL_ROWS 0) and a hybrid split (500)."""
    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    r = np.random.default_rng(900 + trial)
    g, x = _table(r, (0, 2, 40, 300, 1500, 3000))
    eps = float(r.choice([10.0, 20.0, 40.0]))
    order, got = _run(g, x, eps, trial)
    pos = np.arange(x.size)
    want = _reference([x[g == k] for k in order], [pos[g == k] for k in order], eps, trial, small)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("trial", range(8))
def test_all_rows_is_the_list_route(trial: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every group read as rows: dp_var and dp_stddev release the list route's values (dpsql.core.moments.run_var)
    draw for draw, in both classes."""
    monkeypatch.setattr(plans, "SMALL_ROWS", np.inf)
    r = np.random.default_rng(950 + trial)
    g, x = _table(r, (0, 2, 40, 500, 2002, 4000))
    eps = float(r.choice([10.0, 20.0, 40.0]))
    fn = "dp_var" if trial % 2 == 0 else "dp_stddev"
    order, got = _run(g, x, eps, trial, fn)
    want = M.run_var(Batch.from_lists([x[g == k] for k in order]), pure(eps), Params(), Rng.seeded(trial))
    if fn == "dp_stddev":
        want = np.sqrt(want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("small", [0.0, np.inf])
def test_one_group_without_group_by(small: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GROUP BY (the centre's table has no keys: one row, cross-joined): the reference's releases through the
    passes, the list route's read as rows."""
    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    x = np.random.default_rng(8).lognormal(1.0, 1.0, 3000)
    x[::500] = np.nan
    got = plans.run(_one_thread(None, x), "SELECT dp_stddev(x, epsilon := 30.0) AS v FROM t", Rng.seeded(2))
    got = got.column("v").to_numpy(zero_copy_only=False).astype(float)
    if small == 0.0:
        want = np.sqrt(_reference([x], [np.arange(x.size)], 30.0, 2, small))
    else:
        want = np.sqrt(M.run_var(Batch.from_lists([x]), pure(30.0), Params(), Rng.seeded(2)))
    np.testing.assert_array_equal(got, want)


def test_method_names_compile() -> None:
    """The default and 'scalefree' compile to the routed variance, 'asymmetric' to the asymmetric mechanism alone."""
    for m, want in (("", "scalefree"), (", method := 'default'", "scalefree"), (", method := 'scalefree'", "scalefree"),
                    (", method := 'asymmetric'", "asymmetric")):
        plan = plans.compile_query(f"SELECT dp_var(x, epsilon := 1{m}) FROM t")
        assert plan is not None and plan.calls[0].method == want
