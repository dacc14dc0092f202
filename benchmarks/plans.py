"""Summary plans (issue 17) vs the list route and quantile_cont: time and peak memory of dp_median.

Each measurement runs in a fresh Python process (peak RSS = ru_maxrss of that process, data included): x ~
lognormal(0, 1) in a DuckDB table, G groups.  ``python benchmarks/plans.py --rows 1e6 1e7 --groups 1 10000``;
writes benchmarks/results/plans.md.  One run per cell (timings on a shared 2-core machine are noisy).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import json, resource, sys, time
import duckdb, dpsql
from dpsql import plans
rows, groups, route = int(float(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
con = dpsql.install(duckdb.connect())
x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"  # lognormal(0, 1)
con.execute(f"CREATE TABLE t AS SELECT (random() * {groups})::BIGINT AS g, {x} AS x FROM range({rows})")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sel = "g, " if groups > 1 else ""
grp = " GROUP BY g" if groups > 1 else ""
q = {"quantile_cont": f"SELECT {sel}quantile_cont(x, 0.5) FROM t{grp}",
     "list": f"SELECT {sel}dp_median(x, epsilon := 1) FROM t{grp}",
     "summary": f"SELECT {sel}dp_median(x, epsilon := 1) FROM t{grp}"}[route]
t0 = time.perf_counter()
if route == "summary":
    plans.run(con, q)
else:
    con.sql(q).fetchall()
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"s": dt, "peak_mb": peak / 1024, "base_mb": base / 1024}))
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", nargs="+", default=["1e6", "1e7"])
    ap.add_argument("--groups", nargs="+", type=int, default=[1, 10000])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "plans.md"))
    a = ap.parse_args()
    lines = ["# dp_median: summary plans vs the list route vs quantile_cont", "",
             "`benchmarks/plans.py` (one run per cell, fresh process each; 2 shared cores). x ~ lognormal(0, 1) in a "
             "DuckDB table; epsilon 1. s = wall time of the query; peak = the process's peak RSS (MB) minus its RSS "
             "after loading the table (the query's own peak, roughly).", "",
             "| rows | groups | route | s | query peak MB |", "|---|---|---|---|---|"]
    for rows in a.rows:
        for g in a.groups:
            for route in ("quantile_cont", "list", "summary"):
                out = subprocess.run([sys.executable, "-c", CHILD, rows, str(g), route], capture_output=True,
                                     text=True, check=True).stdout
                m = json.loads(out.strip().splitlines()[-1])
                row = f"| {float(rows):.0e} | {g} | {route} | {m['s']:.2f} | {m['peak_mb'] - m['base_mb']:.0f} |"
                print(row, flush=True)
                lines.append(row)
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
