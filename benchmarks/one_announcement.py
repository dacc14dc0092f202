"""Issue 17: one rows announcement per call.  The hybrid route's small groups come back in pieces of about
``plans.ROWS_PASS_ROWS`` released rows, one rows pass (a scan of the source) per piece; the core used to announce
its row parts class by class (the mean's few / mid / low / high, the median's low / high, the quantiles' wide rows
and near classes), so a class of two groups cost a scan of its own.  Now each call announces all its parts once.

    .venv/bin/python benchmarks/one_announcement.py --rows 1e7             # the defaults' pieces (2**21)
    .venv/bin/python benchmarks/one_announcement.py --pass-rows 2**18 ...  # 10**6 rows, pieces and parts / 8
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/one_announcement.py --label before  # an older tree

One query per aggregate on a table of mixed group sizes (every class of every aggregate holds small groups: released
counts below ``SMALL_ROWS``), the rows in pieces (the small groups' released rows above ``ROWS_PASS_ROWS``):
rows passes (statements reading rows), all statements, and the best wall time of ``--reps`` runs (fresh
connection; the table in DuckDB).  Writes ``results/one_announcement.md`` (appends a labelled section).
"""

from __future__ import annotations

import argparse
import os
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpsql import plans
from dpsql.core import summary
from dpsql.noise import Rng

HERE = os.path.dirname(os.path.abspath(__file__))
QUERIES = {
    "dp_mean": "dp_mean(x, epsilon := 1.0)",
    "dp_sum": "dp_sum(x, epsilon := 1.0)",
    "dp_median": "dp_median(x, epsilon := 1.0)",
    "dp_quantile p=0.1": "dp_quantile(x, 0.1, epsilon := 1.0)",
    "dp_iqr": "dp_iqr(x, epsilon := 1.0)",
    "dp_var": "dp_var(x, epsilon := 1.0)",
}


def table(rows: float, seed: int = 1) -> pa.Table:
    """At eps 1, 10 groups each of 100, 180, 260, 500, 900 and 2500 rows, the rest of ``rows`` in groups of 8000
    (all below SMALL_ROWS: every group read as rows).  Classes (n eps): dp_mean few / few / mid / low / high ...;
    dp_median low x4, high; p = 0.1 near low / mid / high x3, wide from 1000; dp_iqr (p = 1/4) near low / mid /
    high, wide from 400."""
    r = np.random.default_rng(seed)
    small = np.repeat([100, 180, 260, 500, 900, 2500], 10)
    big = np.full(max(int((rows - small.sum()) // 8000), 1), 8000)
    sizes = r.permutation(np.concatenate([small, big]))
    g = np.repeat(np.arange(sizes.size), sizes)
    x = r.lognormal(0, 2, g.size) * r.choice([-1, 1], g.size)
    return pa.table({"g": g, "x": x})


def measure(t: pa.Table | str, call: str, reps: int) -> tuple[int, int, float, float]:
    """Rows passes, statements, the best time of ``reps`` runs of one call and the least time its rows passes'
    statements took (fetching the rows into Arrow); ``t`` a table (copied into DuckDB)
    or a parquet file's path (a view over it: every pass scans the file)."""
    fetch = plans._fetch
    statements: list[str] = []

    spent: list[float] = []

    def counting(c: duckdb.DuckDBPyConnection, q: str, params: dict | None = None) -> pa.Table:
        statements.append(q)
        t0 = time.perf_counter()
        try:
            return fetch(c, q, params)
        finally:
            if "_rows_x" in q:
                spent.append(time.perf_counter() - t0)

    best, rows_time = np.inf, np.inf
    plans._fetch = counting
    try:
        for rep in range(reps):
            con = duckdb.connect()
            if isinstance(t, str):
                con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{t}')")
            else:
                con.register("tt", t)
                con.execute("CREATE TABLE t AS SELECT * FROM tt")
                con.unregister("tt")
            statements.clear()
            spent.clear()
            t0 = time.perf_counter()
            plans.run(con, f"SELECT g, {call} AS v FROM t GROUP BY g", Rng.seeded(rep))
            best = min(best, time.perf_counter() - t0)
            rows_time = min(rows_time, sum(spent))
            con.close()
    finally:
        plans._fetch = fetch
    return sum("_rows_x" in q for q in statements), len(statements), best, rows_time


def _num(v: str) -> float:
    """A number, ``2**18`` allowed."""
    base, _, exp = v.partition("**")
    return float(base) ** float(exp) if exp else float(v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--pass-rows", type=_num, default=plans.ROWS_PASS_ROWS,
                    help="plans.ROWS_PASS_ROWS")
    ap.add_argument("--chunk", type=_num, default=summary.ROWS_CHUNK, help="core.summary.ROWS_CHUNK (the core's "
                    "parts; it should divide --pass-rows)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--label", default="after")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--parquet", help="write the table to this parquet file and query a view over it")
    a = ap.parse_args()
    plans.ROWS_PASS_ROWS, summary.ROWS_CHUNK = a.pass_rows, a.chunk
    t = table(a.rows)
    where = "a DuckDB table"
    if a.parquet:
        pq.write_table(t, a.parquet)
        where = "a view over a parquet file"
    lines = [f"### {a.label}: {t.num_rows} rows, {len(np.unique(t.column('g').to_numpy()))} groups, {where}, "
             f"ROWS_PASS_ROWS = {a.pass_rows:g}, ROWS_CHUNK = {a.chunk:g}, best of {a.reps}", "",
             "| call | rows passes | statements | time (s) | rows passes' time (s) |", "|---|---|---|---|---|"]
    for name, call in QUERIES.items():
        passes, n, sec, rows_sec = measure(a.parquet or t, call, a.reps)
        lines.append(f"| {name} | {passes} | {n} | {sec:.3f} | {rows_sec:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        with open(os.path.join(HERE, "results", "one_announcement.md"), "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
