"""The DuckDB binding: dp_* aggregates behave like native aggregates (trusted mode)."""

import decimal

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.noise import Rng


@pytest.fixture()
def con():
    c = duckdb.connect()
    dpsql.install(c, rng=Rng.seeded(123))
    c.execute(
        "CREATE TABLE t AS SELECT i % 4 AS g, (i % 97)::DOUBLE + 1000 AS x, i AS i "
        "FROM range(20000) r(i)"
    )
    yield c
    c.close()


def test_group_by_and_friends(con):
    rows = con.sql(
        "SELECT g, dp_mean(x, epsilon := 1) m, avg(x) a, dp_median(x, epsilon := 1) med, "
        "dp_count(x, epsilon := 1) n, dp_count_star(epsilon := 1) ns, dp_sum(x, epsilon := 1) s, "
        "dp_var(x, epsilon := 1) v, dp_stddev(x, epsilon := 1) sd, dp_iqr(x, epsilon := 1) q, "
        "dp_quantile(x, 0.9, epsilon := 1) p90 FROM t GROUP BY g ORDER BY g"
    ).fetchall()
    assert len(rows) == 4
    for _g, m, a, med, n, ns, s, v, sd, q, p90 in rows:
        # the mean's error is ~0.03 here, but its radius scan runs past the data in ~0.7 % of runs (measured, 2,000
        # runs on one of these groups: 1-85 off; benchmarks/tails.py measures that tail), and four groups under
        # one fixed seed may meet one: 2.1 with the splits of 2026-11-27
        assert abs(m - a) < 5.0
        assert abs(med - 1048) < 3
        assert abs(n - 5000) < 30 and abs(ns - 5000) < 30
        assert abs(s / (5000 * a) - 1) < 0.01
        assert abs(v / 784 - 1) < 0.1 and abs(sd / 28 - 1) < 0.1
        assert abs(q - 48) < 5 and abs(p90 - 1087) < 5
    types = con.sql("SELECT dp_mean(x, epsilon := 1) FROM t").types
    assert str(types[0]) == "DOUBLE"


def test_group_by_all_where_having_cte_subquery(con):
    r = con.sql(
        "WITH w AS (SELECT * FROM t WHERE i > 100) "
        "SELECT g, dp_median(x, epsilon := 1) m FROM w GROUP BY ALL HAVING m > 0 ORDER BY g"
    ).fetchall()
    assert len(r) == 4
    r = con.execute(
        "SELECT count(*) FROM (SELECT g, dp_mean(x, epsilon := 0.5) AS m FROM t GROUP BY g) WHERE m > 0"
    ).fetchone()
    assert r[0] == 4


def test_filter_equivalent_via_case(con):
    # DuckDB does not allow FILTER on macros; CASE WHEN gives the same (NULLs are dropped)
    r = con.execute("SELECT dp_count(CASE WHEN g = 1 THEN x END, epsilon := 1) FROM t").fetchone()[0]
    assert abs(r - 5000) < 30


def test_empty_groups_and_empty_input_release_answers(con):
    # a WHERE that matches nothing: the global aggregate still releases a row (count: noise around 0)
    vals = [con.execute("SELECT dp_count(x, epsilon := 1), dp_median(x, epsilon := 1), dp_mean(x, epsilon := 1) "
                        "FROM t WHERE x < 0").fetchone() for _ in range(20)]
    assert all(v[0] is not None for v in vals)
    # the median and the mean over no rows are NULL when their released count (noise around 0) is below
    # 25 / eps, which is most of the time but not always: the NULL is not a deterministic function of the data
    assert sum(v[1] is None for v in vals) >= 10 and sum(v[2] is None for v in vals) >= 10
    # the old seed-003 quantile never returns NULL
    assert con.execute("SELECT dp_median(x, epsilon := 1, method := 'threshold') FROM t WHERE x < 0").fetchone()[0] \
        is not None


@pytest.mark.parametrize(
    "typ", ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "UINTEGER", "UBIGINT",
            "DECIMAL(18,3)", "DECIMAL(38,10)", "FLOAT", "DOUBLE"]
)
def test_numeric_types(con, typ):
    r = con.execute(f"SELECT dp_mean((i % 100)::{typ}, epsilon := 1), dp_median((i % 100)::{typ}, epsilon := 1) "
                "FROM t").fetchone()
    assert abs(r[0] - 49.5) < 1 and abs(r[1] - 49.5) < 3


def test_bigint_beyond_2_53_and_nulls_nans_infs(con):
    con.execute("CREATE TABLE b AS SELECT (9007199254740993 + i)::BIGINT AS x FROM range(5000) r(i)")
    r = con.execute("SELECT dp_median(x, epsilon := 1) FROM b").fetchone()[0]
    assert abs(r - 9007199254740993) < 1e5
    con.execute("CREATE TABLE n AS SELECT CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN 'nan'::DOUBLE "
                "ELSE 5.0 END AS x FROM range(9000) r(i) UNION ALL SELECT 'inf'::DOUBLE")
    r = con.execute("SELECT dp_count(x, epsilon := 1), dp_median(x, epsilon := 1) FROM n").fetchone()
    assert r[1] == pytest.approx(5.0, abs=0.01)


def test_decimal_38(con):
    con.execute("CREATE TABLE d AS SELECT (i::DECIMAL(38,10) / 7) AS x FROM range(10000) r(i)")
    r = con.execute("SELECT dp_mean(x, epsilon := 1) FROM d").fetchone()[0]
    assert abs(r - float(decimal.Decimal(9999) / 14)) < 5


@pytest.mark.parametrize(
    "sql,word",
    [
        ("SELECT dp_mean(x, epsilon := -1) FROM t", "epsilon"),
        ("SELECT dp_mean(x, epsilon := 'inf'::DOUBLE) FROM t", "epsilon"),
        ("SELECT dp_mean(x) FROM t", "epsilon"),
        ("SELECT dp_quantile(x, 1.5, epsilon := 1) FROM t", "p must"),
        ("SELECT dp_mean(x, epsilon := 1, lower := 5, upper := 1) FROM t", "lower"),
        ("SELECT dp_mean(x, epsilon := 1, method := 'nope') FROM t", "method"),
        ("SELECT g, dp_mean(x, epsilon := g + 1) FROM t GROUP BY g", "constant"),
    ],
)
def test_parameter_errors(con, sql, word):
    with pytest.raises(duckdb.Error, match=word):
        con.sql(sql).fetchall()


def test_non_numeric_column_raises_dpsql_e060(con):  # issue 14; every function and type: test_duck_types.py
    con.execute("CREATE TABLE s AS SELECT 'a' AS x")
    with pytest.raises(duckdb.InvalidInputException, match=r"^Invalid Input Error: DPSQL-E060: dp_mean: its value "
                       r"must be numeric; x is VARCHAR \(convert it"):
        con.sql("SELECT dp_mean(x, epsilon := 1) FROM s").fetchall()


def test_many_groups_vectorised(con):
    r = con.sql("SELECT i % 5000 AS k, dp_mean(x, epsilon := 1) FROM t GROUP BY k").fetchall()
    assert len(r) == 5000


def test_production_install_uses_csprng():
    c = duckdb.connect()
    dpsql.install(c)
    a = c.execute("SELECT dp_count(1, epsilon := 1) FROM range(10)").fetchone()[0]
    assert np.isfinite(a)


@pytest.mark.parametrize("far", ["1e300", "'inf'::DOUBLE", "170141183460469231731687303715884105727::HUGEINT"])
def test_dp_var_survives_one_huge_row(far):
    """Issue 11: 5,000 rows of N(100, 29^2) plus ONE row at 1e300 or +inf made dp_var / dp_stddev ~0 in
    every run (the rest of the group underflowed); removing the row must not move the answer much."""
    c = duckdb.connect()
    dpsql.install(c, rng=Rng.seeded(7))
    x = np.random.default_rng(0).normal(100.0, 29.0, 5000)
    c.execute("CREATE TABLE t(g INTEGER, x DOUBLE)")
    c.execute("INSERT INTO t SELECT (i % 20)::INTEGER, v FROM (SELECT unnest(?) AS v, unnest(range(5000)) AS i)",
              [x.tolist()])
    c.execute(f"INSERT INTO t SELECT g, {far} FROM range(20) r(g)")  # one huge row in each of 20 groups
    rows = c.execute("SELECT g, dp_var(x, epsilon := 1), dp_stddev(x, epsilon := 1) FROM t GROUP BY g").fetchall()
    assert len(rows) == 20
    # each group holds 250 ordinary rows: variance ~841, never the collapsed ~0
    assert all(v > 100 and sd > 10 for _, v, sd in rows), rows
