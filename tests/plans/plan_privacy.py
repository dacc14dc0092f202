"""What the statistical privacy tests of the summary plans share (tests/plans/test_plans*_privacy.py): RUNS groups
holding one dataset, the integer-column and doubled-value cases, and the releases of one dp call over them."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from dpsql import plans
from dpsql.noise import Rng
from dpsql.testing import EXTREME_NEIGHBOURS

RUNS = 300
_INT_BASE = [int(round(v)) for v in EXTREME_NEIGHBOURS["one_at_+1e300"][0]]
_DOUBLED = [float(10**k) for k in range(-10, 10)] * 2
#: (column type, D, D'): integer columns at their extremes, and a dataset of doubled values plus one near a tie
EXTRA = {
    "bigint_max_column": ("BIGINT", _INT_BASE, _INT_BASE + [2**63 - 1]),
    "hugeint_min_column": ("HUGEINT", _INT_BASE, _INT_BASE + [-(2**127)]),
    "doubled_values": ("DOUBLE", _DOUBLED, _DOUBLED + [1.0 + 2.0**-20]),
}


def releases(d: list, sqltype: str, seed: int, call: str) -> list:
    """``call`` (a dp_* call on ``x``) over RUNS groups each holding ``d`` as ``sqltype``, through the plans under
    a seeded generator: the RUNS releases, in group order."""
    rows = [None, *d]  # the NULL row keeps an empty D a group (n = 0)
    g = [i for i in range(RUNS) for _ in rows]
    x = [None if v is None else repr(v) for _ in range(RUNS) for v in rows]
    con = duckdb.connect()
    con.register("src", pa.table({"g": pa.array(g, pa.int64()), "x": pa.array(x, pa.string())}))
    con.execute(f"CREATE TABLE t AS SELECT g, CAST(x AS {sqltype}) AS x FROM src")
    out = plans.run(con, f"SELECT g, {call} AS v FROM t GROUP BY g", Rng.seeded(seed))
    assert out.num_rows == RUNS
    return out.column("v").to_pylist()
