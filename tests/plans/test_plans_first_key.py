"""The first bucket histogram's per-row key (dpsql.plans._exm_key, the IEEE bits) decodes (_exm_decode) to exactly
the sign, floor exponent and mantissa bits that DuckSource._exm computes with log2, pow and a division: zeros of
both signs, subnormals of every bit length, the smallest normal and its neighbours, powers of two and their
neighbours at every exponent, the clamp's +-2**1000 and +-inf, random values; every shift the plans use."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from dpsql.core import summary as core_summary
from dpsql.plans import _VC, DuckSource, _exm_decode, _exm_key


def _values() -> np.ndarray:
    vals = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, -2.2250738585072014e-308, 2.225073858507201e-308,
            1.0, -1.0, 1.5, np.nextafter(1.0, 0), np.nextafter(2.0, 0), 2.0**1000, -(2.0**1000), 2.0**1001, np.inf,
            -np.inf, 1e308, -1e308, 0.1, -0.1]
    for e in range(-1074, 1024, 5):
        w = np.ldexp(1.0, e)
        for x in (w, np.nextafter(w, 0), np.nextafter(w, np.inf), w * 1.5, w * 1.2345678901):
            vals += [x, -x]
    r = np.random.default_rng(5)
    vals += list(r.lognormal(0, 5, 3000)) + list(-r.lognormal(0, 60, 1000))
    vals += list(r.integers(1, 2**52, 1000) * 5e-324)
    return np.array(vals, dtype=np.float64)


@pytest.mark.parametrize("bits", [0, 1, 7, 9, 20, core_summary.RAW_BITS])
def test_key_decodes_to_exm(bits: int) -> None:
    con = duckdb.connect()
    con.register("t", pa.table({"_x": _values()}))
    rows = f"SELECT {_VC} AS v FROM t"
    want = con.sql(f"SELECT _neg, _ex, _m FROM ({DuckSource._exm(rows, repr(float(2**bits)))})").fetchnumpy()
    key = con.sql(f"SELECT {_exm_key('v', str(52 - bits))} AS k FROM ({rows})").fetchnumpy()["k"]
    neg, ex, m = _exm_decode(key, np.full(key.size, bits))
    np.testing.assert_array_equal(neg, want["_neg"])
    np.testing.assert_array_equal(ex, want["_ex"])
    np.testing.assert_array_equal(m, want["_m"])
    # a shift per row (the grouped plans' column) gives the same keys
    con.register("s", pa.table({"_x": _values(), "_es": np.full(_values().size, 52 - bits)}))
    per_row = con.sql(f"SELECT {_exm_key('v', '_es')} AS k FROM (SELECT {_VC} AS v, _es FROM s)").fetchnumpy()["k"]
    np.testing.assert_array_equal(per_row, key)
