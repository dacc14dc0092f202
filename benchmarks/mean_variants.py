"""Issue 12: variants of the bound-free dp_mean tried against today's default, on the panel's data (not defaults).

    .venv/bin/python benchmarks/mean_variants.py            # every variant, R = 100 runs per cell, ~5 min
    .venv/bin/python benchmarks/mean_variants.py --runs 200 --variants default winsor

Each variant monkeypatches ``dpsql.core.scalefree`` in this process only (a prototype, not a method): the list
route's ``run_mean`` runs on R replicated groups of one panel sample (``benchmarks/common.py``) under a seeded
generator.  The metric is the panel's (median over runs of the error over the IQR), divided by the best
exact-bounded peer and by the line (subset benchmark S) read from ``results/panel.csv``.  Cells: n in 1e2, 1e3,
1e4 (and 1e5 for the real columns), eps in 0.1 and 1, n eps >= 100; then the small-count class alone
(100 <= n eps < 200) for the variants that change it.  Writes ``results/mean_variants.md``.
"""

from __future__ import annotations

import argparse
import csv
import math
import os

import numpy as np
from common import RESULTS, panel, seed_of

from dpsql.core import ranges
from dpsql.core import scalefree as sf
from dpsql.core.accounting import Privacy
from dpsql.core.batch import Batch
from dpsql.core.helpers import B_MIN
from dpsql.core.primitives import per_row, pow2_floor, release_sum
from dpsql.core.registry import Params
from dpsql.noise import Rng


def _two_sided(s, e, eps_centre, eps_radius, rng, params):  # noqa: ANN001, ANN202
    """_range with one radius scan per side of c (a row is on one side: parallel composition), [c - r_lo, c + r_hi]."""
    c = sf.centre(s, e, eps_centre, rng)
    b = np.ldexp(1.0, e)
    s0 = np.maximum(np.maximum(np.minimum(b * 2.0**-8, pow2_floor(np.abs(c)) * 2.0**-20), b * 2.0**-40), B_MIN)
    eps_scan = sf.SCAN * eps_radius
    cv = per_row(c, s.offsets)
    gid = np.repeat(np.arange(s.groups), np.diff(s.offsets))
    parts = []
    for keep in (s.values < cv, s.values >= cv):
        counts = np.bincount(gid[keep], minlength=s.groups)
        parts.append((s.values[keep], np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)))
    (v0, o0), (v1, o1) = parts
    both = Batch(np.concatenate([v0, v1]), np.concatenate([o0, o0[-1] + o1[1:]]))
    rr = sf.radius(both, np.concatenate([c, c]), np.concatenate([s0, s0]), eps_scan, rng, 0.5,
                   outside=sf.OUTSIDE / eps_scan, monotone=True, fine=sf.FINE)
    r_lo, r_hi = rr[:s.groups], rr[s.groups:]
    d = Batch(np.abs(s.values - cv), s.offsets).sorted()
    with np.errstate(divide="ignore"):
        ec = np.maximum(e, np.frexp(np.abs(c))[1].astype(np.int64) - sf.CAP_BELOW)
    cap = sf._quantile(d, np.clip(ec, sf.E_MIN, sf.E_TOP - 1), 1.0, (1.0 - sf.SCAN) * eps_radius, rng,
                       np.zeros(s.groups), sf.NEAR)
    capped = np.clip(sf.CAP_SLACK * cap, 0.0, 2.0**1002)
    cut_lo, cut_hi = (cap <= 0.0) | (r_lo > sf.CAP_TRUST * cap), (cap <= 0.0) | (r_hi > sf.CAP_TRUST * cap)
    r_lo, r_hi = np.where(cut_lo, np.minimum(r_lo, capped), r_lo), np.where(cut_hi, np.minimum(r_hi, capped), r_hi)
    l, h = sf._intersect(c - r_lo, c + r_hi, params)
    return l, h, cut_lo | cut_hi, cap, c


WINSOR = {"centre": 0.45, "scale": 0.2, "sum": 0.2, "p": 0.5, "kappa": 6.0, "z": 1.0}


def _few_winsor(sub, n, e, sp, eps, rng, params, kind, _few0=sf._few):  # noqa: ANN001, ANN202
    """The small-count class as a winsorised mean: c (median), scale = EM median of |x - c|, the centred clipped sum
    on c +- kappa scale; released when it differs from c by more than z noise sd, else c (post-processing)."""
    if kind != "mean":
        return _few0(sub, n, e, sp, eps, rng, params, kind)
    w = WINSOR
    c = sf.centre(sub, e, w["centre"] * eps, rng)
    d = Batch(np.abs(sub.values - per_row(c, sub.offsets)), sub.offsets).sorted()
    with np.errstate(divide="ignore"):
        ec = np.maximum(e, np.frexp(np.abs(c))[1].astype(np.int64) - sf.CAP_BELOW)
    q = sf._quantile(d, np.clip(ec, sf.E_MIN, sf.E_TOP - 1), w["p"], w["scale"] * eps, rng, np.zeros(sub.groups),
                     sf.NEAR)
    r = np.clip(w["kappa"] * q, 0.0, 2.0**1002)
    l, h = c - r, c + r
    cc, half = l / 2 + h / 2, h / 2 - l / 2
    x = np.clip(sub.values, per_row(l, sub.offsets), per_row(h, sub.offsets)) - per_row(cc, sub.offsets)
    tot = release_sum(x, sub.offsets, half, w["sum"] * eps, rng)
    wm = np.clip(cc + tot / np.maximum(n, 1.0), l, h)
    sd = np.sqrt(2.0) * half / (w["sum"] * eps * np.maximum(n, 1.0))
    return np.where(np.abs(wm - c) > w["z"] * sd, wm, c)


def _quarter_steps(b, k, fine):  # noqa: ANN001, ANN202
    k = np.asarray(k, dtype=np.int64)
    return np.ldexp(b, k // 4) * np.exp2((k % 4) / 4)


#: name -> (what it changes, setup(): patches applied, returns an undo)
VARIANTS = {
    "default": ("today's default", {}),
    "two_sided": ("one radius scan per side of c, range [c - r_lo, c + r_hi]", {"_range": _two_sided}),
    "outside1": ("OUTSIDE 1 instead of 2", {"OUTSIDE": 1.0}),
    "sum060": ("high class: count 0.03, floor 0.04, centre 0.08, radius 0.25, sum 0.60",
               {"SPLIT_MEAN": {"count": 0.03, "bound": 0.04, "centre": 0.08, "radius": 0.25, "sum": 0.60}}),
    "cap15": ("the cap cuts the scan at 1.5x the cap (not 64x)", {"CAP_TRUST": 1.5, "CAP_SLACK": 1.5}),
    "mid100": ("the range route with its fallback from n eps = 100 (MID_FROM 100)", {"MID_FROM": 100.0}),
    "winsor": ("the small-count class as a winsorised mean (WINSOR)", {"_few": _few_winsor}),
    "quarter": ("radius ladder in steps of 2**(1/4)", {"ranges._step": _quarter_steps}),
}


def _patch(changes: dict) -> list:
    undo = []
    for name, value in changes.items():
        mod, attr = (ranges, name.split(".")[1]) if name.startswith("ranges.") else (sf, name)
        undo.append((mod, attr, getattr(mod, attr)))
        setattr(mod, attr, value)
    return undo


def _references() -> tuple[dict, dict]:
    best, line = {}, {}
    with open(os.path.join(RESULTS, "panel.csv")) as f:
        for row in csv.DictReader(f):
            if row["aggregate"] != "mean" or row["mode"] != "oracle":
                continue
            try:
                v = float(row["median_err"])
            except ValueError:
                continue
            key = (row["dataset"], int(row["n"]), float(row["eps"]))
            if row["system"] == "line":
                line[key] = v
            elif not math.isnan(v):
                best[key] = min(best.get(key, math.inf), v)
    return best, line


def run(name: str, runs: int, few: bool, best: dict, line: dict) -> dict:
    undo = _patch(VARIANTS[name][1])
    try:
        cells = []
        for d in panel():
            for n in d.sizes([100, 1000, 10000] + ([100000] if d.family != "synthetic" else [])):
                for eps in (0.1, 1.0):
                    ne = n * eps
                    if ne < 100 or (few and ne >= 200):
                        continue
                    x = d.sample(n)
                    q1, q3 = np.percentile(x, [25, 75])
                    b = Batch(np.tile(x, runs), np.arange(runs + 1, dtype=np.int64) * n)
                    est = sf.run_mean(b, Privacy("pure", eps), Params(epsilon=eps),
                                      Rng.seeded(seed_of("mean_variants", d.label, n, eps)))
                    err = np.abs(est - x.mean()) / (q3 - q1)
                    key = (d.label, n, eps)
                    cells.append((key, float(np.nanmedian(err)), float(np.mean(~(err <= 1.0)))))
    finally:
        for mod, attr, value in reversed(undo):
            setattr(mod, attr, value)
    rb = np.array([e / best[k] for k, e, _ in cells])
    rl = np.array([e / line[k] for k, e, _ in cells])
    worst = max(range(len(cells)), key=lambda i: rb[i])
    return {"cells": len(cells), "line": float(np.exp(np.mean(np.log(rl)))), "best": float(np.exp(np.mean(np.log(rb)))),
            "worst": f"{rb[worst]:.3g} ({cells[worst][0][0]} n={cells[worst][0][1]} eps={cells[worst][0][2]:g})",
            "tail": float(np.mean([t for _, _, t in cells]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--out", default=os.path.join(RESULTS, "mean_variants.md"))
    a = ap.parse_args()
    best, line = _references()
    head = ["| variant | what | cells | geomean vs line | geomean vs best exact peer | worst vs peer | "
            "runs > 1 IQR off |",
            "|---|---|---|---|---|---|---|"]
    print("\n".join(head), flush=True)
    body = []
    for few in (False, True):
        for name in a.variants:
            if few and name not in ("default", "mid100", "winsor"):
                continue
            r = run(name, a.runs, few, best, line)
            body.append(f"| {name}{' (n eps < 200)' if few else ''} | {VARIANTS[name][0]} | {r['cells']} | "
                        f"{r['line']:.2f} | {r['best']:.2f} | {r['worst']} | {r['tail']:.3f} |")
            print(body[-1], flush=True)
    with open(a.out, "w") as f:
        f.write("# Issue 12: dp_mean variants against today's default (prototypes, not defaults)\n\n"
                f"Generated by `benchmarks/mean_variants.py --runs {a.runs}`; references from `results/panel.csv`.\n\n"
                + "\n".join(head + body) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
