"""dp_var's default through the summary plans (issue 12's top class, dpsql.core.moments; dpsql.plans._moments):
the groups its released count puts in the top class get the mean c and the mean of ``(x - c)**2`` through the
passes, and the releases are the core composition's on the reference sources with the SQL route's matching
(tests/plans/test_plans.py's replay); every group read as rows, they are the list route's draw for draw.  The
asymmetric class of the same query is tests/plans/test_plans_var.py's."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_plans import _one_thread
from test_plans_mean import _MeanReplay, _table

from dpsql import plans
from dpsql.core import asymmetric as A
from dpsql.core import moments as M
from dpsql.core import scalefree as S
from dpsql.core import summary_mean, summary_var
from dpsql.core.accounting import pure
from dpsql.core.batch import DOMAIN, Batch, take_groups
from dpsql.core.registry import Params
from dpsql.noise import Rng


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


def test_null_values_null_keys_and_calls_sharing_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """NULL and NaN values, a NULL group key, and dp_var, dp_stddev and dp_mean on one value in one query (the
    shared rows pass leaves the top groups to their own sources): the releases of the plans read as rows are the
    list route's, call by call, in the query's order of draws."""
    import duckdb
    import pyarrow as pa

    monkeypatch.setattr(plans, "SMALL_ROWS", np.inf)
    r = np.random.default_rng(12)
    sizes = (3000, 2500, 40)
    keys = [1, None, 2]  # the NULL key's group is in the top class: the centres' join matches it (IS NOT DISTINCT)
    x = [v for n in sizes for v in r.lognormal(1.0, 1.0, n).tolist()]
    x[5], x[7], x[3100] = None, float("nan"), None
    g = [k for k, n in zip(keys, sizes, strict=True) for _ in range(n)]
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"g": pa.array(g, pa.int64()), "x": pa.array(x, pa.float64())}))
    got = plans.run(con, "SELECT g, dp_var(x, epsilon := 20.0) AS v, dp_mean(x, epsilon := 1.0) AS m, "
                         "dp_stddev(x, epsilon := 15.0) AS s FROM t GROUP BY g", Rng.seeded(5))
    order = got.column("g").to_pylist()
    lists = []
    for k in order:
        vals = [v for gi, v in zip(g, x, strict=True) if gi == k]
        lists.append(np.array([np.nan if v is None else v for v in vals]))
    rng = Rng.seeded(5)  # plans.run: every call's count first, in the calls' order, then each call in turn
    b = lambda: Batch.from_lists(lists)  # noqa: E731
    n_var = summary_var.released_count(summary_var.VarBatchSource(b()), 20.0, rng)
    n_mean = summary_mean.released_count(summary_mean.MeanBatchSource(b()), 1.0, rng)
    n_sd = summary_var.released_count(summary_var.VarBatchSource(b()), 15.0, rng)
    assert M.classes(n_var, 20.0)[1].size and M.classes(n_sd, 15.0)[1].size  # the top class is reached
    want_v = _continue_var(lists, n_var, 20.0, rng)
    want_m = summary_mean.mean(summary_mean.MeanBatchSource(b()), 1.0, rng, n_hat=n_mean, small=np.inf)
    want_s = np.sqrt(_continue_var(lists, n_sd, 15.0, rng))
    np.testing.assert_array_equal(got.column("v").to_numpy(zero_copy_only=False).astype(float), want_v)
    np.testing.assert_array_equal(got.column("m").to_numpy(zero_copy_only=False).astype(float), want_m)
    np.testing.assert_array_equal(got.column("s").to_numpy(zero_copy_only=False).astype(float), want_s)


def _continue_var(lists: list[np.ndarray], n_hat: np.ndarray, eps: float, rng: Rng) -> np.ndarray:
    """moments.run_var after its count, on rows (the list route's code for each class)."""
    s = Batch.from_lists(lists).sorted()
    low, top = M.classes(n_hat, eps)
    v = np.zeros(len(lists))
    if low.size:
        v[low] = A.asm_var(take_groups(s, low), n_hat[low], A.SPLIT_VAR["asm"] * eps, Params(), rng)
    if top.size:
        sub = take_groups(s, top)
        v[top] = M.moments(lambda e: S.run_mean(sub, pure(e), Params(), rng),
                           lambda c, e: S.run_mean(M.squares(sub, c), pure(e), Params(), rng), eps)
    return v


@pytest.mark.parametrize("small", [0.0, 1000.0])
def test_statements_do_not_depend_on_the_values(small: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The top class's statements, given the same group sizes and generator, are the same for tame and wild values
    (+-1e300, +-inf, huge integers, subnormals, a far outlier), through the passes and hybrid, up to their numbers:
    the mean's passes carry released parameters (the floor's shifts, c, the ranges) in their text, which differ
    with the data as released values do."""
    from plan_statements import run_recorded

    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    monkeypatch.setattr(M, "VAR_TOP", 0.0)
    sizes = (30, 700, 3000)
    g = np.repeat(np.arange(len(sizes)), sizes)
    tame = np.random.default_rng(1).normal(0, 1, g.size)
    wild = np.random.default_rng(2).choice([1e300, -1e300, np.inf, -np.inf, 9.3e18, 5e-324, 3.0], g.size)
    seen = []
    for x in (tame, wild):
        seen.append(run_recorded(monkeypatch, _one_thread(g, x), "SELECT g, dp_var(x, epsilon := 5.0) AS v FROM t "
                                 "GROUP BY g", Rng.seeded(9))[1])
    strip = [[re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "?", q) for q in s] for s in seen]
    assert strip[0] == strip[1]
