"""The native route of method := 'clipped' (sql/macros.sql) against the list route: same statistics, same
releases from the same seeded generator, the same errors, and no list(x) in the plan."""

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.core.clipped import clipped_stats
from dpsql.core.registry import Params
from dpsql.duck import _batch_from_lists
from dpsql.noise import Rng

BOUNDS = [(0.0, 10.0), (-3.0, 7.5), (-1e-3, 1e-3), (0.1, 0.30000000000000004), (-1e150, 1e150), (2.0, 4.0),
          (-8.0, -0.25), (-1.0, 1.0), (5.0, 5.0)]

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, 3.5, 1e300, -1e300, float("inf"), float("-inf"), float("nan"), None,
           2.0**-1074, 4.999999999999999, 5.000000000000001, 9.999999999999998, 10.0, 0.1, 0.2, 0.30000000000000004]


def _con(rng: Rng | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    return dpsql.install(con, rng=rng)


def _table(con: duckdb.DuckDBPyConnection, seed: int, kind: str = "DOUBLE") -> None:
    g = np.random.default_rng(seed)
    vals: list = list(np.concatenate([g.standard_cauchy(300) * 10.0, g.normal(0, 1e-3, 100),
                                      np.round(g.normal(5, 3, 200) * 4) / 4]))
    vals += SPECIAL
    grp = [int(a) for a in g.integers(0, 5, len(vals))]
    xs = [None if b is None else float(b) for b in vals]
    con.execute("CREATE OR REPLACE TABLE t AS SELECT unnest(?::INTEGER[]) AS g, unnest(?::DOUBLE[]) AS x",
                [grp, xs])
    if kind != "DOUBLE":
        con.execute(f"CREATE OR REPLACE TABLE t AS SELECT g, TRY_CAST(x AS {kind}) AS x FROM t")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_sql_statistics_equal_the_core(seed: int, lo: float, hi: float) -> None:
    con = _con()
    _table(con, seed)
    sql = f"""SELECT g, count(_dpsql_xn(x)),
        _dpsql_ksum(_dpsql_v(x, {lo!r}, {hi!r}), greatest(abs({lo!r}::DOUBLE), abs({hi!r}::DOUBLE))),
        _dpsql_ksum(_dpsql_v(x, {lo!r}, {hi!r}) - _dpsql_c({lo!r}, {hi!r}), _dpsql_h({lo!r}, {hi!r})),
        _dpsql_ksum((_dpsql_v(x, {lo!r}, {hi!r}) - _dpsql_c({lo!r}, {hi!r}))
                       * (_dpsql_v(x, {lo!r}, {hi!r}) - _dpsql_c({lo!r}, {hi!r})),
                    _dpsql_h({lo!r}, {hi!r}) * _dpsql_h({lo!r}, {hi!r})),
        list(x) FROM t GROUP BY g ORDER BY g"""
    rows = con.sql(sql).to_arrow_table()
    batch = _batch_from_lists(rows.column(5))
    p = Params(epsilon=1.0, lower=lo, upper=hi)
    n, ks, _ = clipped_stats("sum", batch, p)
    _, km, _ = clipped_stats("mean", batch, p)
    _, kv1, kv2 = clipped_stats("var", batch, p)
    assert rows.column(1).to_pylist() == n.tolist()
    assert rows.column(2).to_pylist() == ks.tolist()
    assert rows.column(3).to_pylist() == km.tolist() == kv1.tolist()
    assert rows.column(4).to_pylist() == kv2.tolist()


def test_cast_rounds_half_to_even_like_rint() -> None:
    v = np.concatenate([np.arange(-4000, 4000) / 2.0, [0.49999999999999994, -0.49999999999999994, 2.0**52 + 1]])
    con = duckdb.connect()
    got = np.array(con.execute("SELECT CAST(x AS BIGINT) FROM (SELECT unnest(?::DOUBLE[]) AS x)",
                               [v.tolist()]).fetchall()).ravel()
    assert np.array_equal(got, np.rint(v).astype(np.int64))


def test_grid_constant_is_the_cores_and_folded_at_bind() -> None:
    """_dpsql_fg is the core's fixed_point_grid (exact powers of two, floors at 2**-1000, NULL passes) and
    DuckDB evaluates it once per query, not per row."""
    g = np.random.default_rng(0)
    s = np.concatenate([2.0 ** np.arange(-1000, 1000), np.nextafter(2.0 ** np.arange(-999, 1000), 0),
                        np.nextafter(2.0 ** np.arange(-1000, 1000), np.inf), g.lognormal(0, 50, 2000),
                        [0.0, 2.0**-1074, -3.0]])
    con = _con()
    got = np.array(con.execute("SELECT _dpsql_fg(s) FROM (SELECT unnest(?::DOUBLE[]) AS s)",
                               [s.tolist()]).fetchall()).ravel()
    m, e = np.frexp(np.maximum(s, 2.0**-1000))
    assert np.array_equal(got, np.ldexp(1.0, e - 1) * 2.0**-20)
    assert con.execute("SELECT _dpsql_fg(NULL)").fetchone() == (None,)
    plan = "".join(str(r) for r in con.execute(
        "EXPLAIN SELECT dp_mean(x, epsilon := 1, lower := 0, upper := 3, method := 'clipped') FROM "
        "range(10) t(x)").fetchall())
    assert "_dpsql_fg" not in plan  # folded into a constant


AGGS = [("dp_sum", "sum"), ("dp_mean", "mean"), ("dp_avg", "mean"), ("dp_var", "var"), ("dp_stddev", "stddev")]


@pytest.mark.parametrize("kind", ["DOUBLE", "REAL", "BIGINT", "INTEGER", "DECIMAL(18,3)"])
def test_both_routes_release_the_same_numbers(kind: str) -> None:
    """Each aggregate, bound pair and filter: the native route and the list route (the UDF called on
    list(x) directly) give equal releases from equally seeded generators."""
    con = _con()
    for seed, (lo, hi) in enumerate(BOUNDS[:6]):
        _table(con, seed, kind)
        for fn, agg in AGGS:
            for where in ("g = 1", "x IS NULL"):
                args = f"epsilon := 0.7, lower := {lo!r}, upper := {hi!r}, method := 'clipped'"
                dpsql.install(con, rng=Rng.seeded(seed))
                native = con.execute(f"SELECT {fn}(x, {args}) FROM t WHERE {where}").fetchall()
                dpsql.install(con, rng=Rng.seeded(seed))
                listed = con.execute(f"SELECT _dpsql_agg('{agg}', list(x), NULL, 0.7, NULL, NULL, {lo!r}, {hi!r}, "
                                     f"'clipped', NULL) FROM t WHERE {where}").fetchall()
                assert native == listed, (fn, kind, lo, hi, where)


def test_native_route_builds_no_list() -> None:
    con = _con()
    con.execute("CREATE TABLE t AS SELECT random() AS x FROM range(100)")
    plan = con.execute("EXPLAIN SELECT dp_mean(x, epsilon := 1, lower := 0, upper := 1, method := 'clipped') "
                       "FROM t").fetchall()[0][1]
    assert "list(" not in plan and "_dpsql_agg" not in plan and "_dpsql_fin" in plan
    plan = con.execute("EXPLAIN SELECT dp_mean(x, epsilon := 1) FROM t").fetchall()[0][1]
    assert "list(" in plan and "_dpsql_fin" not in plan


@pytest.mark.parametrize("args", ["lower := 2, upper := 1", "lower := 0, upper := 1, rho := 0.1",
                                  "lower := 0, upper := 1", "epsilon := -1, lower := 0, upper := 1",
                                  "epsilon := 1, lower := 0, upper := 'inf'"])
def test_native_route_gives_the_list_route_errors(args: str) -> None:
    con = _con()
    con.execute("CREATE TABLE t AS SELECT random() AS x FROM range(10)")
    msgs = []
    for route in ("clipped", "'clipped'"):
        q = (f"SELECT dp_mean(x, {args}, method := 'clipped') FROM t" if route == "clipped" else
             f"SELECT _dpsql_agg('mean', list(x), NULL, {_eps(args)}, {_kw(args, 'rho')}, NULL, "
             f"{_kw(args, 'lower')}, {_kw(args, 'upper')}, 'clipped', NULL) FROM t")
        with pytest.raises(duckdb.Error) as e:
            con.execute(q).fetchall()
        msgs.append(str(e.value).split("\n")[0].split(": ", 1)[-1])
    assert msgs[0] == msgs[1]


def _kw(args: str, name: str) -> str:
    for part in args.split(","):
        k, _, v = part.partition(":=")
        if k.strip() == name:
            return v.strip()
    return "NULL"


def _eps(args: str) -> str:
    return _kw(args, "epsilon")


def test_bounds_too_far_apart_are_a_parameter_error() -> None:
    """lower/upper whose squared half-width overflows: dp_var refuses them before any noise (both routes)."""
    con = _con()
    con.execute("CREATE TABLE t AS SELECT random() AS x FROM range(10)")
    with pytest.raises(duckdb.Error, match="too far apart"):
        con.execute("SELECT dp_var(x, epsilon := 1, lower := -1e300, upper := 1e300, method := 'clipped') FROM t")
    # the mean's sensitivity (the half-width) is finite: no error
    con.execute("SELECT dp_mean(x, epsilon := 1, lower := -1e300, upper := 1e300, method := 'clipped') "
                "FROM t").fetchall()
