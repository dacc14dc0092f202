"""The hybrid route's rows in pieces (issue 17, memory): above ``plans.ROWS_PASS_ROWS`` released rows the small
groups of a call come back one piece at a time (``DuckSource.will_batch``), in the order the core's list code runs
them.  The pieces change no draw (the same releases under a seed as one shared rows pass), their number and
statements are functions of the released counts (the same statements whatever the values), and each call reads
every one of its row groups once, at most one piece held at a time."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from plan_statements import blank

from dpsql import plans
from dpsql.core import summary, summary_var
from dpsql.noise import Rng

CALLS = ("dp_median(x, epsilon := 1.0) AS med, dp_quantile(x, 0.1, epsilon := 1.0) AS q10, "
         "dp_iqr(x, epsilon := 2.0) AS iqr, dp_mean(x, epsilon := 1.0) AS mean, dp_sum(x, epsilon := 1.0) AS s, "
         "dp_var(x, epsilon := 1.0) AS var, dp_stddev(x, epsilon := 2.0) AS sd")
NAMES = ("med", "q10", "iqr", "mean", "s", "var", "sd")
WILD = [1e300, -1e300, np.inf, -np.inf, 0.0, -0.0, 2.0**70, 3.0, 5e-324, 2.0**-1060, 9.3e18]


def _table(values: str = "tame", seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    sizes = np.concatenate([r.integers(5, 400, 40), [3000, 4000]])
    g = np.repeat(np.arange(sizes.size), sizes)
    x = r.lognormal(0, 2, g.size) * r.choice([-1, 1], g.size) if values == "tame" else r.choice(WILD, g.size)
    return g, x


def _run(monkeypatch: pytest.MonkeyPatch, g: np.ndarray, x: np.ndarray, pass_rows: float, seed: int = 5
         ) -> tuple[pa.Table, list[str], list[int]]:
    """The query through the plans (SMALL_ROWS 1000: the 3000- and 4000-row groups take the passes), with the
    statements (registered names blanked) and the group count of each rows pass."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 1000.0)
    monkeypatch.setattr(plans, "ROWS_PASS_ROWS", pass_rows)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 600.0)  # the core's parts: a few groups each
    monkeypatch.setattr(summary_var, "ROWS_CHUNK", 300.0)
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"g": g, "x": x}))
    statements: list[str] = []
    pieces: list[int] = []
    fetch, batch = plans._fetch, plans.DuckSource._batch

    def counting(c: duckdb.DuckDBPyConnection, q: str, params: dict | None = None) -> pa.Table:
        statements.append(blank(q))
        return fetch(c, q, params)

    def sized(self: plans.DuckSource, groups: np.ndarray):  # noqa: ANN202
        pieces.append(int(groups.size))
        return batch(self, groups)

    monkeypatch.setattr(plans, "_fetch", counting)
    monkeypatch.setattr(plans.DuckSource, "_batch", sized)
    try:
        got = plans.run(con, f"SELECT g, {CALLS} FROM t GROUP BY g", Rng.seeded(seed))
    finally:
        monkeypatch.setattr(plans, "_fetch", fetch)
        monkeypatch.setattr(plans.DuckSource, "_batch", batch)
    return got, statements, pieces


def _col(t: pa.Table, name: str) -> np.ndarray:
    order = np.argsort(t.column("g").to_numpy())
    return t.column(name).to_numpy(zero_copy_only=False).astype(float)[order]


@pytest.mark.parametrize("seed", [5, 6])
def test_pieces_give_the_releases_of_one_rows_pass(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven calls on one value: rows in pieces of ~1500 released rows (each call its own pieces, one at a time)
    or in one rows pass for all calls: the same releases, bit for bit (the pieces reorder no draw)."""
    g, x = _table()
    whole, st_whole, p_whole = _run(monkeypatch, g, x, 1e12, seed)
    cut, st_cut, p_cut = _run(monkeypatch, g, x, 1500.0, seed)
    assert sum("_rows_x" in q for q in st_whole) == 1 and len(p_whole) == 1
    assert sum("_rows_x" in q for q in st_cut) == len(p_cut) > 2 * len(NAMES)
    for name in NAMES:
        assert np.array_equal(_col(whole, name), _col(cut, name), equal_nan=True), name
    # each call reads each of its row groups once: at most the 40 small groups per call in all its pieces
    assert sum(p_cut) <= 40 * len(NAMES)


def test_pieces_statements_do_not_depend_on_the_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sizes and generator, tame or extreme values: the same statements, the pieces' rows passes
    included (their number and their groups are functions of the released counts)."""
    g, x = _table("tame")
    _, wild_x = _table("wild")
    a = _run(monkeypatch, g, x, 1500.0)
    b = _run(monkeypatch, g, wild_x, 1500.0)
    assert a[1] == b[1] and a[2] == b[2]
    assert sum("_rows_x" in q for q in a[1]) > len(NAMES)


def test_a_part_above_the_piece_size_is_a_piece_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """ROWS_PASS_ROWS below every part: one rows pass per part the core asks for, the same releases."""
    g, x = _table()
    whole = _run(monkeypatch, g, x, 1e12)[0]
    tiny, st, pieces = _run(monkeypatch, g, x, 1.0)
    assert len(pieces) == sum("_rows_x" in q for q in st) > 40
    for name in NAMES:
        assert np.array_equal(_col(whole, name), _col(tiny, name), equal_nan=True), name
