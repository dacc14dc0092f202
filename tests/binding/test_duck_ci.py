"""The dp_*_ci functions in trusted mode: one release with its interval, as STRUCT(value, lo, hi) (issue 14)."""

import math

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.core import get_method, methods
from dpsql.core.registry import MAX_LEVEL, MIN_LEVEL
from dpsql.duck import AGGREGATE_FUNCTIONS, CI_SUFFIX, plain_function
from dpsql.noise import Rng

#: every dp_*_ci call, with the core aggregate whose default method must have an interval
CALLS = {
    "dp_count_ci": "dp_count_ci(x, epsilon := 1)",
    "dp_count_star_ci": "dp_count_star_ci(epsilon := 1)",
    "dp_sum_ci": "dp_sum_ci(x, epsilon := 1)",
    "dp_mean_ci": "dp_mean_ci(x, epsilon := 1)",
    "dp_avg_ci": "dp_avg_ci(x, epsilon := 1, level := 0.9)",
    "dp_var_ci": "dp_var_ci(x, epsilon := 1)",
    "dp_stddev_ci": "dp_stddev_ci(x, epsilon := 1)",
    "dp_quantile_ci": "dp_quantile_ci(x, 0.9, epsilon := 1)",
    "dp_median_ci": "dp_median_ci(x, epsilon := 1, level := 0.99)",
    "dp_iqr_ci": "dp_iqr_ci(x, epsilon := 1)",
}


def _needs_interval(fn: str) -> None:
    """Every default method has an interval: a default without one is a failure, not a skip."""
    assert get_method(AGGREGATE_FUNCTIONS[fn], None).interval is not None, fn


@pytest.fixture()
def con():
    c = duckdb.connect()
    dpsql.install(c, rng=Rng.seeded(123))
    c.execute("CREATE TABLE t AS SELECT i % 4 AS g, (i % 97)::DOUBLE + 1000 AS x FROM range(20000) r(i)")
    yield c
    c.close()


def test_every_function_has_its_ci_twin_in_the_one_list():
    plain = [f for f in AGGREGATE_FUNCTIONS if not f.endswith(CI_SUFFIX)]
    assert sorted(f for f in AGGREGATE_FUNCTIONS if f.endswith(CI_SUFFIX)) == sorted(f + CI_SUFFIX for f in plain)
    assert all(AGGREGATE_FUNCTIONS[f + CI_SUFFIX] == AGGREGATE_FUNCTIONS[f] for f in plain)
    assert sorted(CALLS) == sorted(f + CI_SUFFIX for f in plain)
    assert plain_function("dp_count_star_ci") == "dp_count_star" and plain_function("dp_mean") == "dp_mean"


@pytest.mark.parametrize("fn", sorted(CALLS))
def test_struct_fields_and_a_proper_interval(con, fn):
    _needs_interval(fn)
    rel = con.sql(f"SELECT g, {CALLS[fn]} AS r FROM t GROUP BY g ORDER BY g")
    assert str(rel.types[1]) == 'STRUCT("value" DOUBLE, lo DOUBLE, hi DOUBLE)'
    rows = rel.fetchall()
    assert len(rows) == 4
    for _, r in rows:
        assert list(r) == ["value", "lo", "hi"]
        assert r["value"] is not None and math.isfinite(r["value"])
        assert r["lo"] <= r["hi"]  # lo <= value <= hi is not promised in general


def test_count_value_is_the_plain_release_and_the_interval_is_exact():
    """dp_count_ci releases what dp_count releases (the same draws from the same seeded generator) and adds
    count_interval's [value - k, value + k], floored at 0."""
    from dpsql.core.intervals import dlap_quantile

    out = {}
    for fn in ("dp_count", "dp_count_ci", "dp_count_star", "dp_count_star_ci"):
        c = duckdb.connect()
        dpsql.install(c, rng=Rng.seeded(5))
        arg = "" if "star" in fn else "x, "
        out[fn] = [r[0] for r in c.sql(f"SELECT {fn}({arg}epsilon := 0.5) FROM (SELECT i % 7 AS g, i AS x "
                                       "FROM range(300) r(i)) GROUP BY g ORDER BY g").fetchall()]
        c.close()
    k = dlap_quantile(1 / 0.5, 0.05)
    for plain in ("dp_count", "dp_count_star"):
        assert [r["value"] for r in out[plain + "_ci"]] == out[plain]
        assert all(r["lo"] == max(r["value"] - k, 0) and r["hi"] == r["value"] + k for r in out[plain + "_ci"])


def test_stddev_is_the_square_root_of_var():
    _needs_interval("dp_var_ci")
    out = {}
    for fn in ("dp_var_ci", "dp_stddev_ci"):
        c = duckdb.connect()
        dpsql.install(c, rng=Rng.seeded(9))
        out[fn] = c.execute(f"SELECT {fn}(i::DOUBLE, epsilon := 1) FROM range(5000) r(i)").fetchone()[0]
        c.close()
    var, sd = out["dp_var_ci"], out["dp_stddev_ci"]
    assert sd["value"] == math.sqrt(max(var["value"], 0.0))
    assert sd["lo"] == math.sqrt(max(var["lo"], 0.0)) and sd["hi"] == math.sqrt(max(var["hi"], 0.0))


def test_empty_input_releases_a_struct_or_a_null_struct(con):
    # a count over no rows is noise around 0, with its interval (never NULL)
    r = con.execute("SELECT dp_count_ci(x, epsilon := 1), dp_count_star_ci(epsilon := 1) FROM t WHERE x < 0").fetchone()
    for s in r:
        assert s is not None and s["value"] >= 0 and 0 <= s["lo"] <= s["value"] <= s["hi"]
    # a mean over no rows is mostly NULL (its noisy count is small); NULL is then the whole struct, never a
    # struct whose value is NULL
    vals = [con.execute("SELECT dp_mean_ci(x, epsilon := 1) FROM t WHERE x < 0").fetchone()[0] for _ in range(20)]
    assert sum(v is None for v in vals) >= 10
    assert all(v is None or v["value"] is not None for v in vals)


def test_null_release_is_a_null_struct():
    from dpsql.duck import _release_ci

    nan = float("nan")
    arr = _release_ci("mean", np.array([1.0, nan]), np.array([-np.inf, nan]), np.array([2.0, nan]))
    assert arr.to_pylist() == [{"value": 1.0, "lo": -math.inf, "hi": 2.0}, None]


def test_level_range_is_named_in_the_error(con):
    with pytest.raises(duckdb.Error, match=rf"level must be a finite number in \[{MIN_LEVEL:g}, {MAX_LEVEL:g}\]"):
        con.sql("SELECT dp_mean_ci(x, epsilon := 1, level := 0.9999) FROM t").fetchall()


@pytest.mark.parametrize("level", ["1.5", "0.4", "1", "'nan'::DOUBLE"])
def test_level_out_of_range_is_a_parameter_error(con, level):
    with pytest.raises(duckdb.Error, match="dp_count: level must be a finite number"):
        con.sql(f"SELECT dp_count_ci(x, epsilon := 1, level := {level}) FROM t").fetchall()


def test_level_must_be_a_constant(con):
    with pytest.raises(duckdb.Error, match="level must be a constant literal"):
        con.sql("SELECT g, dp_count_ci(x, epsilon := 1, level := 0.9 + g / 100) FROM t GROUP BY g").fetchall()


def test_a_method_without_an_interval_is_refused_by_name(con):
    for agg, fn in (("mean", "dp_mean_ci"), ("sum", "dp_sum_ci"), ("quantile", "dp_median_ci")):
        bare = [m for m in methods(agg).values() if m.interval is None and not m.requires_bounds]
        if bare:
            m = bare[0]
            extra = ", delta := 1e-6" if m.notion == "zcdp" else ""
            with pytest.raises(duckdb.Error, match=f"method {m.name!r} has no interval"):
                con.sql(f"SELECT {fn}(x, epsilon := 1, method := '{m.name}'{extra}) FROM t").fetchall()
            return
    pytest.skip("every method has an interval")


def test_a_higher_level_gives_a_wider_count_interval(con):
    w = {}
    for level in (0.5, 0.999):
        r = con.execute(f"SELECT dp_count_ci(x, epsilon := 1, level := {level}) FROM t").fetchone()[0]
        w[level] = r["hi"] - r["lo"]
    assert w[0.5] < w[0.999]


def test_count_interval_covers_the_true_count_in_95_percent_of_groups():
    """400 groups of known sizes 1..400: the nominal 95 % interval covers each exact count at least 95 % of the
    time (the discrete Laplace quantile is exact, so the expected coverage is about 97 % at epsilon 1)."""
    c = duckdb.connect()
    dpsql.install(c, rng=Rng.seeded(2024))
    rows = c.sql("SELECT g, count(*) AS n, dp_count_star_ci(epsilon := 1) AS r "
                 "FROM (SELECT unnest(range(g)) AS i, g FROM range(1, 401) t(g)) GROUP BY g").fetchall()
    c.close()
    assert len(rows) == 400
    covered = sum(r["lo"] <= n <= r["hi"] for _, n, r in rows)
    assert covered >= 0.95 * len(rows)
