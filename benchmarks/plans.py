"""Summary plans (issue 17) vs the list route and quantile_cont: time and peak memory of dp_median.

Each measurement runs in a fresh Python process (peak RSS = ru_maxrss of that process, data included), after
the same query on a 5,000-row copy of the table (a process's one-time costs, such as imports, are not the query's): x ~
lognormal(0, 1) in a DuckDB table, G groups.  ``python benchmarks/plans.py --rows 1e6 1e7 --groups 1 10000``;
writes benchmarks/results/plans.md (``--out``).  ``--reps k``: the fastest of k runs per cell (timings on a shared
2-core machine are noisy); the ratio is to quantile_cont of the same rows and groups.  ``--profile ROWS GROUPS``:
instead, the summary route's time per pass (one run) and the gap pass's sort key alternatives on the same table.
``--ladder-ab ROWS GROUPS``: the window's passes three ways, alternating in one process on one table (``--reps``
rounds): the fixed shifts 36, 24, 12, 0 of before, the per-group ladder (core.summary.ladder) with the first bucket
pass on its own, and with the first bucket histogram counted in the gap pass's scan (the default): total time, the
gap and bucket passes' time, and the large class's gap and bucket passes one by one.  ``--floor-ab ROWS GROUPS``:
the floor on every row vs on a Poisson subsample (scalefree.FLOOR_SAMPLE off / on), alternating fresh processes,
list and summary routes (``--reps`` rounds).  ``--small-ab ROWS GROUPS...``: the summary route with every group
through the passes vs every group read as rows (plans.SMALL_ROWS 0 vs inf), alternating fresh processes.
``--aggregate iqr``: dp_iqr instead of dp_median, against ``quantile_cont(x, 0.75) - quantile_cont(x, 0.25)``
(the table printed, and written to ``--out``: point it elsewhere to keep the median's results).  ``--aggregate var``:
dp_var (the default: asymmetric below n eps = 30,000, moments above) against ``var_samp(x)`` (in the column named
quantile_cont).
``--aggregate mean`` / ``sum``: dp_mean / dp_sum (scalefree) against ``avg(x)`` / ``sum(x)`` (the same column).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

CHILD = r'''
import json, resource, sys, time
import duckdb, dpsql
from dpsql import plans
rows, groups, route = int(float(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
if len(sys.argv) > 4 and sys.argv[4] != "default":  # --small-ab: the hybrid route's threshold
    plans.SMALL_ROWS = float(sys.argv[4])
agg = sys.argv[5] if len(sys.argv) > 5 else "median"  # --aggregate
con = dpsql.install(duckdb.connect())
x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"  # lognormal(0, 1)
con.execute(f"CREATE TABLE t AS SELECT (random() * {groups})::BIGINT AS g, {x} AS x FROM range({rows})")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sel = "g, " if groups > 1 else ""
grp = " GROUP BY g" if groups > 1 else ""
q = {"quantile_cont": f"SELECT {sel}quantile_cont(x, 0.5) FROM t{grp}",
     "list": f"SELECT {sel}dp_median(x, epsilon := 1) FROM t{grp}",
     "summary": f"SELECT {sel}dp_median(x, epsilon := 1) FROM t{grp}"}[route]
if agg == "iqr":
    q = (f"SELECT {sel}quantile_cont(x, 0.75) - quantile_cont(x, 0.25) FROM t{grp}" if route == "quantile_cont"
         else f"SELECT {sel}dp_iqr(x, epsilon := 1) FROM t{grp}")
if agg == "var":
    q = (f"SELECT {sel}var_samp(x) FROM t{grp}" if route == "quantile_cont"
         else f"SELECT {sel}dp_var(x, epsilon := 1) FROM t{grp}")
if agg in ("mean", "sum"):
    q = (f"SELECT {sel}{'avg' if agg == 'mean' else 'sum'}(x) FROM t{grp}" if route == "quantile_cont"
         else f"SELECT {sel}dp_{agg}(x, epsilon := 1) FROM t{grp}")
# warm-up on a small copy (the same statement kinds): one-time costs of the process (imports such as the pandas
# shim pyarrow loads on its first to_numpy, sqlglot's first parse) are not the query's
con.execute("CREATE TABLE w AS SELECT * FROM t LIMIT 5000")
if route == "summary":
    plans.run(con, q.replace(" FROM t", " FROM w"))
else:
    con.sql(q.replace(" FROM t", " FROM w")).fetchall()
t0 = time.perf_counter()
if route == "summary":
    plans.run(con, q)
else:
    con.sql(q).fetchall()
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"s": dt, "peak_mb": peak / 1024, "base_mb": base / 1024}))
'''


def profile(rows: int, groups: int) -> None:
    """The summary route's passes (one run) and the gap pass's sort key alternatives, on one table."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from dpsql import plans
    from dpsql.noise import system_rng

    con = duckdb.connect()
    x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"
    con.execute(f"CREATE TABLE t AS SELECT (random() * {groups})::BIGINT AS g, {x} AS x FROM range({rows})")
    fetch, log = plans._fetch, []

    def timed(c, sql, params=None):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        out = fetch(c, sql, params)
        log.append((time.perf_counter() - t0, sql))
        return out

    sel, grp = ("g, ", " GROUP BY g") if groups > 1 else ("", "")
    plans._fetch = timed
    t0 = time.perf_counter()
    try:
        plans.run(con, f"SELECT {sel}dp_median(x, epsilon := 1) FROM t{grp}")
    finally:
        plans._fetch = fetch
    total = time.perf_counter() - t0
    print(f"| pass ({rows:.0e} rows, {groups} groups) | s |\n|---|---|")
    for dt, sql in log:
        kind = ("floor coins (+ first histogram)" if "_tag" in sql else "gap histogram" if "_tie" in sql else
                "tail counts" if "count_if" in sql else
                "bucket" if "_pe" in sql else "count")
        print(f"| {kind} | {dt:.2f} |")
    print(f"| Python between passes | {total - sum(d for d, _ in log):.2f} |\n| total | {total:.2f} |")
    rng = system_rng()
    con.create_function("_csprng", lambda v, i: pa.array(rng.words(len(v)).view(np.int64)),
                        [duckdb.sqltype("DOUBLE"), duckdb.sqltype("INTEGER")], duckdb.sqltype("BIGINT"),
                        type="arrow", side_effects=True)
    salt = "0123456789abcdef0123456789abcdef"
    con.register("_w", pa.table({"_key": rng.words(rows)}))
    md5 = f"CAST(md5_number('{salt}' || CAST(rowid AS VARCHAR)) >> 64 AS UBIGINT)"
    keys = {"quantile_cont (reference)": None,
            "CSPRNG word per row, POSITIONAL JOIN (this route)": ("_key AS k1", "t POSITIONAL JOIN _w"),
            "keyed MD5 of rowid, top 64 bits (a PRF; not used)": (f"{md5} AS k1", "t"),
            "two CSPRNG words from a Python UDF (before)": ("_csprng(x, 1) AS k1, _csprng(x, 2) AS k2", "t"),
            "DuckDB hash(rowid, salt) (rejected: not uniform)": ("hash(rowid, 12345::BIGINT) AS k1", "t")}
    print("\n| gap-pass window, sort key | s |\n|---|---|")
    for name, key in keys.items():
        if key is None:
            sql = "SELECT g, quantile_cont(x, 0.5) FROM t GROUP BY g"
        else:
            cols, src = key
            sql = (f"SELECT count(*) FILTER (WHERE _pos % 2 = 0 AND _gap < 1) FROM (SELECT abs(x - lag(x) OVER w) "
                   f"AS _gap, row_number() OVER w AS _pos FROM (SELECT g, x, {cols} FROM {src}) WINDOW w AS "
                   f"(PARTITION BY g ORDER BY {'k1, k2' if 'k2' in cols else 'k1'}))")
        t0 = time.perf_counter()
        con.sql(sql).fetchall()
        print(f"| {name} | {time.perf_counter() - t0:.2f} |", flush=True)


def ladder_ab(rows: int, groups: int, reps: int) -> None:
    """The window's passes three ways, alternating on one table: the fixed ladder 36, 24, 12, 0 (before
    f492a30), the per-group ladder with the first bucket pass a pass of its own (f492a30), and with it counted
    in the gap pass's scan (DuckSource.FUSE_FIRST)."""
    import duckdb
    import numpy as np

    from dpsql import plans
    from dpsql.core import summary

    con = duckdb.connect()
    x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"
    con.execute(f"CREATE TABLE t AS SELECT (random() * {groups})::BIGINT AS g, {x} AS x FROM range({rows})")
    sel, grp = ("g, ", " GROUP BY g") if groups > 1 else ("", "")
    fetch, per_group = plans._fetch, summary.ladder

    def fixed(n_hat, epsilon):  # noqa: ANN001, ANN202
        return np.tile(np.array([36, 24, 12, 0], dtype=np.int64), (np.asarray(n_hat).size, 1))

    variants = (("fixed 36, 24, 12, 0", fixed, False), ("per group, first pass of its own", per_group, False),
                ("per group, first counted in the gap pass", per_group, True))
    print(f"| plan ({rows:.0e} rows, {groups} groups) | total s | gap + bucket passes s | large class: gap / "
          "bucket passes s |\n|---|---|---|---|")
    try:
        for _ in range(reps):
            for name, lad, fuse in variants:
                log = []

                def timed(c, sql, params=None, log=log):  # noqa: ANN001, ANN202
                    t0 = time.perf_counter()
                    out = fetch(c, sql, params)
                    log.append((time.perf_counter() - t0, sql))
                    return out

                plans._fetch, summary.ladder, plans.DuckSource.FUSE_FIRST = timed, lad, fuse
                t0 = time.perf_counter()
                plans.run(con, f"SELECT {sel}dp_median(x, epsilon := 1) FROM t{grp}")
                total = time.perf_counter() - t0
                plans._fetch, summary.ladder, plans.DuckSource.FUSE_FIRST = fetch, per_group, True
                kinds = [("gap" if "_tie" in sql else "bucket" if "_pe" in sql else "other", d) for d, sql in log]
                last_gap = max(i for i, (kd, _) in enumerate(kinds) if kd == "gap")
                big = [d for kd, d in kinds[last_gap:] if kd in ("gap", "bucket")]
                both = sum(d for kd, d in kinds if kd in ("gap", "bucket"))
                print(f"| {name} | {total:.2f} | {both:.2f} | {' / '.join(f'{d:.2f}' for d in big)} |", flush=True)
    finally:
        plans._fetch, summary.ladder, plans.DuckSource.FUSE_FIRST = fetch, per_group, True


def floor_ab(rows: str, groups: int, reps: int) -> None:
    """The floor on every row (scalefree.FLOOR_SAMPLE off) vs on a Poisson subsample (on), alternating fresh
    processes on the same kind of table, list and summary routes: every round's time and query peak."""
    cells: dict[tuple[str, bool], list[dict]] = {}
    for _ in range(reps):
        for route in ("list", "summary"):
            for on in (False, True):
                child = f"from dpsql.core import scalefree\nscalefree.FLOOR_SAMPLE = {on}\n" + CHILD
                out = subprocess.run([sys.executable, "-c", child, rows, str(groups), route], capture_output=True,
                                     text=True, check=True).stdout
                cells.setdefault((route, on), []).append(json.loads(out.strip().splitlines()[-1]))
    print(f"| {float(rows):.0e} rows, {groups} groups ({reps} rounds) | floor | s | query peak MB |\n|---|---|---|---|")
    for (route, on), runs in cells.items():
        s = sorted(r["s"] for r in runs)
        mb = sorted(r["peak_mb"] - r["base_mb"] for r in runs)
        floor = "subsampled" if on else "every row"
        print(f"| {route} | {floor} | {s[0]:.2f}-{s[-1]:.2f} | {mb[0]:.0f}-{mb[-1]:.0f} |", flush=True)


def small_ab(rows: str, groups: list[int], reps: int) -> None:
    """The summary route with every group through the passes (SMALL_ROWS 0) vs every group read as rows (inf),
    alternating fresh processes per group count (``--reps`` rounds): where the hybrid's threshold belongs."""
    print(f"| {float(rows):.0e} rows: groups | rows per group | passes s | rows s | passes MB | rows MB |\n"
          "|---|---|---|---|---|---|")
    for g in groups:
        cells: dict[str, list] = {}
        for _ in range(reps):
            for small in ("0", "inf"):
                out = subprocess.run([sys.executable, "-c", CHILD, rows, str(g), "summary", small],
                                     capture_output=True, text=True, check=True).stdout
                cells.setdefault(small, []).append(json.loads(out.strip().splitlines()[-1]))
        s = {k: sorted(r["s"] for r in v) for k, v in cells.items()}
        mb = {k: max(r["peak_mb"] - r["base_mb"] for r in v) for k, v in cells.items()}
        print(f"| {g} | {float(rows) / g:.0f} | {s['0'][0]:.2f}-{s['0'][-1]:.2f} | {s['inf'][0]:.2f}-{s['inf'][-1]:.2f}"
              f" | {mb['0']:.0f} | {mb['inf']:.0f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", nargs="+", default=["1e6", "1e7"])
    ap.add_argument("--groups", nargs="+", type=int, default=[1, 10000])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--profile", nargs=2, metavar=("ROWS", "GROUPS"))
    ap.add_argument("--ladder-ab", nargs=2, metavar=("ROWS", "GROUPS"))
    ap.add_argument("--floor-ab", nargs=2, metavar=("ROWS", "GROUPS"))
    ap.add_argument("--small-ab", nargs="+", metavar="ROWS GROUPS")
    ap.add_argument("--aggregate", choices=("median", "iqr", "var", "mean", "sum"), default="median")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "plans.md"))
    a = ap.parse_args()
    if a.ladder_ab:
        ladder_ab(int(float(a.ladder_ab[0])), int(a.ladder_ab[1]), max(a.reps, 1))
        return
    if a.floor_ab:
        floor_ab(a.floor_ab[0], int(a.floor_ab[1]), max(a.reps, 1))
        return
    if a.small_ab:
        small_ab(a.small_ab[0], [int(g) for g in a.small_ab[1:]], max(a.reps, 1))
        return
    if a.profile:
        profile(int(float(a.profile[0])), int(a.profile[1]))
        return
    lines = [f"# dp_{a.aggregate}: summary plans vs the list route vs quantile_cont", "",
             f"`benchmarks/plans.py` (fastest of {a.reps} run(s) per cell, fresh process each; 2 shared cores). x ~ "
             "lognormal(0, 1) in a DuckDB table; epsilon 1. s = wall time of the query; x = s / quantile_cont's s; "
             "peak = the process's peak RSS (MB) minus its RSS after loading the table (the query's own peak, "
             "roughly).", "",
             "| rows | groups | route | s | x quantile_cont | query peak MB |", "|---|---|---|---|---|---|"]
    for rows in a.rows:
        for g in a.groups:
            ref = None
            for route in ("quantile_cont", "list", "summary"):
                runs = []
                for _ in range(a.reps):
                    out = subprocess.run([sys.executable, "-c", CHILD, rows, str(g), route, "default", a.aggregate],
                                         capture_output=True, text=True, check=True).stdout
                    runs.append(json.loads(out.strip().splitlines()[-1]))
                m = min(runs, key=lambda r: r["s"])
                ref = m["s"] if ref is None else ref
                row = (f"| {float(rows):.0e} | {g} | {route} | {m['s']:.2f} | {m['s'] / ref:.1f} | "
                       f"{m['peak_mb'] - m['base_mb']:.0f} |")
                print(row, flush=True)
                lines.append(row)
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
