"""dp_var's default (dpsql.core.moments, issue 12): the asymmetric mechanism below ``n_hat eps = VAR_TOP`` (the
same draws and releases as ``method := 'asymmetric'``), moments of the scale-free mechanisms above; the top route's
float steps at the extremes, its spending and its statistical privacy test on extreme neighbours at the smallest,
a moderate and the largest accepted eps (VAR_TOP lowered so that every group takes the top route)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from dpsql.core import Batch, Params, run
from dpsql.core import asymmetric as A
from dpsql.core import moments as M
from dpsql.core.accounting import pure
from dpsql.core.batch import DOMAIN
from dpsql.core.registry import DEFAULTS, MAX_EPSILON, MIN_EPSILON
from dpsql.core.scalefree import TOP_FROM
from dpsql.core.spending import meter
from dpsql.noise import Rng
from dpsql.testing import empirical_epsilon


def test_is_the_default_and_its_split_adds_up():
    assert DEFAULTS["var"] == "scalefree"
    assert abs(sum(M.SPLIT.values()) - 1.0) < 1e-12
    assert M.SPLIT["count"] == A.SPLIT_VAR["count"]
    # the top route's components run the mean's top class (n_hat eps >= TOP_FROM): both means find their data
    assert M.SPLIT["mean"] * M.VAR_TOP >= TOP_FROM


@pytest.mark.parametrize(("n", "eps"), [(0, 1.0), (3, 0.5), (200, 1.0), (2000, 2.0), (5000, 5.0)])
@pytest.mark.parametrize("bounds", [(None, None), (-3.0, 40.0)])
def test_below_the_top_class_it_is_the_asymmetric_mechanism(n, eps, bounds):
    """n eps < VAR_TOP: the count then the asymmetric mechanism on the same draws, release for release."""
    r = np.random.default_rng(n)
    lists = [r.lognormal(1.0, 1.0, n), r.normal(5.0, 2.0, n // 2 + 1), []]
    params = Params(epsilon=eps, lower=bounds[0], upper=bounds[1])
    got = M.run_var(Batch.from_lists(lists), pure(eps), params, Rng.seeded(n))
    want = A.run_var(Batch.from_lists(lists), pure(eps), params, Rng.seeded(n))
    np.testing.assert_array_equal(got, want)


def test_top_class_finds_the_variance():
    """n eps = 40,000 (top route): lognormal, normal far from 0 and integers, 40 seeded runs each: the median relative
    error is below the asymmetric mechanism's on the same data (its bias: 0.12 / 0.0019 / 0.0027 against 0.074 /
    0.00095 / 0.0012 when written) and small (lognormal's sample variance is ruled by its tail)."""
    r = np.random.default_rng(7)
    for x, tol in ((r.lognormal(0.0, 1.0, 20_000), 0.1), (r.normal(1e6, 10.0, 20_000), 0.002),
                   (r.poisson(3.0, 20_000).astype(float), 0.002)):
        err = {m: np.median(np.abs(run("var", Batch.from_lists([x] * 40), Params(epsilon=2.0), method=m,
                                       rng=Rng.seeded(8)) / np.var(x) - 1.0)) for m in ("scalefree", "asymmetric")}
        assert err["scalefree"] < min(tol, err["asymmetric"]), err


def test_squares_and_combine_at_the_extremes():
    """(x - c)**2 of rows at +-DOMAIN with c at -+DOMAIN overflows to inf and is clamped to DOMAIN; a NULL or negative
    mean of the squares gives 0; every release lies in [0, DOMAIN], no warning raised."""
    b = Batch.from_lists([[DOMAIN, -DOMAIN, 0.0, 5e-324], [DOMAIN, 1.0]])
    with np.errstate(all="raise"):
        y = M.squares(b, np.array([-DOMAIN, DOMAIN]))
        assert np.all(np.isfinite(y.values)) and np.all((y.values >= 0) & (y.values <= DOMAIN))
        assert y.values[0] == DOMAIN and y.values[4] == 0.0
        v = M.combine(np.array([5.0, DOMAIN, np.nan, -0.5, 0.0]))
    np.testing.assert_array_equal(v, [5.0, DOMAIN, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("eps", [MIN_EPSILON, 4.0, MAX_EPSILON])
def test_top_route_spends_eps(eps, monkeypatch):
    """Every group on the top route: the metered total is eps (count + mean + squares); at the smallest eps
    (reachable only with VAR_TOP lowered: at n_hat eps >= VAR_TOP every component finds its data) the components
    answer NULL by their released counts and spend only those, less than eps."""
    monkeypatch.setattr(M, "VAR_TOP", 0.0)
    x = np.random.default_rng(3).normal(5.0, 2.0, 500)
    with meter() as m:
        M.run_var(Batch.from_lists([x]), pure(eps), Params(), Rng.seeded(4))
    if eps == MIN_EPSILON:
        assert m.spent("pure") <= eps * (1 + 1e-9), m.describe()
    else:
        assert abs(m.spent("pure") - eps) <= 1e-9 * eps, m.describe()


_BASE = list(np.random.default_rng(20261128).normal(5.0, 2.0, 500))
#: neighbours (D, D + one row) around a base of 500 rows, so that at eps = 4 each component of the top route runs
#: its own route (the mean at n eps = 200, the mean of squares at 1,700)
_PAIRS = {
    "one_at_+1e300": (_BASE, _BASE + [1e300]),
    "one_at_-inf": (_BASE, _BASE + [-np.inf]),
    "bigint_max": (_BASE, _BASE + [float(2**63 - 1)]),
    "far_outlier_1e15": (_BASE, _BASE + [1e15]),
    "equal_plus_far": ([3.0] * 500, [3.0] * 500 + [1e300]),
    "two_far_clusters": ([-1e200] * 250 + [1e200] * 250, [-1e200] * 250 + [1e200] * 251),
    "empty_vs_one": ([], [1.0]),
}
_EDGE = ("one_at_-inf", "equal_plus_far", "empty_vs_one")


@pytest.mark.parametrize(("pair", "eps"), [(p, 4.0) for p in _PAIRS] +
                         [(p, e) for p in _EDGE for e in (MIN_EPSILON, MAX_EPSILON)])
def test_top_route_privacy(pair, eps, monkeypatch):
    """The top route alone (VAR_TOP = 0) on extreme neighbours, 1,500 runs a side: never NULL, finite, within
    [0, DOMAIN], and the empirical eps lower bound at most eps."""
    monkeypatch.setattr(M, "VAR_TOP", 0.0)
    runs = 1500
    outs = []
    for data in _PAIRS[pair]:
        out = M.run_var(Batch.from_lists([data] * runs), pure(eps), Params(),
                        Rng.seeded(zlib.crc32(f"vm{pair}{eps}".encode())))
        assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= DOMAIN))
        outs.append(out)
    assert empirical_epsilon(*outs) <= eps
