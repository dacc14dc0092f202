"""Clipped baseline (user bounds): privacy, including bad bounds, accuracy, degenerate data."""

import zlib

import numpy as np
import pytest

from dpsql.core import Batch, ParameterError, Params, privacy_cost, run
from dpsql.noise import Rng
from dpsql.testing import empirical_epsilon

AGGS = [("sum", {}), ("mean", {}), ("var", {}), ("quantile", {"p": 0.5}), ("quantile", {"p": 0.9}), ("iqr", {})]
IDS = [f"{a}{p.get('p', '')}" for a, p in AGGS]

_base = list(np.random.default_rng(0).normal(10.0, 2.0, 150))
NEIGHBOURS = {
    "empty_vs_one": ([], [3.0]),
    "outlier_added": (_base, _base + [1e9]),
    "median_added": (_base, _base + [float(np.median(_base))]),
}
GOOD = {"lower": 0.0, "upper": 20.0}
BAD = {"lower": 100.0, "upper": 200.0}  # every value lies below the bounds


def _runs(agg, p, data, runs, rng, bounds, eps=1.0):
    return run(agg, Batch.from_lists([data] * runs), Params(epsilon=eps, **p, **bounds), method="clipped", rng=rng)


@pytest.mark.parametrize("agg,p", AGGS, ids=IDS)
@pytest.mark.parametrize("case", list(NEIGHBOURS))
def test_privacy_empirical_epsilon(agg, p, case):
    d, dp = NEIGHBOURS[case]
    rng = Rng.seeded(zlib.crc32(f"clip{agg}{p}{case}".encode()))
    a = _runs(agg, p, d, 3000, rng, GOOD)
    b = _runs(agg, p, dp, 3000, rng, GOOD)
    assert privacy_cost(agg, "clipped", epsilon=1.0, **p, **GOOD).epsilon == 1.0
    assert empirical_epsilon(a, b) <= 1.0


@pytest.mark.parametrize("agg,p", AGGS, ids=IDS)
@pytest.mark.parametrize("case", ["outlier_added", "median_added"])
def test_privacy_with_bad_bounds(agg, p, case):
    """Data outside the bounds: still private (clamping is a fixed per-row map), just inaccurate."""
    d, dp = NEIGHBOURS[case]
    rng = Rng.seeded(zlib.crc32(f"clipbad{agg}{p}{case}".encode()))
    a = _runs(agg, p, d, 3000, rng, BAD)
    b = _runs(agg, p, dp, 3000, rng, BAD)
    assert empirical_epsilon(a, b) <= 1.0


def test_bounds_are_required():
    with pytest.raises(ParameterError, match="lower"):
        run("mean", Batch.from_lists([[1.0]]), Params(epsilon=1.0), method="clipped")
    with pytest.raises(ParameterError):
        run("mean", Batch.from_lists([[1.0]]), Params(epsilon=1.0, lower=0.0), method="clipped")


def test_accuracy():
    x = np.random.default_rng(3).normal(10.0, 2.0, 10_000)
    rng = Rng.seeded(3)
    R = 200
    err = {
        "sum": np.abs(_runs("sum", {}, list(x), R, rng, GOOD) - x.sum()),
        "mean": np.abs(_runs("mean", {}, list(x), R, rng, GOOD) - x.mean()),
        "var": np.abs(_runs("var", {}, list(x), R, rng, GOOD) - x.var()),
        "median": np.abs(_runs("quantile", {"p": 0.5}, list(x), R, rng, GOOD) - np.median(x)),
        "iqr": np.abs(_runs("iqr", {}, list(x), R, rng, GOOD) - np.subtract(*np.quantile(x, [0.75, 0.25]))),
    }
    # Laplace scales: sum 20/eps; mean 10/(eps/2 n); var ~ 100/(eps/3 n); EM: a few ranks of a dense sample
    assert np.median(err["sum"]) <= 3 * 20 * np.log(2)
    assert np.median(err["mean"]) <= 0.01
    assert np.median(err["var"]) <= 0.15
    assert np.median(err["median"]) <= 0.02
    assert np.median(err["iqr"]) <= 0.05


def test_bad_bounds_bias_towards_the_bounds():
    x = list(np.random.default_rng(4).normal(10.0, 2.0, 5000))
    rng = Rng.seeded(4)
    assert np.median(_runs("mean", {}, x, 50, rng, BAD)) == pytest.approx(100.0, abs=0.5)
    assert np.median(_runs("var", {}, x, 50, rng, BAD)) <= 1.0
    assert np.median(_runs("quantile", {"p": 0.5}, x, 50, rng, BAD)) == pytest.approx(100.0, abs=1.0)


def test_degenerate_data():
    rng = Rng.seeded(5)
    groups = [[], [4.0], [7.0] * 50]
    for agg, p in AGGS:
        out = run(agg, Batch.from_lists(groups * 100), Params(epsilon=1.0, **p, **GOOD), method="clipped", rng=rng)
        out = out.reshape(100, 3)
        if agg in ("sum", "quantile", "iqr"):
            assert np.all(np.isfinite(out))  # never NULL
        fin = out[np.isfinite(out)]
        if agg in ("mean", "quantile"):
            assert np.all((fin >= 0.0) & (fin <= 20.0))
        if agg in ("var", "iqr"):
            assert np.all(fin >= 0.0)
    const = run("var", Batch.from_lists([[7.0] * 5000] * 20), Params(epsilon=1.0, **GOOD), method="clipped", rng=rng)
    assert np.median(const) <= 0.1
    # lower == upper: every value clamps to one point
    same = run(
        "quantile",
        Batch.from_lists([[1.0, 9.0]] * 5),
        Params(epsilon=1.0, p=0.5, lower=3.0, upper=3.0),
        method="clipped",
        rng=rng,
    )
    assert np.all(same == 3.0)
