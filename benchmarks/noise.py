"""Throughput of dpsql's noise samplers (OS CSPRNG / AES-CTR), against numpy's insecure generator.

    .venv/bin/python benchmarks/noise.py [--n 1000000]

Prints a markdown table (samples per second) and writes it to benchmarks/results/noise.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from dpsql.noise import Rng, discrete_gaussian, discrete_laplace, exponential_mechanism, gumbel


def _rate(fn, n: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, default=1e6)
    n = int(ap.parse_args().n)
    rng = Rng()
    insecure = np.random.default_rng()
    rows = [
        ("discrete Laplace, scale 10 (CSPRNG)", lambda k: discrete_laplace(10.0, rng, k)),
        ("discrete Laplace, scale 1e6 (CSPRNG)", lambda k: discrete_laplace(1e6, rng, k)),
        ("discrete Gaussian, sigma 10 (CSPRNG)", lambda k: discrete_gaussian(10.0, rng, k)),
        ("Gumbel (CSPRNG)", lambda k: gumbel(k, rng)),
        ("uint64 words (CSPRNG)", lambda k: rng.words(k)),
        ("exponential mechanism, one segment of k candidates", lambda k: exponential_mechanism(
            np.zeros(k), np.array([0, k]), rng)),
        ("numpy default_rng().laplace (INSECURE, reference)", lambda k: insecure.laplace(0, 10, k)),
    ]
    lines = ["| sampler | samples / s |", "|---|---|"]
    for name, fn in rows:
        lines.append(f"| {name} | {_rate(fn, n):,.0f} |")
    table = "\n".join(lines)
    print(table)
    out = Path(__file__).parent / "results" / "noise.md"
    out.write_text(f"# Noise throughput\n\n`benchmarks/noise.py --n {n:g}`, 2-core machine.\n\n{table}\n")


if __name__ == "__main__":
    main()
