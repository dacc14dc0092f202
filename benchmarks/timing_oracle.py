"""Issue 13, finding 1: is a guarded session's running time a 1-bit oracle on one person's data?

    .venv/bin/python benchmarks/timing_oracle.py [--runs 30] [--rows 1000000]

A protected ``visits`` table (10,000 patients, one of them ``name = 'target'`` with ``diag = 'hiv'``) and a
declared public table ``big`` of ``--rows`` rows.  The attack joins ``big`` to the protected rows ON a
predicate about one person only; when the predicate holds the join produces ``--rows`` rows (slow), when it
does not it produces none (fast).  The DP answer is noise either way; the time is not.  Runs the query for a
present and an absent name, interleaved, without and with a session latency quantum, and prints the
per-condition medians, the separation (min of the slow runs over max of the fast ones) and the accuracy of a
one-run threshold guess.  Writes ``benchmarks/results/timing_oracle.md``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

import dpsql

QUERY = ("SELECT dp_count(*, epsilon := 0.001) FROM visits v JOIN big b "
         "ON (v.name = '{name}' AND v.diag = 'hiv')")


def _make(path: Path, rows: int) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE visits AS SELECT i AS patient_id, CASE WHEN i = 7 THEN 'target' ELSE 'p' || i::VARCHAR "
                "END AS name, ['A','B','C'][i % 3 + 1] AS clinic, (i % 100)::DOUBLE AS cost, "
                "CASE WHEN i = 7 THEN 'hiv' ELSE 'flu' END AS diag FROM range(10000) r(i)")
    con.execute(f"CREATE TABLE big AS SELECT i AS k FROM range({int(rows)}) r(i)")
    con.close()
    adm = dpsql.admin(path)
    adm.protect("visits", privacy_unit="patient_id", max_rows_per_unit=3)
    adm.public_keys("visits", "clinic", ["A", "B", "C"])
    adm.public_table("big")
    adm.grant("eve", epsilon=10_000)


def _measure(path: Path, runs: int, quantum: float | None) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"present": [], "absent": []}
    with dpsql.connect(path, analyst="eve", latency_quantum=quantum) as s:
        s.sql(QUERY.format(name="warm-up"))
        for _ in range(runs):
            for cond, name in (("present", "target"), ("absent", "nobody")):
                t = time.perf_counter()
                s.sql(QUERY.format(name=name))
                times[cond].append(time.perf_counter() - t)
    return times


def _guess_accuracy(times: dict[str, list[float]]) -> float:
    """Best single-threshold classifier on one run (an optimistic attacker: the threshold is fitted)."""
    pts = sorted([(t, 1) for t in times["present"]] + [(t, 0) for t in times["absent"]])
    n = len(pts)
    best = 0.5
    for i in range(n + 1):  # guess "present" above position i
        correct = sum(1 for _, y in pts[:i] if y == 0) + sum(1 for _, y in pts[i:] if y == 1)
        best = max(best, correct / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rows", type=float, default=1e6)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "hospital.duckdb"
        _make(path, int(args.rows))
        for quantum in (None, 0.5, 1.0):
            t = _measure(path, args.runs, quantum)
            p, a = statistics.median(t["present"]), statistics.median(t["absent"])
            sep = min(t["present"]) / max(t["absent"])
            rows.append(f"| {quantum or 'none'} | {p:.3f} | {a:.3f} | {p / a:.2f}x | {sep:.2f} | "
                        f"{_guess_accuracy(t):.0%} |")
            print(rows[-1], flush=True)
    text = "\n".join([
        "# Timing oracle (issue 13, finding 1)",
        "",
        f"`benchmarks/timing_oracle.py --runs {args.runs} --rows {int(args.rows)}`: {args.runs} interleaved runs per "
        "condition, one guarded session per row of the table, a declared public table of "
        f"{int(args.rows):,} rows joined ON a predicate about one patient.",
        "",
        "| latency quantum (s) | median, present (s) | median, absent (s) | ratio | min present / max absent "
        "| one-run guess accuracy |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "A separation above 1 means every single run tells the bit; a guess accuracy near 50 % means the time "
        "tells nothing. The quantum pads each answer to a whole number of quanta; it hides the bit only while the "
        "slow case stays inside the first quantum.",
    ]) + "\n"
    out = Path(__file__).resolve().parent / "results" / "timing_oracle.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
