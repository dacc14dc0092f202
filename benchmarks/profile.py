"""Where the time goes in dp_median and dp_mean over SQL (issue 6, point 1).

    .venv/bin/python benchmarks/profile.py              # 10M lognormal rows, 1 and 10,000 groups
    .venv/bin/python benchmarks/profile.py --rows 1e6   # faster

For each aggregate and grouping it measures, in one process:

1. the whole SQL query ``SELECT [g,] dp_median(x, epsilon := 1) FROM t [GROUP BY g]``, with the binding
   instrumented (``dpsql.duck._batch_from_lists`` and the method's ``run`` wrapped in timers): how many UDF
   calls DuckDB made, the time spent converting Arrow lists to a ``Batch``, the time in the core, and the
   remainder (DuckDB's scan + ``list(x)`` building + Arrow hand-over to Python + the macro);
2. DuckDB alone: ``list(x)`` built and only measured (``len(list(x))``), then built and fetched as Arrow;
   the native exact aggregate (``quantile_cont`` / ``avg``) for scale;
3. the core alone on the same batch under cProfile: inclusive time of each named step (sort, pairing,
   IQR bound, range/radius SVTs, exponential mechanism, sums, noise) and the top functions by self time;
4. floors: what any design pays at least (native aggregates, one native pass bucketing rows by exponent,
   the list hand-over, the random matching and the sort in numpy), as ratios to avg and quantile_cont.

Writes ``benchmarks/results/profile.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time

# this file is named like the stdlib's ``profile``, which cProfile imports: import them without our folder
_HERE = os.path.dirname(os.path.abspath(__file__))
_saved = list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.modules.pop("profile", None)
import cProfile  # noqa: E402
import pstats  # noqa: E402

sys.path[:] = _saved
sys.path.insert(0, _HERE)

from common import RESULTS, machine, md_table  # noqa: E402
from speed import connect, loadavg, make_lognormal, query  # noqa: E402

CASES = [("dp_median", "quantile", "dp_median(x, epsilon := 1.0)", "quantile_cont(x, 0.5)"),
         ("dp_mean", "mean", "dp_mean(x, epsilon := 1.0)", "avg(x)")]

#: named steps whose inclusive (cumulative) time is reported; matched on the function name in cProfile
STEPS = ["sorted", "random_pairs", "shuffle_segments", "_key_sort_order", "_gap_exponent_counts", "iqr_lower_bound",
         "mean_range", "infinite_range",
         "radius", "_subsample", "private_quantile_in", "private_domain", "threshold_codes", "rank_em", "_pieces",
         "seg_search", "take", "quantile_em", "svt_scan", "seg_count_le", "seg_count_lt", "release_sum",
         "noisy_count", "clean", "lexsort", "sort", "argsort", "searchsorted", "words", "exponential",
         "discrete_laplace", "gumbel", "exponential_mechanism", "segment_argmax", "bernoulli"]


class Meter:
    """Thread-safe accumulating timers for the instrumented binding."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.t: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.spans: list[tuple[float, float]] = []

    def wrap(self, name: str, fn):  # noqa: ANN001, ANN202
        def inner(*a, **k):  # noqa: ANN002, ANN003, ANN202
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                with self.lock:
                    self.t[name] = self.t.get(name, 0.0) + dt
                    self.calls[name] = self.calls.get(name, 0) + 1
                    self.spans.append((t0, t0 + dt))

        return inner

    def reset(self) -> None:
        self.t.clear()
        self.calls.clear()
        self.spans.clear()

    def busy(self) -> float:
        """Wall time during which at least one instrumented call was running (DuckDB calls the UDF from
        several threads at once, so summed times can exceed the query's wall time)."""
        total, end = 0.0, -1e300
        for a, b in sorted(self.spans):
            if b > end:
                total += b - max(a, end)
                end = b
        return total


def instrument(meter: Meter) -> None:
    import dpsql.duck as duck

    orig_batch, orig_get = duck._batch_from_lists, duck.get_method

    def get_method(agg, name):  # noqa: ANN001, ANN202
        m = orig_get(agg, name)
        return dataclasses.replace(m, run=meter.wrap("core", m.run))

    duck._batch_from_lists = meter.wrap("arrow -> Batch", orig_batch)
    duck.get_method = get_method


def tm(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def profile_core(con, agg: str, by: str | None) -> tuple[list[list[str]], list[list[str]], float]:  # noqa: ANN001
    import dpsql.duck as duck
    from dpsql.core import Params, get_method
    from dpsql.core.registry import budget_of

    lst = con.sql(query("list(x) AS l", "t", by)).to_arrow_table().column("l")
    batch = duck._batch_from_lists(lst)
    m = get_method(agg, None)
    params = Params(epsilon=1.0, p=0.5 if agg == "quantile" else None)
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    m.run(batch, budget_of(m, params), params, __import__("dpsql.noise", fromlist=["system_rng"]).system_rng())
    pr.disable()
    total = time.perf_counter() - t0
    st = pstats.Stats(pr)
    by_name: dict[str, list[float]] = {}
    for (_file, _line, name), (_cc, nc, tt, ct, _callers) in st.stats.items():
        key = name.strip("<>").replace("method '", "").replace("built-in method ", "").replace("'", "")
        key = key.split(" of ")[0].split(".")[-1]
        if key in STEPS:
            v = by_name.setdefault(key, [0, 0.0, 0.0])
            v[0] += nc
            v[1] += ct
            v[2] += tt
    steps = [[k, str(int(v[0])), f"{v[1]:.3f}", f"{100 * v[1] / total:.0f}%", f"{v[2]:.3f}"]
             for k, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])]
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]
    top = [[f"{os.path.basename(f)}:{ln} {name}"[:70], str(nc), f"{tt:.3f}", f"{ct:.3f}"]
           for (f, ln, name), (_cc, nc, tt, ct, _c) in rows]
    return steps, top, total


def floors(con, by: str | None) -> list[list[str]]:  # noqa: ANN001
    """What any design must at least pay, measured on the same table: the native aggregates, one native
    pass that buckets rows by their binary exponent (the cheapest data-dependent scale step a bound-free
    estimator computed natively would need), the list route's hand-over, and the core's two unavoidable
    numpy steps for seed 003's estimators (the random matching, the sort)."""
    import dpsql.duck as duck
    from dpsql.noise import system_rng

    def best(fn) -> float:  # noqa: ANN001
        return min(tm(fn) for _ in range(3))

    keys = "" if by is None else f"{by}, "
    t_avg = best(lambda: con.sql(query("avg(x)", "t", by)).fetchall())
    t_q = best(lambda: con.sql(query("quantile_cont(x, 0.5)", "t", by)).fetchall())
    scale = (f"SELECT {keys}floor(log2(abs(x))) AS e, count(*), sum(x) FROM t "
             f"GROUP BY {keys}e")
    t_scale = best(lambda: con.sql(scale).fetchall())
    t_list = best(lambda: con.sql(query("len(list(x))", "t", by)).fetchall())
    lst = con.sql(query("list(x) AS l", "t", by)).to_arrow_table().column("l")
    t_fetch = best(lambda: con.sql(query("list(x) AS l", "t", by)).to_arrow_table())
    batch = duck._batch_from_lists(lst)
    rng = system_rng()
    t_match = best(lambda: rng.shuffle_segments(batch.values, batch.offsets))
    t_sort = best(lambda: dataclasses.replace(batch, _sorted=None, _composite=None, _pending=None).sorted())
    rows = [["avg(x)", t_avg], ["quantile_cont(x, 0.5)", t_q],
            ["one native scale pass: GROUP BY floor(log2(abs(x))), count, sum", t_scale],
            ["list(x) built (len(list(x)))", t_list], ["list(x) built and fetched as Arrow", t_fetch],
            ["core: uniform random matching of all rows (shuffle_segments)", t_match],
            ["core: per-group sort", t_sort]]
    return [[name, f"{t:.3f}", f"{t / t_avg:.1f}", f"{t / t_q:.2f}"] for name, t in rows]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", type=str, default=os.path.join(RESULTS, "profile.md"))
    args = ap.parse_args(argv)
    load0 = loadavg()
    meter = Meter()
    instrument(meter)
    con = connect(args.threads)
    rows = int(args.rows)
    make_lognormal(con, rows, args.groups)
    lines = ["# Where the time goes: dp_median and dp_mean over SQL", "",
             f"`benchmarks/profile.py --rows {rows:.0e}` on {machine()}; DuckDB threads: {args.threads or 'default'}; "
             f"load average {load0} at start (other processes inflate all times).", ""]
    for label, agg, dp_expr, nat_expr in CASES:
        for by in (None, "g"):
            glabel = "1 group" if by is None else f"{args.groups:,} groups"
            print(f"{label} {glabel}", flush=True)
            t_native = tm(lambda: con.sql(query(nat_expr, "t", by)).fetchall())  # noqa: B023
            t_list = tm(lambda: con.sql(query("len(list(x))", "t", by)).fetchall())  # noqa: B023
            t_list_fetch = tm(lambda: con.sql(query("list(x) AS l", "t", by)).to_arrow_table())  # noqa: B023
            meter.reset()
            t_sql = tm(lambda: con.sql(query(dp_expr, "t", by)).fetchall())  # noqa: B023
            t_conv, t_core = meter.t.get("arrow -> Batch", 0.0), meter.t.get("core", 0.0)
            calls = meter.calls.get("core", 0)
            steps, top, t_core_alone = profile_core(con, agg, by)
            busy = meter.busy()
            rest = t_sql - busy
            lines += [f"## {label}, {rows:,} rows, {glabel}", "",
                      md_table(["part", "seconds", "share of the dp query"], [
                          ["whole SQL query", f"{t_sql:.3f}", "100%"],
                          [f"core, summed over {calls} UDF call{'s' if calls != 1 else ''} (threads overlap)",
                           f"{t_core:.3f}", f"{100 * t_core / t_sql:.0f}%"],
                          ["Arrow list -> Batch (flatten, cast, offsets, clean), summed", f"{t_conv:.3f}",
                           f"{100 * t_conv / t_sql:.0f}%"],
                          ["wall time with a UDF call running (conversion + core)", f"{busy:.3f}",
                           f"{100 * busy / t_sql:.0f}%"],
                          ["rest: DuckDB scan + list(x) + hand-over to Python + macro", f"{rest:.3f}",
                           f"{100 * rest / t_sql:.0f}%"],
                          ["for scale: DuckDB builds list(x) only (len(list(x)))", f"{t_list:.3f}", ""],
                          ["for scale: list(x) built and fetched as Arrow", f"{t_list_fetch:.3f}", ""],
                          [f"for scale: native {nat_expr}", f"{t_native:.3f}",
                           f"dp / native = {t_sql / t_native:.1f}x"],
                      ]), "",
                      f"Core alone on the same batch under cProfile: {t_core_alone:.3f} s (profiling adds overhead). "
                      "Inclusive time of named steps (they nest: shares add to more than 100%):", "",
                      md_table(["step", "calls", "inclusive s", "share of core", "self s"], steps), "",
                      "Top functions by self time:", "",
                      md_table(["function", "calls", "self s", "inclusive s"], top), ""]
            print("\n".join(lines[-30:]), flush=True)
    for by in (None, "g"):
        glabel = "1 group" if by is None else f"{args.groups:,} groups"
        print(f"floors {glabel}", flush=True)
        lines += [f"## Floors, {rows:,} rows, {glabel}", "",
                  "What a design cannot avoid (best of 3; ratios against the native aggregates of the same run). A "
                  "bound-free estimator has to find the data's scale, which takes at least one data-dependent "
                  "pass; the list route adds the hand-over, and seed 003's estimators the random matching.", "",
                  md_table(["step", "seconds", "/ avg", "/ quantile_cont"], floors(con, by)), ""]
    lines.insert(4, f"Load average at end: {loadavg()}.\n")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
