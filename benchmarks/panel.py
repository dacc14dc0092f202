"""Issue 12's accuracy panel: dpsql's bound-free methods against peers with exact and loose bounds, python-dp's
bound-free paths and the statistical lower-bound lines, same data, same run.

    .venv/bin/pip install -r benchmarks/requirements.txt
    .venv/bin/python benchmarks/panel.py            # ~30 min on 2 cores
    .venv/bin/python benchmarks/panel.py --quick    # 4 datasets, n <= 1e4, 20 runs

Aggregates: median, p90 (``dp_quantile(x, 0.9)``), IQR, mean, sum, variance.  dpsql runs every method named in
``METHODS`` (the old defaults and the new ones) with no bounds, and the new default also with the loose
bounds (the "bounds never hurt" check).  Peers, each with **oracle** bounds (the exact [min, max] of the
sample, their best case) and **loose** bounds (10x that range around its midpoint):

* OpenDP 0.16: quantiles with ``make_private_quantile`` over 1,001 candidates, with a **random grid offset
  per run** (the data are shifted by a uniform fraction of a grid step and the answer shifted back, which
  is the same as offsetting the grid; without it, single cells are 2-10x lucky or unlucky by alignment);
  the IQR as two quantiles at eps/2; mean and variance on a sized domain (n public, ``d_in = 2``); sum.
* diffprivlib: ``tools.quantile`` / ``median`` / ``mean`` / ``var`` / ``sum`` with ``bounds=``.
* python-dp: ``BoundedMean`` / ``BoundedVariance`` / ``BoundedSum`` / ``Median`` with bounds, and **without**
  (ApproxBounds, the unbounded median).

Lower-bound lines: for quantiles the continuous exponential mechanism with the exact [min, max] for free
and the full eps (loss sensitivity max(p, 1 - p); the IQR as two at eps/2); for the mean the subset
benchmark S(D, eps) of seed 000 (Lemma 3.2: no eps-DP mean beats it by more than a constant on both
neighbours), for the sum half the larger of |sum of the k largest| and |sum of the k smallest| rows
(k = ceil(1/eps); removing them is k add/remove steps).  diffprivlib's sum calibrates to (upper - lower),
i.e. replace-one neighbours with a public n, and is left out.  Metric (as ``accuracy.py``): median over
runs of |est - exact| / IQR
(quantiles, IQR, mean), / var (variance), / sum|x| (sum).  The summary reports, per aggregate and method,
over the cells with n eps >= 100: the geometric mean and the worst cell of the ratio to the best
exact-bounded peer and to the line, and the share of cells ahead of the best loose-bounded peer and of
python-dp's bound-free path; then the same over the cells with n eps < 100.
Writes ``benchmarks/results/panel.md`` and ``panel.csv``.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402
from accuracy import errors, replicate, truth_and_scale  # noqa: E402
from common import RESULTS, Dataset, exact, fmt, machine, md_table, panel, seed_of  # noqa: E402

from dpsql.core import Params, default_method, run  # noqa: E402
from dpsql.noise import Rng  # noqa: E402

#: aggregate -> (core aggregate, p)
AGGS = {"median": ("quantile", 0.5), "p90": ("quantile", 0.9), "iqr": ("iqr", None), "mean": ("mean", None),
        "sum": ("sum", None), "var": ("var", None)}
#: the dpsql methods compared (the first is the issue-12 default, the second the previous default)
METHODS = {"median": ("scalefree", "threshold"), "p90": ("scalefree", "threshold"), "iqr": ("scalefree", "universal"),
           "mean": ("scalefree", "universal"), "sum": ("scalefree", "universal"), "var": ("scalefree", "asymmetric")}
EPSILONS = (1.0, 0.1)
SIZES = (100, 1_000, 10_000, 100_000)
PEERS = ("opendp", "diffprivlib", "pydp")


# --------------------------------------------------------------------------- peers


def _opendp(agg: str, x: np.ndarray, eps: float, bounds, g: np.random.Generator):  # noqa: ANN001, ANN202
    import opendp.prelude as dp

    dp.enable_features("contrib")
    lo, hi = bounds
    unsized = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if agg in ("median", "p90", "iqr"):
        cands = np.linspace(lo, hi, 1001)
        step = cands[1] - cands[0]
        ps = {"median": (0.5,), "p90": (0.9,), "iqr": (0.25, 0.75)}[agg]
        e = eps / len(ps)
        meas = [dp.binary_search_chain(
            lambda s, p=p: dp.m.make_private_quantile(unsized, dp.symmetric_distance(), dp.max_divergence(),
                                                      cands.tolist(), p, s), d_in=1, d_out=e) for p in ps]

        def go() -> float:  # an independent offset per quantile (the IQR's two are separate releases)
            q = []
            for m in meas:
                off = g.random() * step
                q.append(float(m((x - off).tolist())) + off)
            return q[0] if len(q) == 1 else q[1] - q[0]
        return go
    return peers._opendp(agg, x, eps, bounds)  # mean, var (sized, d_in = 2) and sum: as peers.py calls them


def _diffprivlib(agg: str, x: np.ndarray, eps: float, bounds, seed: int):  # noqa: ANN001, ANN202
    import diffprivlib as dpl
    from diffprivlib.accountant import BudgetAccountant

    if agg == "sum":
        return None  # tools.sum calibrates to (upper - lower): replace-one neighbours with n public, not comparable
    if agg not in ("p90", "iqr"):
        return peers._diffprivlib(agg, x, eps, bounds, seed)  # mean, var, median: as peers.py calls them
    kw = {"bounds": bounds, "random_state": np.random.RandomState(seed % 2**32), "accountant": BudgetAccountant()}
    if agg == "p90":
        return lambda: float(dpl.tools.quantile(x, 0.9, epsilon=eps, **kw))
    return lambda: float(np.diff(dpl.tools.quantile(x, [0.25, 0.75], epsilon=eps, **kw))[0])


def _pydp(agg: str, x: np.ndarray, eps: float, bounds):  # noqa: ANN001, ANN202
    """python-dp has no p90 or IQR; the rest as peers.py calls it."""
    return peers._pydp(agg, x, eps, bounds) if agg in ("mean", "var", "sum", "median") else None


# --------------------------------------------------------------------------- lower-bound lines


def em_line(x: np.ndarray, p: float, eps: float, runs: int, g: np.random.Generator) -> np.ndarray:
    """Continuous EM over the exact [min, max], full eps, loss sensitivity max(p, 1 - p)."""
    xs = np.sort(x)
    n, s = xs.size, max(p, 1.0 - p)
    i = np.arange(1, n)
    with np.errstate(divide="ignore"):
        lw = np.log(np.diff(xs)) - eps * np.abs(i - p * n) / (2.0 * s)
    if not np.isfinite(lw).any():
        return np.full(runs, xs[0])
    w = np.exp(lw - lw.max())
    k = g.choice(n - 1, size=runs, p=w / w.sum())
    return xs[k] + g.random(runs) * (xs[k + 1] - xs[k])


def subset_s(x: np.ndarray, eps: float) -> float:
    """Seed 000, Lemma 3.2: S(D, eps) = mu(D minus its k largest) - mu(D minus its k smallest), k = ceil(1/eps)."""
    xs, k = np.sort(x), math.ceil(1.0 / eps)
    return float((xs[-k:].sum() - xs[:k].sum()) / (xs.size - k))


def line_error(agg: str, x: np.ndarray, ex: dict, eps: float, runs: int, g: np.random.Generator) -> float:
    core, p = AGGS[agg]
    truth, scale = truth_and_scale(core, ex, p)
    if agg in ("median", "p90"):
        return float(np.median(errors(em_line(x, p, eps, runs, g), truth, scale)))
    if agg == "iqr":
        d = em_line(x, 0.75, eps / 2, runs, g) - em_line(x, 0.25, eps / 2, runs, g)
        return float(np.median(errors(d, truth, scale)))
    if agg == "mean":
        return subset_s(x, eps) / scale
    if agg == "sum":  # add/remove: removing the k largest or the k smallest rows moves the sum by their sum
        xs, k = np.sort(x), math.ceil(1.0 / eps)
        return max(abs(xs[-k:].sum()), abs(xs[:k].sum())) / 2.0 / scale
    return math.nan


# --------------------------------------------------------------------------- one (dataset, n) cell


def _dpsql_row(base: dict, agg: str, eps: float, method: str, mode: str, out: np.ndarray, truth: float,
               scale: float) -> dict:
    """One dpsql cell: the median error, and the tail (the share of answered runs more than one scale unit
    off: 1 IQR, or 100 % of the variance or of sum|x|), which a median over runs hides."""
    e = errors(out, truth, scale)
    answered = e[np.isfinite(e)] if np.isfinite(e).any() else e
    return {**base, "aggregate": agg, "eps": eps, "system": "dpsql", "mode": mode, "detail": method,
            "median_err": float(np.median(e)), "runs": out.size,
            "status": f"null {np.mean(np.isnan(out)):.2f}", "tail": float(np.mean(answered > 1.0))}


#: dpsql runs this many times per cell (n <= 1e4) so that the tail share resolves 0.5 %; peers run ``--runs``
DPSQL_RUNS = 200


def run_cell(ds: Dataset, n: int, runs: int, aggs: tuple[str, ...], epsilons: tuple[float, ...]) -> list[dict]:
    warnings.simplefilter("ignore")
    x = ds.sample(n)
    ex = exact(x)
    oracle = (ex["min"], ex["max"])
    modes = {"oracle": oracle, "loose": peers.loose_bounds(*oracle)}
    batch = replicate(x, max(runs, DPSQL_RUNS) if x.size <= 10_000 else runs)
    rows = []
    base = {"dataset": ds.label, "n": int(x.size)}
    for agg in aggs:
        core, p = AGGS[agg]
        truth, scale = truth_and_scale(core, ex, p)
        for eps in epsilons:
            for m in METHODS[agg]:
                rng = Rng.seeded(seed_of("panel", ds.label, n, agg, eps, m))
                rows.append(_dpsql_row(base, agg, eps, m, "none", run(core, batch, Params(epsilon=eps, p=p),
                                                                      method=m, rng=rng), truth, scale))
            m = METHODS[agg][0]
            lo, hi = modes["loose"]
            rng = Rng.seeded(seed_of("panel-loose", ds.label, n, agg, eps, m))
            rows.append(_dpsql_row(base, agg, eps, m, "loose", run(core, batch, Params(epsilon=eps, p=p, lower=lo,
                                                                                       upper=hi), method=m, rng=rng),
                                   truth, scale))
            g = np.random.default_rng(seed_of("line", ds.label, n, agg, eps))
            rows.append({**base, "aggregate": agg, "eps": eps, "system": "line", "mode": "oracle", "detail": "",
                         "median_err": line_error(agg, x, ex, eps, 400, g), "runs": 400, "status": "ok"})
            for peer in PEERS:
                for mode, bounds in list(modes.items()) + ([("none", None)] if peer == "pydp" else []):
                    seed = seed_of("panel", peer, mode, ds.label, n, agg, eps)
                    status, outs = "ok", []
                    try:
                        if peer == "opendp":
                            fn = _opendp(agg, x, eps, bounds, np.random.default_rng(seed))
                        elif peer == "diffprivlib":
                            fn = _diffprivlib(agg, x, eps, bounds, seed)
                        else:
                            fn = _pydp(agg, x, eps, bounds)
                        if fn is None:
                            continue
                        t0 = time.perf_counter()
                        while len(outs) < runs:
                            try:
                                outs.append(fn())
                            except Exception as exc:  # noqa: BLE001
                                outs.append(math.nan)
                                status = f"raised {type(exc).__name__}"
                            if len(outs) >= 10 and time.perf_counter() - t0 > 2.5:
                                break
                    except Exception as exc:  # noqa: BLE001
                        status = f"setup failed {type(exc).__name__}: {str(exc)[:50]}"
                    e = errors(np.array(outs if outs else [math.nan]), truth, scale)
                    rows.append({**base, "aggregate": agg, "eps": eps, "system": peer, "mode": mode, "detail": "",
                                 "median_err": float(np.median(e)), "runs": len(outs), "status": status})
    return rows


# --------------------------------------------------------------------------- summary


def _cells(rows: list[dict], agg: str) -> list[tuple[str, int, float]]:
    return sorted({(r["dataset"], r["n"], r["eps"]) for r in rows if r["aggregate"] == agg})


def _pick(rows: list[dict], agg: str, cell: tuple, **kw) -> list[dict]:  # noqa: ANN003
    ds, n, eps = cell
    return [r for r in rows if r["aggregate"] == agg and r["dataset"] == ds and r["n"] == n and r["eps"] == eps
            and all(r[k] == v for k, v in kw.items()) and not math.isnan(r["median_err"])]


def _best(rows: list[dict], agg: str, cell: tuple, mode: str) -> float:
    c = [r["median_err"] for r in _pick(rows, agg, cell, mode=mode) if r["system"] in PEERS]
    return min(c) if c else math.nan


FLOOR = 1e-9  # errors below this (relative to the scale) count as exact: ties, not wins


def summary(rows: list[dict], aggs: tuple[str, ...], big: bool) -> list[list[str]]:
    out = []
    for agg in aggs:
        cells = [c for c in _cells(rows, agg) if (c[1] * c[2] >= 100) == big]
        for m in METHODS[agg]:
            r_or, r_line, win_loose, win_pydp, cells_n, nulls, tails = [], [], 0, 0, 0, [], []
            worst, worst_tail = (0.0, ""), (0.0, "")
            for c in cells:
                d = _pick(rows, agg, c, system="dpsql", mode="none", detail=m)
                if not d:
                    continue
                cells_n += 1
                st = str(d[0]["status"])
                nulls.append(float(st.split()[1]) if st.startswith("null") else 0.0)
                if d[0].get("tail", "") != "":
                    tails.append(float(d[0]["tail"]))
                    if tails[-1] > worst_tail[0]:
                        worst_tail = (tails[-1], f"{c[0]} n={c[1]} eps={c[2]:g}")
                e = max(d[0]["median_err"], FLOOR)
                if math.isinf(e):  # NULL in most runs: counted in the NULL column, not in the ratios
                    continue
                bo, bl = _best(rows, agg, c, "oracle"), _best(rows, agg, c, "loose")
                if not math.isnan(bo):
                    r = e / max(bo, FLOOR)
                    r_or.append(r)
                    if r > worst[0]:
                        worst = (r, f"{c[0]} n={c[1]} eps={c[2]:g}")
                ln = _pick(rows, agg, c, system="line")
                if ln and not math.isnan(ln[0]["median_err"]):
                    r_line.append(e / max(ln[0]["median_err"], FLOOR))
                win_loose += not math.isnan(bl) and e <= bl
                pn = _pick(rows, agg, c, system="pydp", mode="none")
                win_pydp += bool(pn) and e <= pn[0]["median_err"]
            if not cells_n:
                continue

            def gm(v: list[float]) -> str:
                return f"{math.exp(np.mean(np.log(v))):.3g}" if v else "—"
            has_pydp = any(_pick(rows, agg, c, system="pydp", mode="none") for c in cells)
            out.append([agg, m, str(cells_n), f"{np.mean(nulls):.2f}", gm(r_or),
                        f"{worst[0]:.3g} ({worst[1]})" if r_or else "—", gm(r_line),
                        f"{max(r_line):.3g}" if r_line else "—", f"{win_loose}/{cells_n}",
                        f"{win_pydp}/{cells_n}" if has_pydp else "—",
                        f"{np.mean(tails):.4f}; {worst_tail[0]:.3f} ({worst_tail[1]})" if tails else "—"])
    return out


def render(rows: list[dict], args: argparse.Namespace, seconds: float) -> str:
    hdr = ["aggregate", "dpsql method", "cells", "NULL share", "geomean vs best oracle peer",
           "worst cell vs best oracle peer",
           "geomean vs line", "worst vs line", "ahead of best loose peer", "ahead of python-dp bound-free",
           "runs > 1 scale off: mean share; worst cell"]
    lines = ["# Issue 12 panel: bound-free dpsql vs peers and the lower-bound lines", "",
             f"Generated by `benchmarks/panel.py{' --quick' if args.quick else ''}` in {seconds / 60:.1f} min on "
             f"{machine()}; {args.runs} runs per cell (peers stop after 2.5 s with >= 10 runs). Metric: median "
             "|est - exact| / IQR (quantiles, IQR, mean), / var (var), / sum|x| (sum). Ratios < 1: dpsql ahead. "
             "For each aggregate the first method is the new default, the second the previous one. Cells where "
             f"a method is NULL in most runs count in its NULL share and are left out of its ratios. dpsql runs "
             f"{DPSQL_RUNS} times per cell up to n = 1e4; the last column is the share of its answered runs more "
             "than one scale unit off (1 IQR; 100 % of var or sum|x|), the tail a median hides.", "",
             "## Cells with n eps >= 100 (the issue's targets)", "", md_table(hdr, summary(rows, args.aggs, True)), "",
             "## Cells with n eps < 100 (below the packing bound for locating data without bounds)", "",
             md_table(hdr, summary(rows, args.aggs, False)), ""]
    lines += ["## Bounds never hurt: the new default with loose bounds / without bounds", ""]
    trs = []
    for agg in args.aggs:
        rs = []
        for c in _cells(rows, agg):
            a = _pick(rows, agg, c, system="dpsql", mode="loose")
            b = _pick(rows, agg, c, system="dpsql", mode="none", detail=METHODS[agg][0])
            if a and b:
                if math.isfinite(a[0]["median_err"]) and math.isfinite(b[0]["median_err"]):
                    rs.append(max(a[0]["median_err"], FLOOR) / max(b[0]["median_err"], FLOOR))
        if rs:
            trs.append([agg, f"{math.exp(np.mean(np.log(rs))):.3g}", f"{max(rs):.3g}", str(len(rs))])
    lines += [md_table(["aggregate", "geomean", "worst", "cells"], trs), ""]
    for agg in args.aggs:
        lines += [f"## {agg}", ""]
        cols = [("dpsql", "none", m) for m in METHODS[agg]] + [("dpsql", "loose", METHODS[agg][0])]
        cols += [(p, mo, "") for p in PEERS for mo in ("oracle", "loose", "none")
                 if any(r["system"] == p and r["mode"] == mo and r["aggregate"] == agg for r in rows)]
        cols += [("line", "oracle", "")]
        hdr2 = ["dataset", "n", "eps"] + [f"dpsql {d}" + (" (loose)" if mo == "loose" else "") if s == "dpsql"
                                          else ("line" if s == "line" else f"{s} {mo}") for s, mo, d in cols]
        trs = []
        for c in _cells(rows, agg):
            vals = []
            for s, mo, d in cols:
                kw = {"system": s, "mode": mo} | ({"detail": d} if s == "dpsql" else {})
                r = _pick(rows, agg, c, **kw)
                vals.append(fmt(r[0]["median_err"]) if r else "—")
            trs.append([c[0], f"{c[1]:g}", f"{c[2]:g}"] + vals)
        lines += [md_table(hdr2, trs), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--outdir", type=str, default=RESULTS)
    ap.add_argument("--replot", action="store_true", help="redo the tables from OUTDIR/panel.csv")
    args = ap.parse_args(argv)
    args.runs = args.runs or (20 if args.quick else 50)
    args.aggs = tuple(AGGS)
    sizes = SIZES[:3] if args.quick else SIZES
    datasets = panel(args.quick)
    tasks = [(d, n) for d in datasets for n in d.sizes(list(sizes)) if n < 100_000 or d.family == "nycflights13"]
    tasks.sort(key=lambda t: -t[1])
    csv_path = os.path.join(args.outdir, "panel.csv")
    t0 = time.perf_counter()
    if args.replot:
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            r["n"], r["runs"], r["eps"], r["median_err"] = int(r["n"]), int(r["runs"]), float(r["eps"]), float(
                r["median_err"])
    else:
        rows = []
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futs = {pool.submit(run_cell, d, n, args.runs, args.aggs, EPSILONS): (d, n) for d, n in tasks}
            for f in as_completed(futs):
                d, n = futs[f]
                rows += f.result()
                print(f"[{time.perf_counter() - t0:7.1f}s] {d.label:28s} n={n}", flush=True)
        os.makedirs(args.outdir, exist_ok=True)
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
            w.writeheader()
            w.writerows(rows)
    text = render(rows, args, time.perf_counter() - t0)
    with open(os.path.join(args.outdir, "panel.md"), "w") as f:
        f.write(text + "\n")
    print(text.split("## Bounds never hurt")[0])
    assert default_method("quantile") in METHODS["median"]


if __name__ == "__main__":
    main()
