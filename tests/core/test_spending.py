"""Every registered method spends exactly what it declares (issue 16).

Each run is metered (:mod:`dpsql.core.spending`): the mechanisms charge what their noise costs, and the total by
sequential composition must equal :func:`~dpsql.core.registry.budget_of` of the call.  Small data, several group
shapes, with and without bounds, with and without an interval, pure and zCDP budgets, subsampled (eps < 1) and
not.  Group routes are decided per group from released counts (parallel composition over groups), but the meter
sums every call, so each group is metered in a batch of its own (a batch mixing routes, e.g. a large group and an
empty one whose noisy count lands on dp_mean's small-count route, is charged for both).  Metering changes no
release (checked here too, on the whole batch).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from dpsql.core import AGGREGATES, Batch, Params, methods, run, run_interval
from dpsql.core.registry import budget_of, get_method
from dpsql.core.spending import meter
from dpsql.noise import Rng

_rs = np.random.default_rng(16)
#: each group is metered alone (see the module docstring); empty and tiny groups answer NULL on some routes
SHAPES = {
    "one": [_rs.normal(50.0, 10.0, 2000)],
    "three": [_rs.normal(-3.0, 1.0, 2000), _rs.lognormal(2.0, 1.0, 2000), _rs.normal(1e6, 1e3, 2000)],
    "small": [_rs.normal(10.0, 2.0, 100), _rs.normal(12.0, 2.0, 100)],
    "tiny": [[1.0, 2.0, 2.0], [3.0]],
    "empty": [None],
}
BOUNDS = [(None, None), (-10.0, 80.0), (0.0, None), (None, 60.0)]

#: methods that may spend less than declared on some routes, with the reason (an accuracy cost, never a privacy
#: one): they are checked for spent <= declared there
UNDERSPEND: dict[tuple[str, str], str] = {
    # zCDP smooth-sensitivity means: the bucket step (seed 003's IQR bound: two adaptive SVTs at eps_b / 2) is
    # declared as one eps_b-DP step, eps_b**2 / 2 = its share of rho, but two (eps_b / 2)-DP steps compose to
    # eps_b**2 / 4 in zCDP: the step spends half its share (2.5 % of rho with SPLIT_ZCDP).
    ("mean", "trimmed_lln"): "bucket: two SVTs compose to half the bucket's share of rho",
    ("mean", "trimmed_uln"): "bucket: two SVTs compose to half the bucket's share of rho",
    ("mean", "trimmed_arsinh"): "bucket: two SVTs compose to half the bucket's share of rho",
}


def _budgets(notion: str) -> list[dict]:
    if notion == "pure":
        return [dict(epsilon=0.5), dict(epsilon=2.0)]
    return [dict(rho=0.05), dict(rho=2.0), dict(epsilon=1.0, delta=1e-6)]


def _cases():
    for agg in AGGREGATES:
        for name, m in methods(agg).items():
            for budget in _budgets(m.notion):
                for lo, hi in BOUNDS:
                    if m.requires_bounds and (lo is None or hi is None):
                        continue
                    for p in ([0.5, 0.25] if agg == "quantile" else [None]):
                        for level in ([None, 0.9] if m.interval else [None]):
                            yield pytest.param(agg, name, Params(lower=lo, upper=hi, p=p, level=level, **budget),
                                               id=f"{agg}-{name}-{budget}-{lo}-{hi}-{p}-{level}")


def _run(agg: str, name: str, batch: Batch, params: Params, seed: int) -> np.ndarray:
    b = Batch(batch.values.copy(), batch.offsets.copy())
    if params.level is None:
        return run(agg, b, params, method=name, rng=Rng.seeded(seed))
    return np.concatenate(run_interval(agg, b, params, method=name, rng=Rng.seeded(seed)))


@pytest.mark.parametrize(("agg", "name", "params"), list(_cases()))
def test_spent_equals_declared(agg: str, name: str, params: Params):
    m = get_method(agg, name)
    declared = budget_of(m, params)
    notion = declared.notion
    want = declared.epsilon if notion == "pure" else declared.rho
    bad = []
    for shape, lists in SHAPES.items():
        batch = Batch.from_lists(lists)
        seed = zlib.crc32(f"{agg} {name} {params} {shape}".encode())
        with meter():
            out = _run(agg, name, batch, params, seed)
        assert out.tobytes() == _run(agg, name, batch, params, seed).tobytes(), "metering changed a release"
        for g, values in enumerate(lists):
            with meter() as spent:
                out = _run(agg, name, Batch.from_lists([values]), params, seed + g)
            got = spent.spent(notion)
            released = bool(np.any(~np.isnan(out)))
            if math.isclose(got, want, rel_tol=1e-9):
                continue
            if got < want and (not released or (agg, name) in UNDERSPEND):
                continue  # the group is NULL: the steps after the count were not needed
            bad.append(f"{shape}[{g}]: spent {got!r}, declared {want!r} ({spent.describe()})")
    assert not bad, "\n".join(bad)


def test_the_meter_sees_spending_and_its_scopes():
    from dpsql.core.primitives import noisy_count_of
    from dpsql.core.spending import stable, subsampled

    n = np.array([5, 7])
    with meter() as m:
        noisy_count_of(n, 0.25, Rng.seeded(1))
        with subsampled(0.5, "sub"):
            noisy_count_of(n, 0.5, Rng.seeded(2))
            noisy_count_of(n, 0.25, Rng.seeded(3))
        with stable(3, "shifted"):
            noisy_count_of(n, 0.1, Rng.seeded(4))
    assert math.isclose(m.spent("pure"), 0.25 + math.log1p(0.5 * math.expm1(0.75)) + 0.3)
    assert math.isclose(m.spent("zcdp"), 0.25**2 / 2 + math.log1p(0.5 * math.expm1(0.75)) ** 2 / 2 + 0.3**2 / 2)
    with meter() as m:  # nothing outside a meter block is recorded, and a metered draw is the same draw
        a = noisy_count_of(n, 0.5, Rng.seeded(9))
    assert a.tobytes() == noisy_count_of(n, 0.5, Rng.seeded(9)).tobytes() and len(m.charges) == 1
