"""Issue 17's floors: what each default aggregate's summary plan spends, pass by pass, and the measured floor of a
pass, next to DuckDB's native aggregate on the same table in the same run.

    .venv/bin/python benchmarks/floors.py                       # 1e7 rows, 1 and 10,000 groups, best of 3
    .venv/bin/python benchmarks/floors.py --rows 1e6 --reps 1   # a quick look

x ~ lognormal(0, 1) in an in-memory DuckDB table (as ``benchmarks/plans.py``), epsilon = 1.  Per aggregate the plan
runs through ``dpsql.sql`` (``plans.run``) with every statement timed (``plans._fetch``); the fastest of ``--reps``
runs is kept.  The floor probes, each the fastest of ``--reps``:

* **scan**: ``avg(x)`` with the same grouping: every value read once into one aggregate; no pass of a plan reads the
  column for less (every statement of the plans scans the table and computes on each value; a FILTER aggregate or
  ``count(x)`` is no floor: the first measured 5x avg's time, the second reads only the validity mask);
* **histogram**: ``floor(log2(abs(x)))`` counted per group and bucket (the issue's own probe for a narrow pass);
* **rows**: the column sorted by group into Arrow (what the hybrid route reads for small groups);
* **sort** (many groups): the fetched values sorted within their groups in numpy (``np.lexsort``), or DuckDB's
  ``ORDER BY g, x`` into Arrow if faster (then "rows + sort" is that one statement): every mechanism of the list code
  reads order statistics, so the rows route sorts each group once at least;
* **var bounds** (many groups): the arithmetic :func:`dpsql.core.asymmetric.var_bounds_of` cannot skip, timed on
  arrays of its size: per group and removal depth k <= cw (``cw = min(C, (n + 1) // 2 - 1)``, ``C =
  summary_var.truncation_of(eps)``, ~105 at eps = 1) k + 1 windows, each two sums, a square, a division, a
  difference and a minimum in 80-bit long double (the exact bounds its privacy argument uses): six elementwise
  operations over ``G (cw + 1)(cw + 2) / 2`` values.

``floor = statements x scan`` (the statements of the passes route: with many groups, of the run with every group
through the passes) bounds from below any plan that issues the same dependent statements (each one's parameters are
released by the mechanism's draw on the previous one's summary, so they cannot run as one); with many groups the rows
route's floor is ``scan + rows + sort`` (its count pass, reading the rows, sorting each group), plus the var bounds'
arithmetic for dp_var (which the passes route pays too: its summaries feed the same ``var_bounds_of``).
Writes ``benchmarks/results/floors.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import time

from common import RESULTS

NATIVE = {"median": "quantile_cont(x, 0.5)", "iqr": "quantile_cont(x, 0.75) - quantile_cont(x, 0.25)",
          "mean": "avg(x)", "sum": "sum(x)", "var": "var_samp(x)"}
DP = {"median": "dp_median", "iqr": "dp_iqr", "mean": "dp_mean", "sum": "dp_sum", "var": "dp_var"}
#: issue 17's targets (ratio to native): 1 group, 10^4 groups
TARGET = {"median": (1.0, 1.5), "iqr": (1.0, 1.5), "mean": (8.0, 6.0), "sum": (8.0, 6.0), "var": (8.0, 6.0)}
#: statement kinds, by a marker of the SQL the plans write (first match)
KINDS = (("_tag", "floor coins + first bucket"), ("_tie", "gap histogram"), ("_ka", "radius histogram"),
         ("_gm", "clipped sum"), ("_dc", "cap over |x - c|"), ("count_if", "tail counts"), ("_pe", "bucket"),
         ("fsum", "variance core sums"), ("ORDER BY", "rows"), ("count(*)", "count"))


def kind(sql: str) -> str:
    return next((name for mark, name in KINDS if mark in sql), "other")


def best(con, sql: str, reps: int, arrow: bool = False) -> float:  # noqa: ANN001
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = con.sql(sql)
        r.to_arrow_table() if arrow else r.fetchall()
        out.append(time.perf_counter() - t0)
    return min(out)


def sort_probe(con, reps: int) -> float:  # noqa: ANN001
    """The rows fetched by group (untimed), then sorted within their groups in numpy: the faster of one
    ``np.lexsort`` and ``np.sort`` segment by segment, fastest of ``reps``."""
    import numpy as np

    t = con.sql("SELECT g, x FROM t ORDER BY g").to_arrow_table()
    g, x = t.column("g").to_numpy(), t.column("x").to_numpy()
    cuts = np.flatnonzero(np.diff(g)) + 1
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.lexsort((x, g))
        t1 = time.perf_counter()
        for seg in np.split(x, cuts):
            seg.sort()
        out.append(min(t1 - t0, time.perf_counter() - t1))
    return min(out)


def var_bounds_probe(n: int, groups: int, reps: int) -> float:
    """The floor of ``var_bounds_of``'s O(C^2) step at ``groups`` groups of ``n`` rows, eps = 1 (module docstring):
    six long-double operations over the windows' values, depth by depth in blocks of 512 groups that stay in cache
    (as ``var_bounds_of`` runs them), fastest of ``reps``."""
    import numpy as np

    from dpsql.core.summary_var import truncation_of

    cw = min(truncation_of(1.0), (n + 1) // 2 - 1)
    B = 512
    a = np.random.default_rng(0).random((cw + 1, B)).astype(np.longdouble) + 1.0
    b, o, o2 = a[::-1].copy(), np.empty_like(a), np.empty_like(a)
    m = np.longdouble(n)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(-(-groups // B)):
            for k in range(cw + 1):  # depth k: k + 1 windows per group
                x, y, z, w = a[: k + 1], b[: k + 1], o[: k + 1], o2[: k + 1]
                np.add(x, y, out=z)
                np.add(y, x, out=w)
                np.multiply(z, z, out=z)
                np.divide(z, m, out=z)
                np.subtract(w, z, out=w)
                w.min(axis=0)
        out.append(time.perf_counter() - t0)
    return min(out)


def timed_plan(con, query: str, reps: int) -> tuple[float, list[tuple[float, str]]]:  # noqa: ANN001
    """The fastest of ``reps`` runs of ``plans.run(con, query)``: (seconds, [(seconds, sql) per statement])."""
    from dpsql import plans

    fetch, runs = plans._fetch, []
    for _ in range(reps):
        log: list[tuple[float, str]] = []

        def timed(c, sql, params=None, log=log):  # noqa: ANN001, ANN202
            t0 = time.perf_counter()
            out = fetch(c, sql, params)
            log.append((time.perf_counter() - t0, sql))
            return out

        plans._fetch = timed
        t0 = time.perf_counter()
        try:
            plans.run(con, query)
        finally:
            plans._fetch = fetch
        runs.append((time.perf_counter() - t0, log))
    return min(runs, key=lambda r: r[0])


def run(rows: int, groups: int, reps: int, aggs: list[str]) -> list[str]:
    import duckdb

    import dpsql
    from dpsql import plans

    con = dpsql.install(duckdb.connect())
    x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"
    con.execute(f"CREATE TABLE t AS SELECT (random() * {groups})::BIGINT AS g, {x} AS x FROM range({rows})")
    sel, grp = ("g, ", " GROUP BY g") if groups > 1 else ("", "")
    scan = best(con, f"SELECT {sel}avg(x) FROM t{grp}", reps)
    hist = best(con, f"SELECT {sel}CAST(floor(log2(abs(x))) AS BIGINT) AS b, count(*) FROM t GROUP BY ALL", reps)
    rows_s = best(con, "SELECT g, x FROM t ORDER BY g", reps, arrow=True)
    sort_s = vb_s = 0.0
    probes = f"scan {scan:.3f} s, histogram {hist:.3f} s, rows {rows_s:.3f} s"
    if groups > 1:
        sort_s = min(sort_probe(con, reps), best(con, "SELECT g, x FROM t ORDER BY g, x", reps, arrow=True) - rows_s)
        vb_s = var_bounds_probe(rows // groups, groups, reps)
        probes += f", sort {sort_s:.3f} s, var bounds {vb_s:.3f} s"
    lines = [f"| {groups} | probes | {probes} | | | | | | | |"]
    for agg in aggs:
        native = best(con, f"SELECT {sel}{NATIVE[agg]} FROM t{grp}", reps)
        query = f"SELECT {sel}{DP[agg]}(x, epsilon := 1) FROM t{grp}"
        total, log = timed_plan(con, query, reps)
        passes, n_passes = "", len(log)
        if groups > 1:  # the same query with every group through the passes (no rows route)
            small, plans.SMALL_ROWS = plans.SMALL_ROWS, 0.0
            try:
                p_total, p_log = timed_plan(con, query, reps)
            finally:
                plans.SMALL_ROWS = small
            passes = f" passes only: {p_total:.2f} s, {len(p_log)} statements;"
            n_passes = len(p_log)
        sql_s = sum(d for d, _ in log)
        by_kind: dict[str, float] = {}
        for d, sql in log:
            by_kind[kind(sql)] = by_kind.get(kind(sql), 0.0) + d
        top = sorted(by_kind.items(), key=lambda kv: -kv[1])[:3]
        floor = n_passes * scan  # the passes route's statements (every group through the passes)
        target = TARGET[agg][0 if groups == 1 else 1]
        extra = vb_s if agg == "var" else 0.0
        floor += extra
        rf = scan + rows_s + sort_s + extra
        rows_floor = "" if groups == 1 else f"{rf:.3f} ({rf / native:.1f}x)"
        lines.append(f"| {groups} | {DP[agg]} | {native:.3f} | {total:.2f} ({total / native:.1f}x) | {len(log)} | "
                     f"{sql_s:.2f} / {total - sql_s:.2f} | {', '.join(f'{k} {v:.2f}' for k, v in top)};{passes} | "
                     f"{floor:.3f} ({floor / native:.1f}x) | {rows_floor} | <= {target:g}x |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 10000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--aggregates", nargs="+", default=list(DP))
    ap.add_argument("--out", default=os.path.join(RESULTS, "floors.md"))
    a = ap.parse_args()
    head = ["| groups | aggregate | native s | plans s (x native) | statements | SQL s / Python s | "
            "most time (kind s) | floor: statements x scan s (x native) | "
            "rows route floor: scan + rows + sort s (x native) | target |", "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(head), flush=True)
    body = []
    for g in a.groups:
        body += run(int(a.rows), g, a.reps, a.aggregates)
    import platform

    text = (f"# Summary plans: time per pass and the floor of a pass (issue 17)\n\nGenerated by `benchmarks/floors.py"
            f" --rows {a.rows:.0e} --reps {a.reps}` on {os.cpu_count()} cores, {platform.processor() or 'cpu'}; "
            "x ~ lognormal(0, 1), epsilon = 1, in-memory table; fastest of the reps.\n\n"
            + "\n".join(head + body) + "\n")
    with open(a.out, "w") as f:
        f.write(text)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
