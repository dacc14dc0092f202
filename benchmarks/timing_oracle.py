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

#: the issue's attack: refused since the fan-out rule (E043) before any charge
ATTACK = ("SELECT dp_count(*, epsilon := 0.001) FROM visits v JOIN big b "
          "ON (v.name = '{name}' AND v.diag = 'hiv')")
#: the strongest variant the guard still accepts: the same predicate, with an equality on big's unique key
KEYED = ("SELECT dp_count(*, epsilon := 0.001) FROM visits v JOIN big b "
         "ON b.k = v.patient_id AND v.name = '{name}' AND v.diag = 'hiv'")


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


def _measure(path: Path, runs: int, quantum: float | None, query: str) -> tuple[dict[str, list[float]], str]:
    """Interleaved runs of ``query`` for a present and an absent name; the outcome (released or a code)."""
    times: dict[str, list[float]] = {"present": [], "absent": []}
    outcome = "released"
    # replay=False: every run is a fresh, charged release (a replay would time the release store, not the query)
    with dpsql.connect(path, analyst="eve", latency_quantum=quantum, replay=False) as s:
        for _ in range(runs):
            for cond, name in (("present", "target"), ("absent", "nobody")):
                t = time.perf_counter()
                try:
                    s.sql(query.format(name=name))
                except dpsql.PrivacyError as e:
                    outcome = f"refused {e.code}"
                times[cond].append(time.perf_counter() - t)
    return times, outcome


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
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--rows", type=float, default=1e6)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "hospital.duckdb"
        _make(path, int(args.rows))
        for label, query in (("attack (ON predicate only)", ATTACK), ("keyed join (b.k = v.patient_id)", KEYED)):
            for quantum in (None, 0.25):
                t, outcome = _measure(path, args.runs, quantum, query)
                p, a = statistics.median(t["present"]), statistics.median(t["absent"])
                sep = min(t["present"]) / max(t["absent"])
                rows.append(f"| {label} | {outcome} | {quantum or 'none'} | {p:.4f} | {a:.4f} | {p / a:.2f}x | "
                            f"{sep:.2f} | {_guess_accuracy(t):.0%} |")
                print(rows[-1], flush=True)
    text = "\n".join([
        "# Timing oracle (issue 13, finding 1)",
        "",
        f"`benchmarks/timing_oracle.py --runs {args.runs} --rows {int(args.rows)}`: {args.runs} interleaved runs per "
        "condition, one guarded session per row of the table, a declared public table of "
        f"{int(args.rows):,} rows joined to the protected rows with a predicate about one patient.",
        "",
        "| query | outcome | latency quantum (s) | median, present (s) | median, absent (s) | ratio | "
        "min present / max absent | one-run guess accuracy |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "A separation above 1 means every single run tells the bit; a guess accuracy near 50 % means the time "
        "tells nothing (with 2 x runs points, a fitted threshold reaches ~55-60 % on pure noise). Before the "
        "fan-out rule (E043) the attack was released: 0.248 s present vs 0.126 s absent without a quantum, "
        "100 % guessable from one run; 68 % with a 0.5 s quantum (20 runs, commit ee94b9b). Now it is refused "
        "from its text alone (both names alike, uncharged), and the keyed join, whose fan-out is one row, does "
        "the same work either way. The quantum pads each accepted answer, guard and charge included, to a "
        "whole number of quanta.",
    ]) + "\n"
    out = Path(__file__).resolve().parent / "results" / "timing_oracle.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
