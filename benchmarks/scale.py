"""Time and peak memory against rows, 10^6 to 10^9, one group, DuckDB files (issue 17's scale item).

For each size a DuckDB file ``t(x DOUBLE)``, x ~ lognormal(0, 1), is built once (in SQL, on disk, removed after
its size is done).  Every query then runs in a fresh Python process on the file opened read-only: native DuckDB
(avg, quantile_cont), the list route (the plain macros: ``list(x)`` to Python) and the compiled route
(``dpsql.sql(con, q)``: the summary plans where :func:`dpsql.plans.compile_query` owns the query, else the
macros: the table says which).  Peak memory is the process's peak RSS minus its RSS after opening the file.
The list route is skipped where its ``list(x)`` alone would not fit (``--list-max``, rows): a 10^9-row list is
8 GB in DuckDB and again in Arrow and numpy (so is the compiled route where it falls back to the macros).

    .venv/bin/python benchmarks/scale.py --rows 1e6 1e7 1e8 1e9

Writes ``benchmarks/results/scale.md`` and ``benchmarks/results/scale_vs_rows.png`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from common import machine, md_table  # noqa: E402

CHILD = r'''
import json, os, resource, sys, time
import duckdb, dpsql
from dpsql import plans
dbfile, kind, q = sys.argv[1], sys.argv[2], sys.argv[3]
con = duckdb.connect(dbfile, read_only=True)
dpsql.install(con)
con.sql("SELECT count(*) FROM t").fetchall()
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
t0 = time.perf_counter()
if kind == "compiled":
    out = dpsql.sql(con, q)
    via = "plans" if plans.compile_query(q) is not None else "macros"
else:
    out = con.sql(q).fetchall()
    via = kind
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"s": dt, "peak_mb": peak, "extra_mb": max(peak - rss, 0.0), "via": via}))
'''

#: (aggregate, native label, native SQL expr, dp SQL expr)
PAIRS = [
    ("mean", "avg", "avg(x)", "dp_mean(x, epsilon := 1)"),
    ("var", "var_samp", "var_samp(x)", "dp_var(x, epsilon := 1)"),
    ("median", "quantile_cont", "quantile_cont(x, 0.5)", "dp_median(x, epsilon := 1)"),
    ("iqr", "two quantile_cont", "quantile_cont(x, 0.75) - quantile_cont(x, 0.25)", "dp_iqr(x, epsilon := 1)"),
]


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def build(dbfile: str, rows: int) -> float:
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect(dbfile)
    x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"
    con.execute(f"CREATE TABLE t AS SELECT {x} AS x FROM range({rows})")
    con.execute("CHECKPOINT")
    con.close()
    return time.perf_counter() - t0


def child(dbfile: str, kind: str, expr: str) -> dict:
    q = f"SELECT {expr} FROM t"
    p = subprocess.run([sys.executable, "-c", CHILD, dbfile, kind, q], capture_output=True, text=True)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        named = [ln for ln in lines if "Error" in ln or "Exception" in ln]  # the error's own line, not a hint after it
        tail = (named or lines or [f"exit {p.returncode}"])[-1][:100]
        return {"failed": tail}
    return json.loads(p.stdout.strip().splitlines()[-1])


def plot(rows_done: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(PAIRS), figsize=(5.2 * len(PAIRS), 4.2))
    for ax, (agg, native, _, _) in zip(np.atleast_1d(axes), PAIRS, strict=True):
        for label, style in ((native, "k-o"), ("list route", "C3--s"), ("compiled route", "C0-^")):
            pts = [(r["rows"], r["s"]) for r in rows_done if r["agg"] == agg and r["route"] == label and "s" in r]
            if pts:
                ax.loglog(*zip(*pts, strict=True), style, label=label)
        ax.set_title(f"dp_{agg} vs {native}, one group")
        ax.set_xlabel("rows")
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", default=["1e6", "1e7", "1e8", "1e9"])
    names = [a for a, *_ in PAIRS]
    ap.add_argument("--aggs", nargs="+", default=names, help="which of " + ", ".join(names))
    ap.add_argument("--list-max", type=float, default=2e8, help="largest size the list route runs at")
    ap.add_argument("--dir", default=None, help="where the DuckDB files go (default: a temporary directory)")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    from dpsql.plans import compile_query

    load0 = loadavg()
    tmp = args.dir or tempfile.mkdtemp(prefix="dpsql_scale_")
    done: list[dict] = []
    table = []
    for r in args.rows:
        rows = int(float(r))
        dbfile = os.path.join(tmp, f"scale_{rows}.duckdb")
        built = build(dbfile, rows)
        mb = os.path.getsize(dbfile) / 2**20
        print(f"built {rows:.0e} rows in {built:.0f} s, file {mb:.0f} MiB", flush=True)
        for agg, native, nat_expr, dp_expr in PAIRS:
            if agg not in args.aggs:
                continue
            base = None
            for label, kind, expr in ((native, "native", nat_expr), ("list route", "list", dp_expr),
                                      ("compiled route", "compiled", dp_expr)):
                falls_back = kind == "compiled" and compile_query(f"SELECT {expr} FROM t") is None
                if (kind == "list" or falls_back) and rows > args.list_max:
                    res = {"failed": f"skipped: list(x) of {rows * 8 / 2**30:.1f} GiB, held ~3 times"}
                else:
                    res = child(dbfile, kind, expr)
                res.update(rows=rows, agg=agg, route=label)
                done.append(res)
                if "s" in res and kind == "native":
                    base = res["s"]
                ratio = f"{res['s'] / base:.1f}" if "s" in res and base else "—"
                table.append([f"{rows:.0e}", f"dp_{agg}" if kind != "native" else native,
                              label + (f" ({res['via']})" if kind == "compiled" and "s" in res else ""),
                              f"{res['s']:.2f}" if "s" in res else res["failed"], ratio,
                              f"{res['extra_mb']:.0f}" if "s" in res else "—",
                              f"{res['extra_mb'] / (rows * 8 / 2**20):.2f}" if "s" in res else "—"])
                print("  ", table[-1], flush=True)
        os.remove(dbfile)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(done, out / "scale_vs_rows.png")
    text = "\n".join([
        "# Time and peak memory against rows (issue 17): native, list route, compiled route", "",
        f"`benchmarks/scale.py --rows {' '.join(args.rows)}` on {machine()}; one group, x ~ lognormal(0, 1) in a "
        f"DuckDB file opened read-only; each query in a fresh process; load average {load0} at start, "
        f"{loadavg()} at end. "
        "'x native' is the time over the native aggregate's on the same file; 'extra MiB' is peak RSS minus RSS "
        "after opening the file; 'x column' divides it by the column's size (8 bytes x rows). The compiled route is "
        "`dpsql.sql(con, q)`: '(plans)' where the summary plans own the query, '(macros)' where they fall back.", "",
        md_table(["rows", "aggregate", "route", "seconds", "x native", "extra MiB", "x column"], table), "",
        "![time vs rows](scale_vs_rows.png)", ""])
    (out / "scale.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
