"""Universal estimators (seed 003, add/remove form): privacy, accuracy, degenerate data."""

import zlib

import numpy as np
import pytest

from dpsql.core import Batch, ParameterError, Params, privacy_cost, run
from dpsql.noise import Rng
from dpsql.testing import empirical_epsilon

AGGS = [("count", {}), ("sum", {}), ("mean", {}), ("var", {}), ("quantile", {"p": 0.5}),
        ("quantile", {"p": 0.9}), ("iqr", {})]


def _runs(agg, p, data, runs, rng, eps=1.0, **kw):
    method = "laplace" if agg == "count" else "universal"
    return run(agg, Batch.from_lists([data] * runs), Params(epsilon=eps, **p, **kw), method=method, rng=rng)


_base = list(np.random.default_rng(0).normal(10.0, 2.0, 150))
NEIGHBOURS = {
    "empty_vs_one": ([], [3.0]),
    "outlier_added": (_base, _base + [1e9]),
    "median_added": (_base, _base + [float(np.median(_base))]),
    "nan_added": (_base, _base + [float("nan")]),  # NaN rows are dropped: the same dataset
}


@pytest.mark.parametrize("agg,p", AGGS, ids=[f"{a}{p.get('p', '')}" for a, p in AGGS])
@pytest.mark.parametrize("case", list(NEIGHBOURS))
def test_privacy_empirical_epsilon(agg, p, case):
    """Many runs on neighbouring datasets; the empirical lower bound on eps must not exceed the claim.

    The bound holds with probability 0.95 for a correct mechanism (Clopper-Pearson, Bonferroni over
    events); the seeds are fixed, so the outcome is deterministic in CI.
    """
    d, dp = NEIGHBOURS[case]
    eps = 1.0
    rng = Rng.seeded(zlib.crc32(f"{agg}{p}{case}".encode()))
    a = _runs(agg, p, d, 3000, rng, eps)
    b = _runs(agg, p, dp, 3000, rng, eps)
    assert privacy_cost(agg, None, epsilon=eps, **p).epsilon == eps
    assert empirical_epsilon(a, b) <= eps


def test_privacy_test_catches_a_broken_mechanism():
    # a "mean" that is NULL only for empty groups is caught (eps_lb = inf)
    rng = Rng.seeded(1)
    a = _runs("count", {}, [], 2000, rng)
    b = _runs("count", {}, [1.0], 2000, rng)
    a_broken = np.full_like(a, np.nan)
    assert empirical_epsilon(a_broken, b) > 5
    # noise at half the needed scale is caught too
    x = Rng.seeded(2)
    from dpsql.noise import discrete_laplace

    a2 = 0 + discrete_laplace(0.5, x, 20000)
    b2 = 1 + discrete_laplace(0.5, x, 20000)
    assert empirical_epsilon(a2, b2) > 1.2


def test_accuracy_far_from_zero():
    """N(1e6, 10), n = 1e4, eps = 1: errors within stated multiples of IQR/(eps n) (= 0.00135 here).

    Measured medians (see the issue note): mean 4.2x, median 5.6x, p90 12x, iqr 22x.  The asserted
    multiples are 4x those, so a regression of that size fails."""
    g = np.random.default_rng(42)
    x = g.normal(1e6, 10.0, 10_000)
    iqr = np.subtract(*np.percentile(x, [75, 25]))
    unit = iqr / x.size
    rng = Rng.seeded(7)
    R = 101
    checks = [("mean", {}, x.mean(), 17), ("quantile", {"p": 0.5}, np.median(x), 23),
              ("quantile", {"p": 0.9}, np.quantile(x, 0.9), 50), ("iqr", {}, iqr, 90)]
    for agg, p, truth, mult in checks:
        err = np.median(np.abs(_runs(agg, p, x, R, rng) - truth))
        assert err <= mult * unit, (agg, p, err / unit)
    v = _runs("var", {}, x, R, rng)
    assert np.median(np.abs(v / x.var(ddof=1) - 1)) < 0.05


def test_accuracy_with_bounds_not_worse():
    """Public bounds (loose: 10x the range) never hurt: the released range is intersected with them."""
    g = np.random.default_rng(1)
    x = g.normal(50.0, 5.0, 5000)
    lo, hi = x.min() - 5 * np.ptp(x), x.max() + 5 * np.ptp(x)
    rng = Rng.seeded(3)
    free = np.median(np.abs(_runs("mean", {}, x, 201, rng) - x.mean()))
    bounded = np.median(np.abs(_runs("mean", {}, x, 201, rng, lower=lo, upper=hi) - x.mean()))
    assert bounded <= 1.3 * free


@pytest.mark.parametrize("agg,p", AGGS, ids=[f"{a}{p.get('p', '')}" for a, p in AGGS])
@pytest.mark.parametrize(
    "data",
    [[], [7.0], [5.0] * 1000, [0.0, 1.0] * 500, [1e300, -1e300, 1e300], [2.0**63, -(2.0**63)] * 100,
     [float("inf"), float("-inf"), 1.0], [float("nan")] * 5],
    ids=["empty", "n1", "equal", "two_values", "huge", "int64_extremes", "infs", "all_nan"],
)
def test_degenerate_data_gives_numbers(agg, p, data):
    """Every output is a finite number, or NULL (NaN) only for mean/var with a small noisy count."""
    out = _runs(agg, p, data, 50, Rng.seeded(4))
    assert out.shape == (50,)
    if agg in ("mean", "var"):
        assert np.all(np.isfinite(out) | np.isnan(out))
    else:
        assert np.all(np.isfinite(out))


def test_all_equal_large_n_is_close():
    out = _runs("quantile", {"p": 0.5}, [5.0] * 20000, 21, Rng.seeded(5))
    assert np.median(np.abs(out - 5.0)) < 0.01
    m = _runs("mean", {}, [5.0] * 20000, 21, Rng.seeded(5))
    assert np.median(np.abs(m - 5.0)) < 0.01


def test_parameter_errors_name_the_argument():
    b = Batch.from_lists([[1.0, 2.0]])
    for params, word in [(Params(epsilon=0.0), "epsilon"), (Params(epsilon=float("inf")), "epsilon"),
                         (Params(epsilon=1.0, lower=2.0, upper=1.0), "lower"), (Params(), "epsilon"),
                         (Params(epsilon=1.0, lower=float("nan")), "lower")]:
        with pytest.raises(ParameterError, match=word):
            run("mean", b, params)
    with pytest.raises(ParameterError, match="p must"):
        run("quantile", b, Params(epsilon=1.0, p=1.5))
    with pytest.raises(ParameterError, match="method"):
        run("mean", b, Params(epsilon=1.0), method="nope")


def test_vectorised_groups_are_independent():
    """Many groups in one call give independent answers whose spread matches single-group runs."""
    g = np.random.default_rng(3)
    x = list(g.normal(0, 1, 2000))
    out = _runs("mean", {}, x, 400, Rng.seeded(6))
    assert len(np.unique(out)) > 390
