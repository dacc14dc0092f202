"""The scale-free floor on a Poisson subsample (``scalefree.FLOOR_SAMPLE``, on by default since 9425c78): ON vs OFF.

    .venv/bin/python benchmarks/floor_sample.py --part floor            # (1) ~1.5 min
    .venv/bin/python benchmarks/floor_sample.py --part e2e --n 100000   # (2) one n per run (~2-3 min each;
    .venv/bin/python benchmarks/floor_sample.py --part e2e --n 300000 --datasets ...   3e5 in two halves)
    .venv/bin/python benchmarks/floor_sample.py --part noise --n 100000 # (2)'s yardstick: OFF vs OFF, ~2 min
    .venv/bin/python benchmarks/floor_sample.py --part speed            # (3) ~15 s
    .venv/bin/python benchmarks/floor_sample.py --part render           # the .md from the .json

(1) The released floor exponent e (the median route: count, class, floor at its share, the real n_hat) per run,
ON and OFF from the same seed, on the panel at n in {1e3, 1e4, 1e5, 3e5}, eps in {0.1, 1}: its median, the
octaves between the IQR and ``2**e`` (10th, 50th, 90th percentile of ``log2(IQR) - e``) and the share of runs
where ``2**e > IQR`` (a lower bound that fails).  (2) dp_median, dp_quantile(x, 0.9), dp_mean: median |err| / IQR
over the runs, ON vs OFF, same seed.  Below ``FLOOR_KEEP`` rows every group has rate 1 and ON releases what OFF
releases (checked, marked ``=``).  (3) DuckDB, 1e7 lognormal rows, one group: the gap pass's window (one CSPRNG
word per row, ordered by it, pair gaps' exponent histogram: the plan's SQL shape) over all rows vs over a
Poisson subsample at the rate the floor would use, its rows drawn as geometric skips from ``dpsql.noise.Rng``
and semi-joined by position, or with the plan's one CSPRNG word per row serving as coin (``word < 2**64 eta``)
and, among the kept rows, as the matching's order key; and the one-scan histogram the fused gap pass also
counts (it would need a scan of its own).  Results accumulate in ``benchmarks/results/floor_sample.json``;
each run rewrites ``floor_sample.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from accuracy import replicate  # noqa: E402
from common import RESULTS, exact, machine, md_table, panel, patched  # noqa: E402

from dpsql.core import Params, run  # noqa: E402
from dpsql.core import scalefree as S  # noqa: E402
from dpsql.core.primitives import noisy_count  # noqa: E402
from dpsql.noise import Rng, failures_before_success  # noqa: E402

NS = (1000, 10000, 100000, 300000)
EPS = (0.1, 1.0)
CACHE = os.path.join(RESULTS, "floor_sample.json")
AGGS = {"median": ("quantile", 0.5, "median"), "p90": ("quantile", 0.9, "q90"), "mean": ("mean", None, "mean")}


def _seed(*parts: object) -> int:
    return zlib.crc32(" ".join(map(str, parts)).encode())


def _runs(n: int) -> int:
    return 200 if n <= 10000 else 100


def _floor(on: bool) -> contextlib.AbstractContextManager:
    """``scalefree.FLOOR_SAMPLE = on`` inside, the module's own setting (the default) restored after."""
    return patched(S, FLOOR_SAMPLE=on)


def _replicated(datasets: list, ns: list[int]):  # noqa: ANN202
    """(dataset, n, exact answers, presorted batch of ``_runs(n)`` copies) for each dataset's n in ``ns``."""
    for d in datasets:
        for n in d.sizes(ns):
            if n not in ns:
                continue
            x = d.sample(n)
            b = replicate(x, _runs(n))
            b.presort()
            yield d, n, exact(x), b


def _floors(b, eps: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The median route's floor exponent per group (NaN where NULL) and the floor's rate (ON)."""
    rng = Rng.seeded(seed)
    n_hat = noisy_count(b, S.SPLIT["count"] * eps, rng)
    e, eta = np.full(b.groups, np.nan), np.full(b.groups, np.nan)
    for sp, idx in S.median_classes(n_hat, eps):
        e[idx] = S.floor_exponent(S._groups(b, idx), sp["bound"] * eps, rng, n_hat[idx])
        eta[idx] = S.floor_rate(n_hat[idx], sp["bound"] * eps)
    return e, eta


def part_floor(datasets: list, out: dict) -> None:
    for d in datasets:
        for n in d.sizes(list(NS)):
            x = d.sample(n)
            iqr = exact(x)["iqr"]
            b = replicate(x, _runs(n)).sorted()
            for eps in EPS:
                cell = {}
                got = {}
                for on in (False, True):
                    with _floor(on):
                        e, eta = _floors(b, eps, _seed("floor", d.label, n, eps))
                    got[on] = e
                    ok = e[~np.isnan(e)]
                    gap = math.log2(iqr) - ok if iqr > 0 else np.full(ok.size, np.nan)
                    cell["on" if on else "off"] = {
                        "e": float(np.median(ok)), "gap": [float(np.percentile(gap, q)) for q in (10, 50, 90)],
                        "fail": float(np.mean(np.ldexp(1.0, ok.astype(np.int64)) > iqr)),
                        "eta": float(np.nanmedian(eta)), "null": float(np.mean(np.isnan(e)))}
                # ON is OFF (same draws) where every group had rate 1; equal exponents alone can be chance
                cell["same"] = bool(np.array_equal(got[False], got[True], equal_nan=True) and cell["on"]["eta"] >= 1.0)
                out.setdefault("floor", {})[f"{d.label}|{n}|{eps}"] = cell
                print(f"floor {d.label} n={n} eps={eps}: {cell}", flush=True)


def part_e2e(datasets: list, ns: list[int], out: dict) -> None:
    for d, n, ex, b in _replicated(datasets, ns):
        for eps in EPS:
            cell = {}
            for name, (agg, p, key) in AGGS.items():
                res = {}
                for on in (False, True):
                    params = Params(epsilon=eps, p=p) if p is not None else Params(epsilon=eps)
                    with _floor(on):
                        res[on] = run(agg, b, params, rng=Rng.seeded(_seed("e2e", d.label, n, eps, name)))
                err = {on: np.abs(v - ex[key]) / ex["iqr_scale"] for on, v in res.items()}
                cell[name] = {"off": float(np.nanmedian(err[False])), "on": float(np.nanmedian(err[True])),
                              "off99": float(np.nanpercentile(err[False], 99)),
                              "on99": float(np.nanpercentile(err[True], 99)),
                              "same": bool(res[False].tobytes() == res[True].tobytes())}
            out.setdefault("e2e", {})[f"{d.label}|{n}|{eps}"] = cell
            print(f"e2e {d.label} n={n} eps={eps}: {cell}", flush=True)


def part_noise(datasets: list, size: int, out: dict) -> None:
    """The yardstick for (2): OFF vs OFF from another seed, the same ratio of median errors."""
    for d, n, ex, b in _replicated(datasets, [size]):
        for eps in EPS:
            cell = {}
            for name, (agg, p, key) in AGGS.items():
                params = Params(epsilon=eps, p=p) if p is not None else Params(epsilon=eps)
                with _floor(False):
                    r = [np.nanmedian(np.abs(run(agg, b, params, rng=Rng.seeded(_seed(tag, d.label, n, eps, name)))
                                             - ex[key]) / ex["iqr_scale"]) for tag in ("e2e", "again")]
                cell[name] = float(r[1] / r[0]) if r[0] > 0 else None
            out.setdefault("noise", {})[f"{d.label}|{n}|{eps}"] = cell
            print(f"noise {d.label} n={n} eps={eps}: {cell}", flush=True)


def _kept_positions(rows: int, eta: float, rng: Rng) -> np.ndarray:
    """Positions 0..rows-1 kept by independent Bernoulli(eta) coins, drawn as geometric skips."""
    chunks, at = [], -1
    while True:
        m = int(rows * eta + 10 * math.sqrt(rows * eta) + 16)
        pos = at + np.cumsum(failures_before_success(np.full(m, eta), rng) + 1).astype(np.int64)
        chunks.append(pos[pos < rows])
        if pos[-1] >= rows:
            return np.concatenate(chunks)
        at = int(pos[-1])


def part_speed(rows: int, reps: int, out: dict) -> None:
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    x = "exp(sqrt(-2 * ln(random())) * cos(6.283185307179586 * random()))"
    con.execute(f"CREATE TABLE t AS SELECT {x} AS x FROM range({rows})")
    rng = Rng()  # the OS CSPRNG, as in production

    def keys(k: int) -> str:
        con.register("_keys", pa.table({"_key": pa.array(rng.words(k))}))
        return "_keys"

    def gap_pass(src: str, k: int, where: str = "") -> float:
        """The gap pass's shape: rows POSITIONAL JOIN words, window by word, pair gaps' exponent histogram (the
        words' drawing included in the time)."""
        t0 = time.perf_counter()
        sql = ("SELECT _k, count(*) FROM (SELECT CASE WHEN _gap = 0 THEN -1000 ELSE ceil(log2(_gap)) END AS _k, _pos "
               "FROM (SELECT abs(x - lag(x) OVER w) AS _gap, row_number() OVER w AS _pos, "
               f"_key = lag(_key) OVER w AS _tie FROM (SELECT * FROM (SELECT x FROM {src}) POSITIONAL JOIN {keys(k)}"
               f"{where}) WINDOW w AS (ORDER BY _key))) WHERE _pos % 2 = 0 GROUP BY ALL")
        con.sql(sql).fetchall()
        return time.perf_counter() - t0

    timings: dict[str, list[float]] = {}
    for label, eps_floor in (("eps 1 (floor 0.05)", 0.05), ("eps 0.1 (floor 0.005)", 0.005)):
        eta = float(S.floor_rate(np.array([float(rows)]), eps_floor)[0])
        for _ in range(reps):
            t0 = time.perf_counter()
            pos = _kept_positions(rows, eta, rng)
            draw = time.perf_counter() - t0
            con.register("_kept", pa.table({"pos": pa.array(pos)}))
            t0 = time.perf_counter()
            con.sql("CREATE OR REPLACE TEMP TABLE s AS SELECT x FROM t SEMI JOIN _kept ON t.rowid = _kept.pos")
            select = time.perf_counter() - t0
            win = gap_pass("s", pos.size)
            timings.setdefault(f"subsample by skips, {label}: eta 2^{int(math.log2(eta))}, ~{rows * eta:.0f} rows",
                               []).append(draw + select + win)
            timings.setdefault(f"  of which: skips drawn {label}", []).append(draw)
            timings.setdefault(f"  of which: semi-join {label}", []).append(select)
            timings.setdefault(f"  of which: window on the subsample {label}", []).append(win)
            # the plan's own word per row as the coin too: kept iff word < 2**64 eta (exact for a power of two);
            # the kept words are i.i.d. uniform below the threshold, so ordering by them is a uniform matching
            thr = int(eta * 2.0**64)
            timings.setdefault(f"word per row as coin and key, {label}", []).append(
                gap_pass("t", rows, f" WHERE _key < {thr}::UBIGINT"))
    for _ in range(reps):
        timings.setdefault(f"full gap pass ({rows} rows)", []).append(gap_pass("t", rows))
        t0 = time.perf_counter()
        con.sql("SELECT x < 0, floor(log2(greatest(abs(x), 4.9e-324))), count(*) FROM t GROUP BY ALL").fetchall()
        timings.setdefault("one-scan (sign, exponent) histogram of all rows", []).append(time.perf_counter() - t0)
    from dpsql.core.batch import Batch

    b = Batch(np.random.default_rng(0).lognormal(0.0, 1.0, rows), np.array([0, rows], dtype=np.int64))
    for _ in range(reps):  # the list route's floor (core): the matching of every row vs of the subsample's
        for on in (False, True):
            with _floor(on):
                t0 = time.perf_counter()
                S.floor_exponent(b, 0.05, rng, np.array([float(rows)]))
                timings.setdefault(f"list route (core) floor_exponent, floor eps 0.05, {'ON' if on else 'OFF'}",
                                   []).append(time.perf_counter() - t0)
    out["speed"] = {"rows": rows, "load": os.getloadavg()[0], "t": [[k, min(v), max(v)] for k, v in timings.items()]}
    print(json.dumps(out["speed"], indent=1), flush=True)


def render(out: dict) -> str:
    lines = ["# The scale-free floor on a Poisson subsample (issue 17, `scalefree.FLOOR_SAMPLE`, on since 9425c78)", "",
             f"Generated by `benchmarks/floor_sample.py`; {machine()}.  `FLOOR_KEEP` = {S.FLOOR_KEEP:g} rows, "
             f"`EPS_SUB_MAX` = {S.EPS_SUB_MAX:g}.  ON and OFF run from the same seed; `=`: ON released exactly what "
             "OFF did (in (1): every group at rate 1; in (2) also where a discrete answer came out the same).", ""]
    if "floor" in out:
        lines += ["## (1) The released floor exponent (median route)", "",
                  "e: median released exponent; octaves below the IQR: 10th / 50th / 90th percentile of "
                  "`log2(IQR) - e`; fails: share of runs with `2**e > IQR`; eta: the floor's median rate (ON).", ""]
        rows = []
        for key, c in out["floor"].items():
            label, n, eps = key.split("|")
            if c["same"] and c["on"]["eta"] >= 1.0:
                rows.append([label, n, eps, "1", f"{c['off']['e']:g}", "=",
                             " / ".join(f"{g:.1f}" for g in c["off"]["gap"]), "=", f"{c['off']['fail']:.3f}", "="])
                continue
            gaps = [" / ".join(f"{g:.1f}" for g in c[s]["gap"]) for s in ("off", "on")]
            rows.append([label, n, eps, f"2^{int(math.log2(c['on']['eta']))}", f"{c['off']['e']:g}",
                         f"{c['on']['e']:g}", *gaps, f"{c['off']['fail']:.3f}", f"{c['on']['fail']:.3f}"])
        lines += [md_table(["dataset", "n", "eps", "eta", "e OFF", "e ON", "octaves below IQR OFF",
                            "octaves below IQR ON", "fails OFF", "fails ON"], rows), ""]
    if "e2e" in out:
        lines += ["## (2) End-to-end error, median |err| / IQR (99th percentile in brackets)", ""]
        rows = []
        for key, c in out["e2e"].items():
            label, n, eps = key.split("|")
            row = [label, n, eps]
            for name in AGGS:
                a = c[name]
                row.append("=" if a["same"] else "")
                row += [f"{a['off']:.3g} ({a['off99']:.3g})", f"{a['on']:.3g} ({a['on99']:.3g})"]
            rows.append(row)
        hdr = ["dataset", "n", "eps"]
        for name in AGGS:
            hdr += [f"{name} same", f"{name} OFF", f"{name} ON"]
        lines += [md_table(hdr, rows), ""]
        ratios = {name: [c[name]["on"] / c[name]["off"] for c in out["e2e"].values()
                         if c[name]["off"] > 0 and not c[name]["same"]] for name in AGGS}
        lines += ["Geometric mean of ON / OFF median error over the cells where they differ: " + ", ".join(
            f"{name} {math.exp(np.mean(np.log(r))):.3f} (range {min(r):.2f}-{max(r):.2f})"
            for name, r in ratios.items() if r), ""]
    if "noise" in out:
        r = {name: [c[name] for c in out["noise"].values() if c[name] is not None] for name in AGGS}
        sizes = ", ".join(sorted({k.split("|")[1] for k in out["noise"]}))
        lines += [f"The same ratio OFF / OFF from two seeds ({sizes} rows; 100 runs): " + ", ".join(
                      f"{name} {math.exp(np.mean(np.log(v))):.3f} (range {min(v):.2f}-{max(v):.2f})"
                      for name, v in r.items() if v) + ": the yardstick of seed noise.", ""]
    if "speed" in out:
        sp = out["speed"]
        lines += [f"## (3) DuckDB: the gap pass on {sp['rows']:.0e} rows, one group, vs on its Poisson subsample", "",
                  f"Seconds (fastest - slowest of the repetitions), load average {sp['load']:.1f} at the end.", ""]
        lines += [md_table(["step", "s"], [[k, f"{lo:.3f} - {hi:.3f}"] for k, lo, hi in sp["t"]]), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("floor", "e2e", "noise", "speed", "render"), required=True)
    ap.add_argument("--n", type=float, nargs="*", default=[1e5])
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    out = json.load(open(CACHE)) if os.path.exists(CACHE) else {}
    ds = [d for d in panel() if a.datasets is None or d.label in a.datasets]
    t0 = time.perf_counter()
    if a.part == "floor":
        part_floor(ds, out)
    elif a.part == "e2e":
        part_e2e(ds, [int(n) for n in a.n], out)
    elif a.part == "noise":
        part_noise(ds, int(a.n[0]), out)
    elif a.part == "speed":
        part_speed(int(a.rows), a.reps, out)
    with open(CACHE, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    text = render(out)
    with open(os.path.join(RESULTS, "floor_sample.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
