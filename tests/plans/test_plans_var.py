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
from plan_statements import run_recorded as _statements

from dpsql import plans
from dpsql.core import asymmetric as A
from dpsql.core import moments as M
from dpsql.core import summary_var
from dpsql.core.accounting import pure
from dpsql.core.batch import Batch
from dpsql.core.registry import Params
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
    for f in ("n", "lo", "hi"):
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f)
    # the anchor is the core's midpoint (not the median): the core sums around it, in numpy, to rounding
    kg = A.var_edges(got.n, C)
    inv = 1.0 / A.var_core_scale(got.n, got.xm, got.lo, got.hi, kg)
    for i, gi in enumerate(groups):
        w = np.clip(np.sort(lists[gi][~np.isnan(lists[gi])]), -(2.0**1000), 2.0**1000)
        if not w.size:
            continue
        assert w[kg[i]] <= got.xm[i] <= w[w.size - 1 - kg[i]]
        d = (w[kg[i]:w.size - kg[i]] - got.xm[i]) * inv[i]
        assert abs(got.s1[i] - np.add.reduce(d)) <= 1e-13 * w.size
        assert abs(got.s2[i] - np.add.reduce(d * d)) <= 1e-13 * w.size
    fg, Lg = A.var_bounds_of(got, C)
    fw, Lw = A.var_bounds_of(want, C)
    np.testing.assert_array_equal(np.isinf(fg), np.isinf(fw))
    np.testing.assert_array_equal(np.isinf(Lg), np.isinf(Lw))
    fin = np.isfinite(Lw)
    assert np.all(np.abs(Lg[fin] - Lw[fin]) <= 1e-9)
    fin = np.isfinite(fw)
    assert np.all(np.abs(fg[fin] - fw[fin]) <= 1e-9)


def test_anchor_lies_in_the_core() -> None:
    """The DuckDB summary's anchor is the core's midpoint (dpsql/plans/var.py), between its first and last rows, for
    every n 1..59 (odd and even, ties) and subnormal / extreme cores."""
    r = np.random.default_rng(5)
    lists = [np.round(r.normal(0, 3, n)) for n in range(1, 60)]
    lists += [np.array([5e-324, 5e-324, 1e-323]), np.array([-1e300, 1e300]), np.array([-2.0**1000, 2.0**1000, 0.0])]
    con = duckdb.connect()
    g = np.concatenate([np.full(len(v), i) for i, v in enumerate(lists)]).astype(np.int64)
    con.register("t", pa.table({"g": g, "x": np.concatenate(lists)}))
    for C in (3, 100):
        got = _source(con, lists).var_summary(np.arange(len(lists)), C)
        kg = A.var_edges(got.n, C)
        for i, v in enumerate(lists):
            w = np.sort(v)
            assert w[kg[i]] <= got.xm[i] <= w[len(w) - 1 - kg[i]]


# --------------------------------------------------------------------------- the compiled query



def _list_route(lists: list[np.ndarray], eps: float, seed: int) -> np.ndarray:
    """The default's list route (dpsql.core.moments; these tables stay below its top class, where it is A.run_var's
    draws: tests/core/test_moments.py)."""
    return M.run_var(Batch.from_lists(lists), pure(eps), Params(), Rng.seeded(seed))


@pytest.mark.parametrize("small", [0.0, 300.0, np.inf])
@pytest.mark.parametrize("trial", range(12))
def test_same_releases_as_the_list_route(trial: int, small: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """dp_var and dp_stddev through plans.run against run_var on the same seeded generator: every group read as
    rows (SMALL_ROWS inf: byte for byte the list route's code), every group through the summary passes (0) and a
    split by released count (300).  The draws are the list route's in every case; through the passes the bounds
    agree to rounding, so the grid points released are the same (module docstring)."""
    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    monkeypatch.setattr(summary_var, "ROWS_CHUNK", 2000.0)  # the rows' bounds in chunks, on threads
    monkeypatch.setattr(summary_var, "SUMMARY_CELLS", 300)  # the summaries' bounds in chunks of 2 groups at C 100
    r = np.random.default_rng(40 + trial)
    sizes = r.choice([0, 1, 2, 5, 40, 203, 500, 2002, 4000], r.integers(1, 6))
    lists, con = _table(r, sizes)
    eps = float(r.choice([0.05, 0.3, 1.0, 5.0]))
    fn = "dp_var" if trial % 2 == 0 else "dp_stddev"
    got, calls = _statements(monkeypatch, con, f"SELECT g, {fn}(x, epsilon := {eps}) AS v FROM t GROUP BY g",
                             Rng.seeded(trial))
    order = got.column("g").to_pylist()
    want = _list_route([lists[k] for k in order], eps, trial)
    if fn == "dp_stddev":
        want = np.sqrt(np.maximum(want, 0.0))
    np.testing.assert_array_equal(got.column("v").to_numpy(zero_copy_only=False).astype(float), want)
    assert not got.column("v").null_count  # never NULL
    n_rows = sum("_rows_x" in q for q in calls)
    n_summary = sum("max(_x, " in q for q in calls)
    if small == np.inf:
        assert (n_rows, n_summary) == (1, 0)
    assert n_rows <= 1 and n_summary <= 1  # (at SMALL_ROWS 0 a negative released count reads its group as rows)
    assert len(calls) == 1 + n_rows + 2 * n_summary


def test_one_rows_pass_with_the_median(monkeypatch: pytest.MonkeyPatch) -> None:
    """dp_var, dp_stddev and dp_median on one value, SMALL_ROWS 1000, groups of 50, 400 and 6,000 rows: one rows pass
    for the small groups of every call, the 6,000-row group through each call's passes (two for each variance)."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 1000.0)
    r = np.random.default_rng(4)
    g = np.repeat(np.arange(3), (50, 400, 6000))
    x = r.normal(3, 2, g.size)
    con = duckdb.connect()
    con.register("t", pa.table({"g": g, "x": x}))
    got, calls = _statements(monkeypatch, con, "SELECT g, dp_var(x, epsilon := 2.0) AS v, dp_median(x, epsilon := 2.0)"
                             " AS m, dp_stddev(x, epsilon := 1.0) AS s FROM t GROUP BY g", Rng.seeded(4))
    assert sum("_rows_x" in q for q in calls) == 1
    assert sum("max(_x, " in q for q in calls) == 2
    big = got.column("g").to_pylist().index(2)  # the passes' group: n eps = 6000-12000, within a few percent
    assert abs(got.column("v").to_numpy()[big] / np.var(x[g == 2]) - 1.0) < 0.1
    assert abs(got.column("s").to_numpy()[big] / np.std(x[g == 2]) - 1.0) < 0.1


@pytest.mark.parametrize("small", [0.0, 500.0])
def test_statements_do_not_depend_on_the_values(small: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same group sizes and generator give the same statements whatever the values (tame, or +-1e300, +-inf,
    huge integers, subnormals and a far outlier), all passes or hybrid."""
    monkeypatch.setattr(plans, "SMALL_ROWS", small)
    sizes = (1, 30, 700, 3000)
    g = np.repeat(np.arange(len(sizes)), sizes)
    tame = np.random.default_rng(1).normal(0, 1, g.size)
    wild = np.random.default_rng(2).choice([1e300, -1e300, np.inf, -np.inf, 9.3e18, 5e-324, 3.0], g.size)
    wild[-1] = 1e300
    seen = []
    for x in (tame, wild):
        con = duckdb.connect()
        con.register("t", pa.table({"g": g, "x": x}))
        seen.append(_statements(monkeypatch, con, "SELECT g, dp_var(x, epsilon := 1.0) AS v, dp_stddev(x, epsilon := "
                                "0.2) AS s FROM t GROUP BY g", Rng.seeded(9))[1])
    assert seen[0] == seen[1]


@pytest.mark.parametrize("sql", [
    "SELECT g, dp_var(x, epsilon := 1) FROM t GROUP BY g",
    "SELECT dp_stddev(x, epsilon := 0.5, method := 'asymmetric') AS s FROM t",
    "SELECT g, dp_var(x, epsilon := 1, method := 'default') AS v, dp_median(x, epsilon := 1) FROM t GROUP BY g",
])
def test_compiles(sql: str) -> None:
    plan = plans.compile_query(sql)
    assert plan is not None and {c.aggregate for c in plan.calls} & {"var", "stddev"}


@pytest.mark.parametrize("sql", [
    "SELECT g, dp_var(x, epsilon := 1, lower := 0, upper := 10) FROM t GROUP BY g",
    "SELECT g, dp_var(x, epsilon := 1, method := 'clipped') FROM t GROUP BY g",
    "SELECT g, dp_var(x, epsilon := 1, method := 'subset') FROM t GROUP BY g",
    "SELECT g, dp_var_ci(x, epsilon := 1) FROM t GROUP BY g",
    "SELECT g, dp_stddev(x) FROM t GROUP BY g",
    "SELECT g, dp_var(x, 0.5, epsilon := 1) FROM t GROUP BY g",
])
def test_falls_back(sql: str) -> None:
    assert plans.compile_query(sql) is None


def test_bad_epsilon_names_the_argument() -> None:
    with pytest.raises(plans.ParameterError, match="epsilon"):
        plans.compile_query("SELECT dp_var(x, epsilon := -1) FROM t")
