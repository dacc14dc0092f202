"""Summary plans (issue 17): a one-group pass reads its released parameters as literals (plans._inline): each
literal is its value bit for bit, and the releases are those of the passes that join the parameters as columns."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from dpsql import plans
from dpsql.noise import Rng

SPECIAL = [0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 2.0**-1022, np.nextafter(2.0**-1022, 0.0),
           1.7976931348623157e308, 0.1, 1 / 3, np.nextafter(1.0, 2.0), 2.0**-1060, 9.3e18, -123456789.12345678]


def test_double_literals_round_trip_bit_for_bit() -> None:
    r = np.random.default_rng(3)
    raw = np.frombuffer(r.integers(0, 2**63, 3000, dtype=np.int64).tobytes(), dtype=np.float64)
    vals = np.array([*SPECIAL, *raw[~np.isnan(raw)], *-raw[~np.isnan(raw)]], dtype=np.float64)
    sql = "SELECT [" + ", ".join(plans._literal(np.array([v])) for v in vals) + "]"
    got = np.array(duckdb.connect().sql(sql).fetchall()[0][0], dtype=np.float64)
    assert np.array_equal(got.view(np.int64), vals.view(np.int64))
    assert all(plans.LITERAL.fullmatch(plans._literal(np.array([v]))) for v in vals[:20])


def test_integer_and_boolean_literals() -> None:
    ints = [0, -1, 52, -1074, 2**62, -(2**63), 2**63 - 1]
    row = duckdb.connect().sql("SELECT " + ", ".join(plans._literal(np.array([v], dtype=np.int64)) for v in ints) +
                               ", " + plans._literal(np.array([True])) + ", " + plans._literal(np.array([False])))
    assert row.fetchall()[0] == (*ints, True, False)
    assert [str(t) for t in row.types] == ["BIGINT"] * len(ints) + ["BOOLEAN"] * 2


def test_inline_only_unambiguous_references() -> None:
    a = {"_c": "CAST('1.0' AS DOUBLE)", "_e": "CAST('2' AS BIGINT)", "_h": "CAST('3.0' AS DOUBLE)"}
    b = {"_c": "CAST('1.0' AS DOUBLE)", "_e": None, "_h": "CAST('4.0' AS DOUBLE)"}
    sql = "SELECT p._c, p._e, p._h, p._e0, p._g, temp._c FROM x"
    assert plans._inline(sql, [a]) == ("SELECT CAST('1.0' AS DOUBLE), CAST('2' AS BIGINT), CAST('3.0' AS DOUBLE), "
                                       "p._e0, p._g, temp._c FROM x")
    assert plans._inline(sql, [a, b]) == "SELECT CAST('1.0' AS DOUBLE), p._e, p._h, p._e0, p._g, temp._c FROM x"


@pytest.mark.parametrize("agg", ["median", "quantile(x, 0.9,", "iqr", "mean", "sum", "var"])
def test_one_group_releases_equal_with_and_without_literals(agg: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Heavy tails, extremes and a far outlier in one group (every pass, the floor subsampled or not)."""
    r = np.random.default_rng(11)
    x = np.concatenate([r.lognormal(2, 3, 150_000) * r.choice([-1, 1], 150_000), np.array(SPECIAL[:6] * 3)])
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"x": x}))
    call = f"dp_{agg}(x, epsilon := 1.0)" if "(" not in agg else f"dp_{agg} epsilon := 1.0)"
    out = {}
    fetch = plans._fetch
    for inline in (False, True):
        monkeypatch.setattr(plans.DuckSource, "INLINE", inline)
        statements: list[str] = []

        def counting(c: duckdb.DuckDBPyConnection, q: str, params: dict | None = None, s: list = statements
                     ) -> pa.Table:
            s.append(q)
            return fetch(c, q, params)

        monkeypatch.setattr(plans, "_fetch", counting)
        got = plans.run(con, f"SELECT {call} AS a FROM t", Rng.seeded(4))
        monkeypatch.setattr(plans, "_fetch", fetch)
        out[inline] = (got.column("a").to_numpy(zero_copy_only=False).astype(float), statements)
    assert np.array_equal(out[False][0], out[True][0], equal_nan=True)
    assert len(out[False][1]) == len(out[True][1]) > 2
    assert any(plans.LITERAL.search(q) for q in out[True][1])
    assert not any(plans.LITERAL.search(q) for q in out[False][1])
