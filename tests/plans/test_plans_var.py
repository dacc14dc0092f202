"""Summary plans for dp_var / dp_stddev (issue 17): dpsql.plans.var's DuckDB summary against the list route's own
(core.asymmetric.var_summary): n, the anchor xm, the edges exactly; the core sums to rounding (DuckDB's fsum adds in
another order: dpsql/plans/var.py's docstring), so the bounds to rounding; and the compiled query's releases are the
list route's under the same seeded draws (the draws are the list route's in every split, and the releases are grid
points 1e-4 apart relatively: bounds that agree to 1e-12 pick the same points but with negligible probability).
Privacy: tests/plans/test_plans_var_privacy.py."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from dpsql import plans
from dpsql.core import asymmetric as A
from dpsql.core.batch import Batch
from dpsql.noise import Rng
from dpsql.plans import var as pvar

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, np.nan, 5e-324, 2.0**-1060, 9.3e18]


def _group(r: np.random.Generator, n: int) -> np.ndarray:
    kind = r.integers(0, 6)
    if kind == 0:
        return r.normal(0, 1, n)
    if kind == 1:
        return r.lognormal(0, 3, n) * r.choice([-1, 1], n)
    if kind == 2:
        return np.round(r.normal(5, 2, n))  # ties, also at the core's edges
    if kind == 3:
        return r.choice(EXTREME, n)
    if kind == 4:
        return np.full(n, 7.0)
    return np.concatenate([r.normal(1e6, 10, n - n // 50), np.full(n // 50, 1e300)])  # far outliers


def _table(r: np.random.Generator, sizes: list[int]) -> tuple[list[np.ndarray], duckdb.DuckDBPyConnection]:
    lists = [_group(r, int(n)) for n in sizes]
    g = np.concatenate([np.full(len(v), i) for i, v in enumerate(lists)]).astype(np.int64)
    x = np.concatenate(lists)
    perm = r.permutation(x.size)  # rows in any order
    con = duckdb.connect()
    con.register("t", pa.table({"g": g[perm], "x": x[perm]}))
    return lists, con


def _source(con: duckdb.DuckDBPyConnection, lists: list[np.ndarray]) -> pvar.DuckVarSource:
    plan = plans.Plan("FROM t", ("g",), (("key", 0, "g"), ("dp", 0, "v")), (plans.Call("x", 1.0, "v"),))
    keys = pa.table({"_k0": pa.array(np.arange(len(lists)), pa.int64())})
    n = np.array([np.count_nonzero(~np.isnan(v)) for v in lists], dtype=np.int64)
    return pvar.DuckVarSource(plans.DuckSource(con, plan, 0, keys, n, Rng.seeded(1)))


def test_the_data_rules_are_the_packages() -> None:
    assert pvar.VALID == plans._VALID
    assert pvar.CLAMPED == plans._VC


@pytest.mark.parametrize("trial", range(30))
def test_summary_equals_the_list_routes(trial: int) -> None:
    r = np.random.default_rng(trial)
    sizes = r.choice([0, 1, 2, 3, 5, 40, 201, 202, 203, 2001, 2002, 3000], r.integers(1, 7))
    lists, con = _table(r, sizes)
    C = int(r.choice([1, 10, 100, 1000]))
    src = _source(con, lists)
    groups = np.sort(r.choice(len(lists), r.integers(1, len(lists) + 1), replace=False))
    got = src.var_summary(groups, C)
    assert src.passes == 2
    want = A.var_summary(Batch.from_lists([lists[i] for i in groups]).sorted(), C)
    for f in ("n", "xm", "lo", "hi"):
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f)
    scale = np.maximum(want.n, 1)  # |d| < 2 on the core: the sums' rounding is relative to n
    assert np.all(np.abs(got.s1 - want.s1) <= 1e-13 * scale)
    assert np.all(np.abs(got.s2 - want.s2) <= 1e-13 * scale)
    fg, Lg = A.var_bounds_of(got, C)
    fw, Lw = A.var_bounds_of(want, C)
    np.testing.assert_array_equal(np.isinf(fg), np.isinf(fw))
    np.testing.assert_array_equal(np.isinf(Lg), np.isinf(Lw))
    fin = np.isfinite(Lw)
    assert np.all(np.abs(Lg[fin] - Lw[fin]) <= 1e-9)
    fin = np.isfinite(fw)
    assert np.all(np.abs(fg[fin] - fw[fin]) <= 1e-9)


def test_median_anchor_is_the_row_at_n_over_two() -> None:
    """quantile_disc(-x, 0.5) negated: the sorted value at n // 2 for every n (ties, odd and even)."""
    r = np.random.default_rng(5)
    lists = [np.round(r.normal(0, 3, n)) for n in range(1, 60)]
    con = duckdb.connect()
    g = np.concatenate([np.full(len(v), i) for i, v in enumerate(lists)]).astype(np.int64)
    con.register("t", pa.table({"g": g, "x": np.concatenate(lists)}))
    got = _source(con, lists).var_summary(np.arange(len(lists)), 3).xm
    np.testing.assert_array_equal(got, [np.sort(v)[len(v) // 2] for v in lists])
