"""Guarded queries on Spark (dpsql.spark, local[2]) next to the same guarded queries in DuckDB (issue 18).

One protected table of ``--rows`` lognormal values, 1,000 units, 10 groups with declared keys; each query runs
through the full guarded path (guard, charge, one action) in both engines, ``--repeat`` times (the median is
reported).  Writes ``benchmarks/results/spark.md``.  Small by default: the machine's cores are shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import duckdb

import dpsql
import dpsql.spark as dspark
from dpsql.ledger import Ledger

QUERIES = {
    "dp_count by group": "SELECT g, dp_count(*, epsilon := 1) FROM t GROUP BY g",
    "dp_mean by group": "SELECT g, dp_mean(x, epsilon := 1) FROM t GROUP BY g",
    "dp_median, 1 group": "SELECT dp_median(x, epsilon := 1) FROM t",
    "dp_mean clipped (native)": "SELECT g, dp_mean(x, epsilon := 1, lower := 0, upper := 100, method := 'clipped') "
                                "FROM t GROUP BY g",
}
KEYS = tuple(f"k{i}" for i in range(10))


def _timed(fn, repeat: int) -> float:  # noqa: ANN001
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = int(args.rows)
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp())
    db = work / "bench.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE t AS SELECT (i % 1000)::INTEGER AS u, 'k' || (i % 10)::VARCHAR AS g, "
                f"exp(random() * 2)::DOUBLE AS x FROM range({n}) r(i)")
    arrow = con.sql("SELECT * FROM t").to_arrow_table()
    con.close()
    admin = dpsql.admin(str(db))
    k = max(1, n // 1000)  # every unit's rows are kept: the same rows in both engines
    admin.protect("t", privacy_unit="u", max_rows_per_unit=k)
    admin.public_keys("t", "g", KEYS)
    admin.grant("bench", epsilon=1e9)
    duck = dpsql.connect(str(db), analyst="bench", replay=False)

    spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ledger = Ledger(work / "spark.ledger.duckdb", "bench", create=True)
    ledger.grant("bench", "pure", 1e9)
    s = dspark.Session(spark, ledger, "bench")
    s.protect("t", spark.createDataFrame(arrow).cache(), unit="u", max_rows_per_unit=k, public_keys={"g": KEYS})
    rows = []
    for name, q in QUERIES.items():
        d = _timed(lambda q=q: duck.sql(q), args.repeat)
        sp = _timed(lambda q=q: s.sql(q), args.repeat)
        rows.append((name, d, sp))
        print(f"{name:28s} duckdb {d:6.2f} s   spark {sp:6.2f} s   ratio {sp / d:5.1f}", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]
    lines = ["# Guarded queries: Spark local[2] vs DuckDB (issue 18)\n",
             f"{n:,} rows, 1,000 units, 10 declared groups; median of {args.repeat}; dpsql {commit}; "
             f"load {load:.1f} on 2 shared cores.\n",
             "| query | DuckDB s | Spark s | Spark / DuckDB |", "|---|---|---|---|"]
    lines += [f"| {a} | {d:.2f} | {sp:.2f} | {sp / d:.1f} |" for a, d, sp in rows]
    out = Path(__file__).parent / "results" / "spark.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    s.close()
    duck.close()
    spark.stop()


if __name__ == "__main__":
    main()
