"""The scale-free floor on a Poisson subsample (``scalefree.FLOOR_SAMPLE``).

Off (or on with every group at rate 1) nothing changes, draw for draw; on, the floor of a large group runs on a
Poisson subsample at a rate fixed by the released count, at the amplified epsilon: it still costs its share
(metered) and passes the statistical privacy test on extreme neighbours, at the smallest and largest epsilon.
"""

import math
import zlib

import numpy as np
import pytest

from dpsql.core import Batch, Params, run, run_interval
from dpsql.core import scalefree as S
from dpsql.core.helpers import amplified
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON, budget_of, get_method
from dpsql.core.spending import meter
from dpsql.noise import Rng
from dpsql.testing import EXTREME_NEIGHBOURS, empirical_epsilon

CALLS = [("quantile", 0.5), ("quantile", 0.9), ("iqr", None), ("mean", None), ("sum", None)]


def _groups(seed: int) -> list[np.ndarray]:
    r = np.random.default_rng(seed)
    sizes = r.integers(0, 1200, 300)
    kinds = [lambda k: r.normal(1e6, 10.0, k), lambda k: r.lognormal(0.0, 2.0, k),
             lambda k: r.integers(0, 10, k).astype(float), lambda k: r.pareto(1.5, k)]
    return [kinds[i % 4](int(k)) for i, k in enumerate(sizes)]


def _release(agg: str, p: float | None, lists: list, eps: float, seed: int, level: float | None = None) -> bytes:
    params = Params(epsilon=eps, p=p, level=level)
    b = Batch.from_lists(lists)
    if level is None:
        return run(agg, b, params, method="scalefree", rng=Rng.seeded(seed)).tobytes()
    return b"".join(a.tobytes() for a in run_interval(agg, b, params, method="scalefree", rng=Rng.seeded(seed)))


@pytest.mark.parametrize(("agg", "p"), CALLS)
@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_on_at_rate_one_releases_what_off_releases(monkeypatch: pytest.MonkeyPatch, agg, p, eps):
    """Groups of at most ~1,200 rows with FLOOR_KEEP far above: every group at rate 1, today's draws."""
    lists = _groups(zlib.crc32(f"{agg}{p}{eps}".encode()))
    seed = zlib.crc32(f"r{agg}{p}{eps}".encode())
    monkeypatch.setattr(S, "FLOOR_SAMPLE", False)
    off = [_release(agg, p, lists, eps, seed, lv) for lv in (None, 0.9)]
    monkeypatch.setattr(S, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(S, "FLOOR_KEEP", 1e6)
    assert [_release(agg, p, lists, eps, seed, lv) for lv in (None, 0.9)] == off


def test_rates_are_powers_of_two_from_the_released_count():
    n_hat = np.array([-5.0, 0.0, 10.0, S.FLOOR_KEEP, 4 * S.FLOOR_KEEP, 1e7, 1e12, np.inf])
    for eps in (MIN_EPSILON, 0.005, 0.05, 1.0, MAX_EPSILON):
        eta = S.floor_rate(n_hat, eps)
        assert np.all((eta > 0) & (eta <= 1)) and np.all(np.frexp(eta)[0] == 0.5)  # powers of two
        assert np.all(eta[:4] == 1.0)
        assert np.all(np.diff(eta) <= 0)
        eta_min = 1.0 if eps >= S.EPS_SUB_MAX else math.expm1(eps) / math.expm1(S.EPS_SUB_MAX)
        big = np.isfinite(n_hat) & (n_hat > 0)
        want = np.minimum(np.maximum(S.FLOOR_KEEP / n_hat[big], eta_min), 1.0)
        assert np.all((eta[big] >= want) & (eta[big] < 2 * want + (want == 1.0)))
        assert np.all(np.array([amplified(eps, e) for e in eta]) <= max(S.EPS_SUB_MAX * (1 + 1e-12), eps))


_FLOOR_PAIRS = ("one_at_+1e300", "one_at_-1e300", "one_at_+inf", "one_at_-inf", "hugeint_min", "bigint_max",
                "far_outlier_1e15", "equal_plus_far", "empty_vs_one")
_FLOOR_CELLS = ([(pair, 1.0, 1e9) for pair in _FLOOR_PAIRS]
                + [(pair, e, 1e9) for pair in ("one_at_+inf", "equal_plus_far") for e in (MIN_EPSILON, MAX_EPSILON)]
                + [("far_outlier_1e15", 0.3, 200.0)])


@pytest.mark.parametrize(("pair", "eps", "n_hat"), _FLOOR_CELLS)
def test_subsampled_floor_privacy(monkeypatch: pytest.MonkeyPatch, pair, eps, n_hat):
    """The floor alone at the amplified epsilon on a subsample (a public n_hat forces the rate: 1/8 at eps 1,
    ~eps / 11 at the floor, 1 at the ceiling; n_hat = 200 with FLOOR_KEEP = 16: 1/8 again), 3000 runs a side."""
    monkeypatch.setattr(S, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(S, "FLOOR_KEEP", 16.0)
    d, d2 = EXTREME_NEIGHBOURS[pair]
    runs = 3000
    rng = Rng.seeded(zlib.crc32(f"floor{pair}{eps}{n_hat}".encode()))
    eta = S.floor_rate(np.array([n_hat]), eps)[0]
    assert eta < 1.0 or eps == MAX_EPSILON
    a, b = (S.floor_exponent(Batch.from_lists([x] * runs), eps, rng, np.full(runs, n_hat)).astype(float)
            for x in (d, d2))
    assert empirical_epsilon(a, b) <= eps


_SMALL = list(np.random.default_rng(6).normal(1e6, 10.0, 1500))
_TIES = list(np.random.default_rng(7).integers(0, 10, 450).astype(float))
_E2E = {"wide_outlier": (_SMALL, _SMALL + [-1e300]), "ties_inf": (_TIES, _TIES + [math.inf])}


@pytest.mark.parametrize("case", list(_E2E))
@pytest.mark.parametrize(("agg", "p"), [("quantile", 0.5), ("quantile", 0.9), ("mean", None)])
def test_subsampled_floor_end_to_end_privacy(monkeypatch: pytest.MonkeyPatch, agg, p, case):
    """Whole releases with the floor subsampled (FLOOR_KEEP = 32: groups of 450-1500 rows at rates 1/8 to
    1/32), eps 1, 2000 runs a side."""
    monkeypatch.setattr(S, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(S, "FLOOR_KEEP", 32.0)
    d, d2 = _E2E[case]
    rng = Rng.seeded(zlib.crc32(f"e2e{agg}{p}{case}".encode()))
    params = Params(epsilon=1.0, p=p)
    a, b = (run(agg, Batch.from_lists([x] * 2000), params, method="scalefree", rng=rng) for x in (d, d2))
    assert empirical_epsilon(a, b) <= 1.0


@pytest.mark.parametrize(("agg", "p"), CALLS)
@pytest.mark.parametrize("level", [None, 0.9])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_subsampled_floor_spends_what_is_declared(monkeypatch: pytest.MonkeyPatch, agg, p, level, eps):
    """One group of 3,000 rows at a rate below 1 (FLOOR_KEEP = 64): the meter sums to the declared epsilon."""
    monkeypatch.setattr(S, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(S, "FLOOR_KEEP", 64.0)
    x = np.random.default_rng(3).lognormal(1.0, 1.0, 3000)
    params = Params(epsilon=eps, p=p, level=level)
    want = budget_of(get_method(agg, "scalefree"), params).epsilon
    with meter() as m:
        _release(agg, p, [x], eps, 5, level)
    assert "Poisson" in m.describe()
    assert math.isclose(m.spent("pure"), want, rel_tol=1e-9), m.describe()


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_var_interval_with_the_subsampled_floor(monkeypatch: pytest.MonkeyPatch, eps):
    """dp_var_ci's upper end reads the floor too (after its released count): metered, it spends what it
    declares."""
    x = np.random.default_rng(4).lognormal(1.0, 1.0, 3000)
    params = Params(epsilon=eps, level=0.9)
    want = budget_of(get_method("var", "asymmetric"), params).epsilon
    monkeypatch.setattr(S, "FLOOR_SAMPLE", False)
    off = np.concatenate(run_interval("var", Batch.from_lists([x]), params, "asymmetric", Rng.seeded(8)))
    monkeypatch.setattr(S, "FLOOR_SAMPLE", True)
    monkeypatch.setattr(S, "FLOOR_KEEP", 64.0)
    with meter() as m:
        on = np.concatenate(run_interval("var", Batch.from_lists([x]), params, "asymmetric", Rng.seeded(8)))
    assert "Poisson" in m.describe()
    assert math.isclose(m.spent("pure"), want, rel_tol=1e-9), m.describe()
    assert on[:2].tobytes() == off[:2].tobytes()  # the value and the lower end are drawn before the floor
