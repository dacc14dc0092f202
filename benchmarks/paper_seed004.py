"""Seed 004 (Huang, Liang & Yi 2021): the one-dimensional analogue of the paper's shift-invariance comparison.

The paper (Figs. 1, 2, 5) shows that Shifted-CM's error does not change with the location mu while CM's
(no shift) grows with it; it has no 1-d experiment and no numeric tables (digest 6), so the targets are
(a) that qualitative finding and (b) the digest's own 1-d prototype numbers (digest 6.4, replace-one,
public n, bounds [-50, 50], bucket 0.01).

Setting: n = 4000 (the paper's n), rho = 0.5 (the paper's rho) for the Gaussian methods; the pure
methods run at eps = 1, whose zCDP cost eps**2/2 = 0.5 is the same.  Metric (the paper's, via COINPRESS):
the 0.1-trimmed mean over 100 trials of |estimate - empirical mean| (the DP error alone; the sampling
error of the empirical mean vs mu is sqrt(2/pi)/sqrt(4000) = 0.0126 for sigma = 1).

Tables:
1. N(10**k, 1), k = 0..9: Shifted-CM and CM (bound-free and Gaussian/Laplace), dpsql's universal mean,
   the plain clipped mean (Laplace, bounds +-1e10 that cover every k, as "all algorithms get the same
   R"), and Shifted-CM on the paper's quantised domain with the same bounds (2**32 buckets).
2. The digest's 1-d prototype: N(mu, 1), mu in {0, 5, 10}, bounds [-50, 50].
3. The digest's small-n check: N(5, 1) and LogNormal(0, 1), n in {100, 1000, 4000}.

Usage: ``python benchmarks/paper_seed004.py [--quick]``; writes benchmarks/results/paper_seed004.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import trim_mean

from dpsql.core import Batch, Params, run
from dpsql.noise import Rng

QUICK = "--quick" in sys.argv
TRIALS = 30 if QUICK else 100
N = 4000
RHO = 0.5
EPS = 1.0
BIG = 1e10  # bounds given to the bounded methods in table 1
OUT = Path(__file__).parent / "results" / "paper_seed004.md"

# digest 6.4 (its own numpy prototype of the paper's algorithm: replace-one, public n, [-50, 50],
# bucket 0.01, squared-value clip search): Shifted-CM (paper rank rule), CM centred at 0
DIGEST_PROTO = {0.0: (0.0013, 0.0012), 5.0: (0.0015, 0.0040), 10.0: (0.0014, 0.0061)}
DIGEST_SMALL = {("N(5,1)", 100): 0.050, ("N(5,1)", 1000): 0.0045, ("N(5,1)", 4000): 0.0014,
                ("LogNormal(0,1)", 100): 0.56, ("LogNormal(0,1)", 1000): 0.145, ("LogNormal(0,1)", 4000): 0.052}


def err(method: str, data: np.ndarray, params: Params, seed: int) -> float:
    out = run("mean", Batch.from_lists([data] * TRIALS), params, method=method, rng=Rng.seeded(seed))
    e = np.abs(out - data.mean())
    e = np.where(np.isnan(e), np.inf, e)  # a NULL counts as an infinite error
    return float(trim_mean(e, 0.1))


def agree(ours: float, ref: float) -> str:
    """'agrees' within the digest's +-15% Monte-Carlo noise widened to a factor 2 (different neighbouring
    relation, count, margin and domain coding), else the ratio."""
    r = ours / ref
    return f"agrees (x{r:.2g})" if 0.5 <= r <= 2.0 else f"differs (x{r:.2g})"


def fmt(x: float) -> str:
    return "NULL" if not np.isfinite(x) else f"{x:.2g}"


COLS = [  # header, method, params
    ("Shifted-CM gauss", "shifted_cm_gauss", Params(rho=RHO)),
    ("CM gauss", "clipped_rank_gauss", Params(rho=RHO)),
    ("Shifted-CM lap", "shifted_cm", Params(epsilon=EPS)),
    ("CM lap", "clipped_rank", Params(epsilon=EPS)),
    ("universal", "universal", Params(epsilon=EPS)),
    ("clipped +-1e10", "clipped", Params(epsilon=EPS, lower=-BIG, upper=BIG)),
    ("Shifted-CM gauss +-1e10", "shifted_cm_gauss", Params(rho=RHO, lower=-BIG, upper=BIG)),
]


def table1() -> list[str]:
    base = np.random.default_rng(1).normal(0.0, 1.0, N)
    rows = ["| mu | " + " | ".join(c[0] for c in COLS) + " |", "|" + "---|" * (len(COLS) + 1)]
    res = {}
    for k in range(10):
        mu = 10.0**k
        data = base + mu
        vals = [err(m, data, p, 100 * k + j) for j, (_, m, p) in enumerate(COLS)]
        res[k] = vals
        rows.append(f"| 1e{k} | " + " | ".join(fmt(v) for v in vals) + " |")
        print(rows[-1], flush=True)
    scm = [res[k][0] for k in res]
    cm = [res[k][1] for k in res]
    rows.append("")
    rows.append(
        f"Shifted-CM gauss ranges {min(scm):.2g}..{max(scm):.2g} over mu = 1..1e9 (flat: **agrees** with the "
        f"paper's finding that Shifted-CM is translation invariant); CM gauss grows from {cm[0]:.2g} to "
        f"{cm[-1]:.2g}, proportional to mu (**agrees**: CM's error is r(D)/n, Theorem 2, Figs. 1-2).  Under "
        "add/remove CM also divides by a noisy count, whose error multiplies the whole mean (~mu/n per count "
        "unit), which adds to the paper's r(D)/n term.  The plain clipped mean pays its bound (1e10/(eps n)) "
        "whatever mu; the universal mean is flat too (also shift invariant).  Shifted-CM with the bounds "
        f"+-1e10 runs on the paper's 2**32-bucket grid (bucket 2**34 / 2**31 = 8 >> sigma = 1): its centre "
        f"is off by up to half a bucket, so C and the error grow ({min(r[6] for r in res.values()):.2g}.."
        f"{max(r[6] for r in res.values()):.2g}, Remark 1's additive quantisation error) but stay flat in mu; "
        "the bound-free float64 coding has no such floor."
    )
    return rows


def table2() -> list[str]:
    base = np.random.default_rng(2).normal(0.0, 1.0, N)
    cols = [
        ("Shifted-CM gauss [-50,50]", "shifted_cm_gauss", Params(rho=RHO, lower=-50.0, upper=50.0)),
        ("CM gauss [-50,50]", "clipped_rank_gauss", Params(rho=RHO, lower=-50.0, upper=50.0)),
        ("Shifted-CM gauss bound-free", "shifted_cm_gauss", Params(rho=RHO)),
        ("CM gauss bound-free", "clipped_rank_gauss", Params(rho=RHO)),
    ]
    head = " | digest Shifted-CM | digest CM | agreement (bounded vs digest) |"
    rows = ["| mu | " + " | ".join(c[0] for c in cols) + head,
            "|" + "---|" * (len(cols) + 4)]
    for i, mu in enumerate((0.0, 5.0, 10.0)):
        vals = [err(m, base + mu, p, 1000 + 10 * i + j) for j, (_, m, p) in enumerate(cols)]
        d = DIGEST_PROTO[mu]
        rows.append(f"| {mu:g} | " + " | ".join(fmt(v) for v in vals) + f" | {d[0]} | {d[1]} | "
                    f"{agree(vals[0], d[0])} / {agree(vals[1], d[1])} |")
        print(rows[-1], flush=True)
    return rows


def table3() -> list[str]:
    g = np.random.default_rng(3)
    rows = ["| data | n | Shifted-CM gauss [-50,50] | Shifted-CM gauss bound-free | Shifted-CM lap (eps=1) "
            "| universal (eps=1) | digest (paper rule) | agreement (bounded vs digest) |", "|" + "---|" * 8]
    for name, draw in (("N(5,1)", lambda n: g.normal(5.0, 1.0, n)), ("LogNormal(0,1)", lambda n: g.lognormal(0, 1, n))):
        for n in (100, 1000, 4000):
            x = draw(n)
            vals = [
                err("shifted_cm_gauss", x, Params(rho=RHO, lower=-50.0, upper=50.0), 7 * n),
                err("shifted_cm_gauss", x, Params(rho=RHO), 7 * n + 1),
                err("shifted_cm", x, Params(epsilon=EPS), 7 * n + 2),
                err("universal", x, Params(epsilon=EPS), 7 * n + 3),
            ]
            d = DIGEST_SMALL[(name, n)]
            rows.append(f"| {name} | {n} | " + " | ".join(fmt(v) for v in vals) + f" | {d} | {agree(vals[0], d)} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    t0 = time.time()
    parts = [
        "# Seed 004 (Huang, Liang & Yi): one-dimensional shift-invariance comparison",
        "",
        f"n = {N}, {TRIALS} trials, 0.1-trimmed mean of |estimate - empirical mean| (NULL = infinite error). "
        f"Gaussian methods at rho = {RHO}; pure methods at eps = {EPS} (zCDP cost eps^2/2 = 0.5, the same). "
        "The paper has no 1-d experiment and no numeric tables; its finding (Figs. 1, 2, 5) is qualitative: "
        "Shifted-CM is flat in mu, CM grows with mu.  Sampling error of the empirical mean: 0.0126.",
        "",
        "## 1. N(10^k, 1), k = 0..9",
        "",
        *table1(),
        "",
        "## 2. The digest's 1-d prototype (N(mu, 1), bounds [-50, 50])",
        "",
        *table2(),
        "",
        "The digest's numbers come from its replace-one prototype (public n, bucket 0.01, squared-value clip "
        "search with tau ~ 43 ranks at beta = 0.1).  Ours are add/remove: a noisy count replaces n (1/16 of "
        "rho), the clip radius is searched over float64 codes truncated to 6 mantissa bits (T = 17), the "
        "centre over 2**32 buckets of [-50, 50] (or, bound-free, 48-bit float64 codes), and the rank margin "
        "uses beta = 1e-3 (BETA_RANK) because a failed comparison in a bound-free domain is catastrophic.  "
        "The agreement column compares the bounded Gaussian columns with the digest (factor-2 tolerance).  "
        "Ours are about half the digest's: under add/remove the clipped *sum* has sensitivity C (replace-one: "
        "2C for the mean times n), so the noise std is about half for a similar rank margin (ours ~38 ranks "
        "at T = 17, beta = 1e-3; the digest's ~43); the count costs little because the sum is centred.  "
        "Shifted-CM is flat in mu and CM grows with mu, as in the digest and the paper's Figs. 1-2.",
        "",
        "## 3. Small n and skewed data (digest 6.4, second run)",
        "",
        *table3(),
        "",
        "Symmetric data: the paper's rank rule (clip ~tau points around the median) costs almost nothing and "
        "Shifted-CM is far below the sampling error for n >= 1000.  Skewed data: clipping tau tail points "
        "biases the mean (the digest's observation).  For n = 100 the margin exceeds n/2: the radius "
        "collapses towards 0 and the output is close to the private median.  The pure (Laplace) variant "
        "has rank noise T/eps per comparison (vs sqrt(T/rho) for the Gaussian one), so its private median is "
        "only reliably inside the data for n >~ 1360/eps (the paper's n = Omega(tau) condition, Theorem 3): "
        "below that threshold (on the noisy count) it returns NULL rather than a centre far outside the "
        "data; above it, it trails the universal mean here.",
        "",
        f"_Generated by `benchmarks/paper_seed004.py` in {time.time() - t0:.0f} s._",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(parts) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
