"""One rows announcement per call (issue 17): the hybrid route's core announces ALL of a call's row parts once
(``summary.announce_classes``), in the order it asks for them, before its first ``batch``, whatever the route
classes its small groups fall in (dp_mean's / dp_sum's few, mid, low, high; dp_median's low and high; the
quantiles' wide rows and near classes; dp_var's one set).  Before, each class announced its own parts and
``DuckSource.will_batch`` started new pieces for each, so a class of two groups cost a scan of the source.

Checked here: (core) the announcement comes once, first, and lists exactly the requests in their order; the
releases are the list route's draw for draw (all rows, one part per class) and the same with or without the hook
(announcing draws nothing); (plans) on a table whose small groups fall in several classes of every aggregate, the
rows passes per call are those of one announcement (``floor(T / R) + 1`` for T announced rows, R =
``ROWS_PASS_ROWS``, parts far below R), and the releases are those of one shared rows pass."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from plan_statements import blank

from dpsql import plans
from dpsql.core import Params, get_method, summary, summary_mean, summary_var
from dpsql.core import asymmetric as asm
from dpsql.core.accounting import pure
from dpsql.core.batch import Batch
from dpsql.core.registry import budget_of
from dpsql.core.scalefree import mean_classes, median_classes, near_classes, run_iqr, run_mean, run_quantile, run_sum
from dpsql.noise import Rng

#: at eps 1 the released counts of these sizes fall in: dp_mean few / few / mid / low / low / high x3 (dp_sum: few
#: x3, low x2, high x3); dp_median low x5, high x3; p = 0.1 near low / mid / high x3, wide x3; p = 1/4 (dp_iqr)
#: near low / mid / high, wide x5
SIZES = (100, 180, 260, 450, 600, 900, 1200, 2000)
CALLS = {"med": "dp_median(x, epsilon := 1.0)", "q10": "dp_quantile(x, 0.1, epsilon := 1.0)",
         "iqr": "dp_iqr(x, epsilon := 1.0)", "mean": "dp_mean(x, epsilon := 1.0)", "s": "dp_sum(x, epsilon := 1.0)",
         "var": "dp_var(x, epsilon := 1.0)"}


def _lists(seed: int, copies: int = 4) -> list[np.ndarray]:
    r = np.random.default_rng(seed)
    sizes = r.permutation(np.repeat(SIZES, copies))
    return [r.lognormal(0, 2, n) * r.choice([-1, 1], n) if i % 3 else np.round(r.normal(5, 2, n))
            for i, n in enumerate(sizes)]


def _recording(cls: type) -> type:
    class Recording(cls):
        """Records the announcements and the requests, in order."""

        def __init__(self, batch: Batch, hook: bool = True) -> None:
            super().__init__(batch)
            self.log: list[tuple[str, list[np.ndarray]]] = []
            if not hook:
                self.will_batch = None  # announce_rows then skips it

        def will_batch(self, parts: list[np.ndarray], rows: list[float]) -> None:
            assert len(parts) == len(rows)
            self.log.append(("announce", [np.array(g, copy=True) for g in parts]))

        def batch(self, groups: np.ndarray) -> Batch:
            self.log.append(("batch", [np.array(groups, copy=True)]))
            return super().batch(groups)

    return Recording


MedianSrc, MeanSrc, VarSrc = (_recording(summary.BatchSource), _recording(summary_mean.MeanBatchSource),
                              _recording(summary_var.VarBatchSource))


def _core_runs(b: Batch, eps: float, seed: int, hook: bool = True) -> dict[str, tuple[np.ndarray, list]]:
    """Each aggregate through the core's hybrid route with every group read as rows."""
    out = {}
    for name, cls, fn in (("med", MedianSrc, lambda s, r: summary.median(s, eps, r, small=np.inf)),
                          ("q10", MedianSrc, lambda s, r: summary.quantile(s, eps, r, 0.1, small=np.inf)),
                          ("iqr", MedianSrc, lambda s, r: summary.iqr(s, eps, r, small=np.inf)),
                          ("mean", MeanSrc, lambda s, r: summary_mean.mean(s, eps, r, small=np.inf)),
                          ("s", MeanSrc, lambda s, r: summary_mean.sum(s, eps, r, small=np.inf)),
                          ("var", VarSrc, lambda s, r: summary_var.variance(s, eps, r, small=np.inf))):
        src = cls(b, hook)
        out[name] = (fn(src, Rng.seeded(seed)), src.log)
    return out


def _lists_route(b: Batch, eps: float, seed: int) -> dict[str, np.ndarray]:
    def run(f, kind: str, **kw) -> np.ndarray:  # noqa: ANN001
        params = Params(epsilon=eps, **kw)
        return f(b, budget_of(get_method(kind, "scalefree"), params), params, Rng.seeded(seed))

    return {"med": run(run_quantile, "quantile", p=0.5), "q10": run(run_quantile, "quantile", p=0.1),
            "iqr": run(run_iqr, "iqr"), "mean": run(run_mean, "mean"), "s": run(run_sum, "sum"),
            "var": asm.run_var(b, pure(eps), Params(), Rng.seeded(seed))}


@pytest.mark.parametrize("seed", [0, 1])
def test_one_announcement_first_in_request_order(seed: int) -> None:
    """Every call: exactly one announcement, before its first request, listing the requests in their order; the
    releases are the list route's (one part per class: ROWS_CHUNK above the table) draw for draw."""
    b = Batch.from_lists(_lists(seed))
    runs = _core_runs(b, 1.0, seed)
    want = _lists_route(b, 1.0, seed)
    for name, (got, log) in runs.items():
        assert np.array_equal(got, want[name], equal_nan=True), name
        kinds = [k for k, _ in log]
        assert kinds.count("announce") == 1 and kinds[0] == "announce", (name, kinds)
        asked = [g for k, gs in log[1:] for g in gs]
        assert len(asked) == len(log[0][1]), name
        assert all(np.array_equal(a, g) for a, g in zip(asked, log[0][1], strict=True)), name


@pytest.mark.parametrize("seed", [2, 3])
def test_announcing_draws_nothing_in_parts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small core parts (several per class): the same releases with and without the hook, one announcement."""
    monkeypatch.setattr(summary, "ROWS_CHUNK", 700.0)
    b = Batch.from_lists(_lists(seed))
    hooked, bare = _core_runs(b, 1.0, seed), _core_runs(b, 1.0, seed, hook=False)
    for name in hooked:
        assert np.array_equal(hooked[name][0], bare[name][0], equal_nan=True), name
        assert [k for k, _ in hooked[name][1]].count("announce") == 1, name
        assert [k for k, _ in bare[name][1]].count("announce") == 0, name
        assert len(hooked[name][1][0][1]) > 3, name  # several parts, several classes


def _table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    lists = _lists(seed)
    g = np.repeat(np.arange(len(lists)), [v.size for v in lists])
    return g, np.concatenate(lists)


def _run(monkeypatch: pytest.MonkeyPatch, g: np.ndarray, x: np.ndarray, pass_rows: float, seed: int
         ) -> tuple[pa.Table, list[str], list[tuple[int, float, int]], list[np.ndarray]]:
    """The query through the plans (every group small), with its statements, each announcement as (source,
    announced rows, pieces) and the released counts."""
    monkeypatch.setattr(plans, "SMALL_ROWS", 1e5)
    monkeypatch.setattr(plans, "ROWS_PASS_ROWS", pass_rows)
    monkeypatch.setattr(summary, "ROWS_CHUNK", 500.0)  # the core's parts: far below a piece
    monkeypatch.setattr(summary_var, "ROWS_CHUNK", 300.0)
    con = duckdb.connect(config={"threads": 1})
    con.register("t", pa.table({"g": g, "x": x}))
    statements: list[str] = []
    announced: list[tuple[int, float, int]] = []
    n_hats: list[np.ndarray] = []
    fetch, will, count = plans._fetch, plans.DuckSource.will_batch, plans._released_count

    def counting(c: duckdb.DuckDBPyConnection, q: str, params: dict | None = None) -> pa.Table:
        statements.append(blank(q))
        return fetch(c, q, params)

    def spying(self: plans.DuckSource, parts: list[np.ndarray], rows: list[float]) -> None:
        will(self, parts, rows)
        plan = getattr(self, "_pieces", None)
        announced.append((id(self), float(np.sum(rows)), -1 if plan is None else len(plan[0])))

    def released(src: plans.DuckSource, call: plans.Call, rng: Rng) -> np.ndarray:
        n_hats.append(count(src, call, rng))
        return n_hats[-1]

    monkeypatch.setattr(plans, "_fetch", counting)
    monkeypatch.setattr(plans.DuckSource, "will_batch", spying)
    monkeypatch.setattr(plans, "_released_count", released)
    try:
        got = plans.run(con, f"SELECT g, {', '.join(f'{c} AS {n}' for n, c in CALLS.items())} FROM t GROUP BY g",
                        Rng.seeded(seed))
    finally:
        monkeypatch.setattr(plans, "_fetch", fetch)
        monkeypatch.setattr(plans.DuckSource, "will_batch", will)
        monkeypatch.setattr(plans, "_released_count", count)
    return got, statements, announced, n_hats


def _col(t: pa.Table, name: str) -> np.ndarray:
    order = np.argsort(t.column("g").to_numpy())
    return t.column(name).to_numpy(zero_copy_only=False).astype(float)[order]


def _classes_with_rows(name: str, n_hat: np.ndarray) -> int:
    if name in ("mean", "s"):
        return sum(idx.size > 0 for _, idx, _ in mean_classes(n_hat, 1.0, "mean" if name == "mean" else "sum"))
    if name == "med":
        return len(median_classes(n_hat, 1.0))
    if name == "var":
        return 1
    p = 0.1 if name == "q10" else 0.25
    wide = n_hat * p >= 100.0
    return int(wide.any()) + len(near_classes(n_hat[~wide & (n_hat >= 60.0)], 1.0))


@pytest.mark.parametrize("seed", [4, 5])
def test_plans_one_rows_pass_per_piece_of_the_call(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six calls whose small groups fall in several classes each, rows in pieces of 2**14 released rows (each
    call's ~2.3e4): one announcement per call, floor(T / R) + 1 = 2 rows passes per call (per class before: at
    least one per class, 3-5 for most calls), and the releases of one shared rows pass, bit for bit."""
    g, x = _table(seed)
    whole, st_whole, ann_whole, _ = _run(monkeypatch, g, x, 1e12, seed)
    cut, st_cut, ann_cut, n_hats = _run(monkeypatch, g, x, 2.0**14, seed)
    assert sum("_rows_x" in q for q in st_whole) == 1
    for name in CALLS:
        assert np.array_equal(_col(whole, name), _col(cut, name), equal_nan=True), name
    # one announcement per call (the var's through DuckVarSource), each cut into floor(T / R) + 1 pieces
    assert len(ann_cut) == len({a[0] for a in ann_cut}) == len(CALLS)
    assert all(pieces == int(rows // 2.0**14) + 1 == 2 for _, rows, pieces in ann_cut), ann_cut
    assert sum("_rows_x" in q for q in st_cut) == sum(p for _, _, p in ann_cut) == 2 * len(CALLS)
    # the table does mix classes: every quantile-like call and the mean / sum have rows in >= 2 of them
    mixed = {name: _classes_with_rows(name, n) for name, n in zip(CALLS, n_hats, strict=True)}
    assert all(mixed[name] >= 2 for name in CALLS if name != "var"), mixed
    assert mixed["mean"] >= 3 and mixed["q10"] >= 3, mixed
