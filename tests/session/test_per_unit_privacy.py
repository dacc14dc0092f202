"""Issue 15, item 4, end to end: a statistical privacy test of per-unit pre-aggregation in guarded sessions.

Two real DuckDB files that differ by ONE UNIT WITH FIVE ROWS (one of them extreme: 1e300), the same guarded
query on each, and the empirical lower bound on epsilon (``dpsql.testing.empirical_epsilon``, Clopper-Pearson
with Bonferroni; alpha 0.001, because a session's noise comes from the OS CSPRNG and cannot be seeded: a
correct mechanism fails with probability at most 0.1 %) from the released values, checked against the
epsilon the guard charged.

Many runs in few queries: ``rep`` is a column with declared public keys 0..R-1 and every rep holds its own
copy of the data (60 units x 3 rows; the neighbour adds, in each rep, a unit with 5 rows).  The per-unit
relation keeps its unit's rep as ``min(rep)``, which keeps the declared keys, so ``GROUP BY rep`` releases R
groups, each an independent run of the mechanism on D or on D + one unit (groups compose in parallel: one
unit is in one rep).  The guard charges epsilon x 1 for it (one row per unit); were the five rows to reach
the aggregate, the count would move by 5 and the control below shows the test sees that.
"""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.testing import empirical_epsilon

pytestmark = [
    pytest.mark.real_guard,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("dpsql.guard") is None, reason="needs dpsql.guard"),
]

R = 1500  # groups per query: runs per side
ALPHA = 1e-6  # the bound exceeds the true loss with probability <= ALPHA: CI runs these once, unseeded
UNITS = 60  # units per rep (n * eps = 60 lets the default dp_sum answer)
EXTREME = [1e300, 50.0, 50.0, 50.0, 50.0]  # the added unit's five rows


def _make(path: Path, neighbour: bool) -> Path:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE visits AS SELECT r.i * 1000 + u.j AS uid, r.i AS rep, "
                f"(10 + (u.j * 37 + k.k * 11) % 80)::DOUBLE AS cost FROM range({R}) r(i), range({UNITS}) u(j), "
                "range(3) k(k)")
    if neighbour:
        rows = ", ".join(f"({c!r})" for c in EXTREME)
        con.execute(f"INSERT INTO visits SELECT r.i * 1000 + 999, r.i, x.c FROM range({R}) r(i), "
                    f"(VALUES {rows}) x(c)")
    con.close()
    adm = dpsql.admin(path)
    adm.protect("visits", privacy_unit="uid", max_rows_per_unit=5)
    adm.public_keys("visits", "rep", list(range(R)))
    adm.grant("alice", epsilon=1000)
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("per_unit_privacy")
    return _make(base / "d.duckdb", False), _make(base / "d1.duckdb", True)


def _released(db: Path, sql: str, cost: str) -> np.ndarray:
    with dpsql.connect(db, analyst="alice", replay=False) as s:
        r = s.sql(sql)
        assert r.charged == Decimal(cost)
        assert len(r.rows) == R
        return np.array([np.nan if v is None else float(v) for _, v in r.rows])


PER_UNIT = "(SELECT uid, min(rep) AS rep, sum(cost) AS total FROM visits GROUP BY uid)"


@pytest.mark.parametrize(("release", "epsilon"), [
    ("dp_count(*, epsilon := 1)", 1.0),
    ("dp_sum(total, epsilon := 1)", 1.0),
    ("dp_mean(total, epsilon := 1, lower := 0, upper := 1000)", 1.0),
])
def test_one_unit_with_five_rows_costs_epsilon_once(pair: tuple[Path, Path], release: str, epsilon: float,
                                                    record_property) -> None:
    sql = f"SELECT rep, {release} AS v FROM {PER_UNIT} GROUP BY rep"
    a, b = (_released(db, sql, str(epsilon)) for db in pair)
    assert np.isfinite(a).mean() > 0.5 and np.isfinite(b).mean() > 0.5  # mostly answered: not vacuous
    eps = empirical_epsilon(a, b, alpha=ALPHA)
    record_property("empirical_epsilon", eps)
    print(f"{release}: empirical epsilon {eps:.3f} <= claimed {epsilon}")
    assert eps <= epsilon


def test_the_test_sees_five_rows_counted_at_the_price_of_one(pair: tuple[Path, Path]) -> None:
    """Control: the raw rows, counted per rep at epsilon 1 per row (the guard charges 5 for it: k = 5), give an
    empirical epsilon far above 1.  A per-unit relation that let a unit's five rows through at cost 1 would
    fail the test above the same way."""
    sql = "SELECT rep, dp_count(*, epsilon := 1) AS v FROM visits GROUP BY rep"
    a, b = (_released(db, sql, "5") for db in pair)
    eps = empirical_epsilon(a, b, alpha=ALPHA)
    print(f"raw rows: empirical epsilon {eps:.3f} (true loss 5)")
    assert eps > 1.5
