"""Summary plans (issue 17): the compiled dp_median releases what the list route releases, byte for byte under a
seeded generator, on many groups, sizes and extreme values; other queries fall back to the macros."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import dpsql.duck as duck
from dpsql import plans
from dpsql.core import Params, get_method
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import run_quantile
from dpsql.noise import Rng

EXTREME = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, np.nan, 5e-324, 2.0**-1060, 9.3e18]


def _group(r: np.random.Generator, n: int) -> np.ndarray:
    kind = r.integers(0, 6)
    if kind == 0:
        return r.normal(0, 1, n)
    if kind == 1:
        return r.lognormal(0, 3, n) * r.choice([-1, 1], n)
    if kind == 2:
        return np.round(r.normal(5, 2, n))  # ties
    if kind == 3:
        return r.choice(EXTREME, n)
    if kind == 4:
        return np.full(n, 7.0)
    return r.normal(1e6, 10, n)


def _list_route(lists: list[np.ndarray], eps: float, seed: int) -> np.ndarray:
    params = Params(epsilon=eps, p=0.5)
    return run_quantile(Batch.from_lists(lists), budget_of(get_method("quantile", "scalefree"), params), params,
                        Rng.seeded(seed))


@pytest.mark.parametrize("trial", range(24))
def test_same_releases_as_the_list_route(trial: int) -> None:
    r = np.random.default_rng(trial)
    G = int(r.integers(1, 5))
    gs, xs = [], []
    for g in range(G):
        n = int(r.choice([0, 1, 5, 40, 300, 3000]))
        gs.append(np.full(n, g))
        xs.append(_group(r, n))
    g, x = np.concatenate(gs), np.concatenate(xs)
    eps = float(r.choice([0.1, 1.0, 5.0]))
    con = duckdb.connect()
    con.register("t", pa.table({"g": g, "x": x}))
    got = plans.run(con, f"SELECT g, dp_median(x, epsilon := {eps}) AS m FROM t GROUP BY g", Rng.seeded(trial))
    order = got.column("g").to_pylist()
    want = _list_route([x[g == k] for k in order], eps, trial)
    assert np.array_equal(got.column("m").to_numpy(zero_copy_only=False).astype(float), want, equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
def test_one_group_equals_the_sql_macro(seed: int) -> None:
    r = np.random.default_rng(seed)
    x = np.concatenate([r.lognormal(3, 2, 2000), r.choice(EXTREME, 50)])
    con = duckdb.connect()
    con.register("t", pa.table({"x": x, "k": r.integers(0, 3, x.size)}))
    q = "SELECT dp_quantile(x, 0.5, epsilon := 0.5) AS m FROM t WHERE k < 2"
    got = plans.run(con, q, Rng.seeded(seed)).column("m").to_pylist()
    duck.install(con, Rng.seeded(seed))
    assert got == [row[0] for row in con.sql(q).fetchall()]


def test_compiles_only_what_it_owns() -> None:
    assert plans.compile_query("SELECT g AS k, dp_median(x, epsilon := 1) FROM t WHERE y > 0 GROUP BY g")
    for q in ("SELECT dp_median(x, epsilon := 1, lower := 0) FROM t",
              "SELECT dp_quantile(x, 0.9, epsilon := 1) FROM t",
              "SELECT dp_mean(x, epsilon := 1) FROM t",
              "SELECT g, dp_median(x, epsilon := 1) FROM t GROUP BY g HAVING count(*) > 1",
              "SELECT h, dp_median(x, epsilon := 1) FROM t GROUP BY g",
              "SELECT dp_median(x, epsilon := 1) FROM t ORDER BY 1"):
        assert plans.compile_query(q) is None, q


def test_falls_back_to_the_macros() -> None:
    con = duck.install(duckdb.connect(), Rng.seeded(1))
    con.execute("CREATE TABLE t AS SELECT range::DOUBLE AS x FROM range(500)")
    got = plans.run(con, "SELECT dp_median(x, epsilon := 1, lower := 0, upper := 500) AS m FROM t")
    assert got.num_rows == 1 and 150 < got.column("m")[0].as_py() < 350


def test_bad_epsilon_names_the_argument() -> None:
    with pytest.raises(plans.ParameterError, match="epsilon"):
        plans.compile_query("SELECT dp_median(x, epsilon := -1) FROM t")


def test_production_route() -> None:
    """The CSPRNG matching (native keys), a fixed number of passes, answers near the median."""
    r = np.random.default_rng(0)
    con = duckdb.connect()
    con.register("t", pa.table({"g": np.repeat(["a", None], 20000), "x": r.normal(100, 1, 40000)}))
    calls = []
    fetch = plans._fetch

    def counting(c: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
        calls.append(sql)
        return fetch(c, sql)

    plans._fetch = counting
    try:
        got = plans.run(con, "SELECT g, dp_median(x, epsilon := 1) AS m FROM t GROUP BY g")
    finally:
        plans._fetch = fetch
    assert set(got.column("g").to_pylist()) == {"a", None}
    assert all(abs(v - 100) < 0.5 for v in got.column("m").to_pylist())
    assert len(calls) == 1 + 6  # count, then one class: gaps, four bucket passes, tail counts
