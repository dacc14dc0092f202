"""Scale-free quantiles (accuracy study R1): the float-code map, privacy at sensitivity max(p, 1 - p)."""

import zlib

import numpy as np
import pytest

from dpsql.core import Batch, Params, privacy_cost, run, run_interval
from dpsql.core import scalefree as S
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.noise import Rng
from dpsql.testing import (
    EDGE_PAIRS,
    EXTREME_NEIGHBOURS,
    INTERVAL_PARTS,
    empirical_epsilon,
    matrix_cell,
    matrix_params,
)


def _values() -> np.ndarray:
    rng = np.random.default_rng(0)
    extremes = [0.0, -0.0, 5e-324, -5e-324, 2.0**1000, -(2.0**1000), 1.0, 0.125, 0.125 * (1 - 2**-52)]
    parts = [rng.normal(0, 1, 500), rng.lognormal(0, 30, 500), -rng.lognormal(0, 30, 500), extremes]
    return np.sort(np.concatenate(parts))


@pytest.mark.parametrize("e", [-1074, -1000, -3, 0, 10, 1000])
def test_codes_are_monotone_in_range_and_decode_into_their_cell(e):
    x = _values()
    c = S.FloatCodes(x, np.array([0, x.size]), np.array([e])).take(np.arange(x.size))
    K = 2 * S._mag_max(np.array([e]))[0]
    assert np.all(np.diff(c) >= 0) and c.min() >= 0 and c.max() <= K < 2**50
    d = S.decode(c, np.full(c.size, e))
    again = S.FloatCodes(np.sort(d), np.array([0, d.size]), np.array([e])).take(np.arange(d.size))
    np.testing.assert_array_equal(np.sort(c), again)  # a released value codes back to its own code
    big = np.abs(x) >= 2.0**e
    # relative resolution 2**-36 above the floor inside the zone (|y| < 2**ZONE or within ZONE_ABOVE octaves
    # of the floor), coarser by one bit per octave beyond it
    with np.errstate(over="ignore"):  # inf when the zone covers every float
        edge = np.ldexp(1.0, min(max(S.ZONE, e + S.ZONE_ABOVE), 1030))
    zone = big & (np.abs(x) < edge)
    assert np.all(np.abs(d[zone] / x[zone] - 1) < 2**-35)
    out = big & ~zone
    # beyond: cells of one or more octaves (decoded at their middle), on the value's side of the zone's edge
    assert np.all(np.sign(d[out]) == np.sign(x[out]))
    assert np.all(np.abs(d[out]) >= edge / 2)
    assert np.all(np.abs(d[~big] - x[~big]) <= 2.0 ** (e - S.M_BITS) * 1.5 + 5e-324)  # linear below it


@pytest.mark.parametrize("c", [0.0, 1e6, -3.5, 2.0**1000, -(2.0**1000)])
@pytest.mark.parametrize("e", [-1074, -3, 2, 1000])
def test_centred_decaying_codes_are_monotone_and_decode_into_their_cell(e, c):
    x = _values()
    codes = S.FloatCodes(x, np.array([0, x.size]), np.array([e]), np.array([c]), decay=True)
    k = codes.take(np.arange(x.size))
    assert np.all(np.diff(k) >= 0) and k.min() >= 0 and k.max() <= codes.K[0] < 2**49
    d = S.decode(k, np.full(k.size, e), np.full(k.size, c), decay=True)
    again = S.FloatCodes(np.sort(d), np.array([0, d.size]), np.array([e]), np.array([c]), decay=True)
    np.testing.assert_array_equal(k, again.take(np.arange(d.size)))
    # resolution: 2**-(M_BITS - k + 1) relative to |y - c| in octave k, so fine near the centre
    near = (np.abs(x - c) >= 2.0**e) & (np.abs(x - c) < 2.0 ** (e + 10))
    assert np.all(np.abs(d[near] - x[near]) <= np.abs(x[near] - c) * 2.0**-25)


def test_decaying_measure_is_normalisable():
    """Octave k holds 2**(M - k + 1) codes, then one: the far line weighs about the first octaves."""
    bits, base, _ = S._TABLE[S.NEAR]
    assert bits[1] == S.M_BITS and bits[S.M_BITS + 1] == 0 and bits[-1] == 0
    assert base[-1] < 2 ** (S.M_BITS + 2)


def test_loguniform_measure_thins_beyond_the_zone():
    """Log-uniform octaves up to 2**ZONE (and ZONE_ABOVE octaves above the floor), then the far line weighs
    about two octaves: a mechanism that misses the data lands within ~100 octaves, not anywhere up to 1e308."""
    for e in (-1074, -30, 0, 30, 500):
        top = int(S._mag_max(np.array([e]))[0])
        flat = max(S.ZONE - e, S.ZONE_ABOVE)
        edge = S.FloatCodes(np.array([2.0 ** (e + flat - 1)]), np.array([0, 1]), np.array([e])).take(np.arange(1))
        inside = int(edge[0]) - top  # the magnitude code of the zone's last octave
        assert inside >= flat * 2**S.M_BITS  # full octaves up to the zone's edge
        if e + flat < S.E_TOP:
            assert top - inside <= 3 * 2**S.M_BITS  # the whole float line beyond weighs <= 3 octaves


def test_codes_of_many_groups_use_their_own_floor():
    x = _values()
    lists = [x[:700], x[700:], x]
    lists = lists + [x, x[100:900]]  # floors on both sides of the zone: different octave tables
    b = Batch.from_lists(lists).sorted()
    e = np.array([-20, 5, 0, -200, 100])
    many = S.FloatCodes(b.values, b.offsets, e).take(np.arange(b.values.size))
    for g, one in enumerate(lists):
        s = Batch.from_lists([one]).sorted()
        np.testing.assert_array_equal(many[b.offsets[g] : b.offsets[g + 1]],
                                      S.FloatCodes(s.values, s.offsets, e[g : g + 1]).take(np.arange(one.size)))


_base = list(np.random.default_rng(5).normal(10.0, 2.0, 200))
_wide = list(np.random.default_rng(6).normal(1e6, 10.0, 1500))
_mid = list(np.random.default_rng(7).integers(0, 10, 450).astype(float))
_skew = list(np.random.default_rng(8).lognormal(0.0, 1.0, 250))
NEIGHBOURS = {
    "low_class_outlier": (_mid, _mid + [1e300]),
    "mid_class_outlier": (_skew, _skew + [1e300]),
    "empty_vs_one": ([], [3.0]),
    "wide_route_outlier": (_wide, _wide + [-1e300]),
    "median_added": (_base, _base + [float(np.median(_base))]),
    "outlier_added": (_base, _base + [1e300]),
    "low_outlier_added": (_base, _base + [-1e300]),
}


@pytest.mark.parametrize("case", list(NEIGHBOURS))
@pytest.mark.parametrize(("aggregate", "p"), [("quantile", 0.5), ("quantile", 0.9), ("iqr", None), ("mean", None),
                                              ("sum", None)])
def test_privacy_empirical_epsilon(aggregate, p, case):
    """The sensitivity-max(p, 1 - p) claim, the routes on a released count and the monotone radius scan:
    2000 runs a side, empirical eps lower bound <= eps.  The 200-row neighbours take the near / median
    routes at eps = 1, the 250-row ones (lognormal) dp_mean's mid class (range route or its centre), the 450-row
    ones (tied integers) the mean's and sum's low range class, the 1500-row ones the wide / range routes."""
    d, d2 = NEIGHBOURS[case]
    eps = 1.0
    params = Params(epsilon=eps, p=p)
    assert privacy_cost(aggregate, "scalefree", epsilon=eps, p=p).epsilon == eps
    rng = Rng.seeded(zlib.crc32(f"sf{aggregate}{p}{case}".encode()))
    a = run(aggregate, Batch.from_lists([d] * 2000), params, method="scalefree", rng=rng)
    b = run(aggregate, Batch.from_lists([d2] * 2000), params, method="scalefree", rng=rng)
    assert empirical_epsilon(a, b) <= eps


_heavy = list(np.random.default_rng(9).pareto(1.5, 800) + 1.0)


@pytest.mark.parametrize("case", ["low_class_outlier", "wide_route_outlier", "heavy_tail_outlier", "heavy_tail_row"])
def test_sum_interval_privacy_empirical_epsilon(case):
    """dp_sum_ci spends part of the sum's share on disjoint tail-shell counts (its tail test): the value, both
    ends and the width, 2000 runs a side on the range routes (low class, wide; a Pareto 1.5 tail with a far row,
    or one more row just past its largest), each within eps."""
    d, d2 = {**NEIGHBOURS, "heavy_tail_outlier": (_heavy, _heavy + [1e300]),
             "heavy_tail_row": (_heavy, _heavy + [2.0 * max(_heavy)])}[case]
    params = Params(epsilon=1.0, level=0.95)
    rng = Rng.seeded(zlib.crc32(f"sfci{case}".encode()))
    a = run_interval("sum", Batch.from_lists([d] * 2000), params, method="scalefree", rng=rng)
    b = run_interval("sum", Batch.from_lists([d2] * 2000), params, method="scalefree", rng=rng)
    with np.errstate(invalid="ignore"):
        for part, f in INTERVAL_PARTS.items():
            assert empirical_epsilon(f(*a), f(*b)) <= 1.0, part


def test_accuracy_far_from_zero():
    """Where seed 003's range step struggles (data far from 0), the median lands within a few 1e-3 IQR."""
    x = list(np.random.default_rng(2).normal(1e6, 10.0, 1000))
    out = run("quantile", Batch.from_lists([x] * 100), Params(epsilon=1.0, p=0.5), method="scalefree",
              rng=Rng.seeded(4))
    assert np.median(np.abs(out - np.median(x))) < 0.02 * 13.5


@pytest.mark.parametrize("aggregate", ["mean", "sum"])
def test_mean_and_sum_far_from_zero(aggregate):
    """The catastrophe of issue 12 (N(1e6, 10): the old default's mean was 80-470 IQR off): now within
    a small fraction of the IQR at n eps = 1000, and on the median route at n eps = 100; the sum too."""
    for n in (100, 1000):
        x = np.random.default_rng(n).normal(1e6, 10.0, n)
        out = run(aggregate, Batch.from_lists([x] * 50), Params(epsilon=1.0), method="scalefree", rng=Rng.seeded(3))
        assert np.mean(np.isnan(out)) < 0.1  # NULL only when the released count says n eps < 25 (or 40)
        if aggregate == "mean":
            assert np.nanmedian(np.abs(out - x.mean())) < (0.05 if n == 1000 else 0.2) * 13.5
        else:  # the noise scale is ~|centre| / (0.55 eps): a relative error ~ 1 / (n eps)
            assert np.nanmedian(np.abs(out / x.sum() - 1)) < 10.0 / n


@pytest.mark.parametrize("aggregate", ["mean", "sum", "median"])
@pytest.mark.parametrize(("kind", "n"), [("far", 300), ("far", 600), ("integer", 350), ("far", 2000)])
def test_no_catastrophe_where_the_range_route_begins(aggregate, kind, n):
    """Issue 12's tail at n eps ~ 300 (between the panel's cells): with one split for every range-route group
    the centre, the floor or the cap failed in ~8 % of runs on N(1e6, 10), 1e250-1e297 IQR off; the low class
    (larger shares below n_hat eps = LOW_UNTIL) keeps every one of 400 runs within 100 scale units."""
    g = np.random.default_rng(n)
    x = g.normal(1e6, 10.0, n) if kind == "far" else g.integers(0, 10, n).astype(float)
    core, p = ("quantile", 0.5) if aggregate == "median" else (aggregate, None)
    out = run(core, Batch.from_lists([x] * 400), Params(epsilon=1.0, p=p), method="scalefree",
              rng=Rng.seeded(n + 17))
    if aggregate == "median":
        err = np.abs(out - np.median(x)) / (np.subtract(*np.percentile(x, [75, 25])) or 1.0)
    elif aggregate == "mean":
        err = np.abs(out - x.mean()) / (np.subtract(*np.percentile(x, [75, 25])) or 1.0)
    else:
        err = np.abs(out - x.sum()) / np.abs(x).sum()
    assert np.all(err[~np.isnan(err)] < 100.0), np.nanmax(err)


def test_near_floor_is_clamped_to_the_centre():
    """The near route's floor (seed 003's IQR lower bound, overshooting at small n eps) is clamped within
    NEAR_CLAMP octaves of the released centre's magnitude; a centre of 0 leaves it as it is."""
    e = np.array([297, -200, 3, 297])
    c = np.array([1.5, 1.5, 1.5, 0.0])
    lo, hi = S.NEAR_CLAMP
    np.testing.assert_array_equal(S.near_exponent(e, c), [hi, lo, 3, 297])


@pytest.mark.parametrize("aggregate", ["mean", "sum"])
def test_interval_covers_in_the_low_class(aggregate):
    """n eps ~ 340 (penguins' body mass): a cap that landed low cut the scan's radius and the interval, unaware
    of the clipping, covered the sum in 69 % of runs; now the cap only cuts run-offs (> CAP_TRUST-fold) and
    a cut group's interval is infinite."""
    x = np.random.default_rng(11).normal(4200.0, 800.0, 342).round(-1)
    v, lo, hi = run_interval(aggregate, Batch.from_lists([x] * 300), Params(epsilon=1.0, level=0.95),
                             method="scalefree", rng=Rng.seeded(12))
    truth = x.mean() if aggregate == "mean" else x.sum()
    ok = ~np.isnan(v)
    assert np.mean((lo[ok] <= truth) & (truth <= hi[ok])) >= 0.93


def test_mean_and_sum_splits_add_up():
    for sp in (S.SPLIT_MEAN, S.SPLIT_MEAN_LOW, S.SPLIT_MEAN_MID, S.SPLIT_MEAN_TOP, S.SPLIT_SUM, S.SPLIT_SUM_LOW,
               S.SPLIT_SUM_TOP, S.SPLIT_FEW,
               S.SPLIT_NEAR, S.SPLIT_TAIL,
               S.SPLIT, S.SPLIT_LOW):
        assert abs(sum(sp.values()) - 1.0) < 1e-12, sp
    assert (S.SPLIT_MEAN["count"] == S.SPLIT_MEAN_LOW["count"] == S.SPLIT_MEAN_MID["count"] == S.SPLIT_SUM["count"]
            == S.SPLIT_FEW["count"] == S.SPLIT_MEAN_TOP["count"] == S.SPLIT_SUM_TOP["count"])
    # the top class: the centre and the floor keep n eps >= 100 / 50, the cap n eps >= CAP_SURE (its scan drifts)
    for sp in (S.SPLIT_MEAN_TOP, S.SPLIT_SUM_TOP):
        assert sp["centre"] * S.TOP_FROM >= 100 and sp["bound"] * S.TOP_FROM >= 50
        assert (1 - S.SCAN_TOP) * sp["radius"] * S.TOP_FROM >= S.CAP_SURE
    assert abs(sum(S.SUM_FEW.values()) - 1.0) < 1e-12


_CELLS = [(pair, 1.0) for pair in EXTREME_NEIGHBOURS] + [(pair, e) for pair in EDGE_PAIRS
                                                           for e in (MIN_EPSILON, MAX_EPSILON)]


@pytest.mark.parametrize(("pair", "epsilon"), _CELLS)
def test_tail_quantile_routes_at_the_extremes(pair, epsilon):
    """The adversarial matrix runs every method at p = 1/2; p = 0.9 takes the count-routed tail path."""
    params = matrix_params("quantile", "scalefree", epsilon, p=0.9)
    eps, claim, note = matrix_cell("quantile", "scalefree", params, pair, 300, zlib.crc32(f"{pair}{epsilon}".encode()))
    assert eps <= claim, (eps, claim, note)


@pytest.mark.parametrize(("aggregate", "p"), [("quantile", 0.5), ("quantile", 0.9), ("iqr", None), ("mean", None),
                                              ("sum", None)])
def test_null_when_the_released_count_is_too_small(aggregate, p):
    """n eps = 5: nothing bound-free can locate data on the float line; NULL instead of a value of 1e200
    (a route on the released count: the NULL share is the same on neighbours, within noise)."""
    x = list(np.random.default_rng(1).normal(200.0, 10.0, 50))
    out = run(aggregate, Batch.from_lists([x] * 400), Params(epsilon=0.1, p=p), method="scalefree", rng=Rng.seeded(9))
    assert np.mean(np.isnan(out)) > 0.75  # the count at 0.05 eps has noise 20 / eps: the route is noisy too


def test_near_classes_are_post_processing_of_the_count():
    n_hat = np.array([-3.0, 0.0, 59.0, 149.9, 150.0, 249.0, 250.0, 1e9])
    got = S.near_classes(n_hat, 1.0)
    assert [sp for sp, _ in got] == [S.SPLIT_NEAR, S.SPLIT_NEAR_MID, S.SPLIT_NEAR_HIGH]
    assert [list(i) for _, i in got] == [[0, 1, 2, 3], [4, 5], [6, 7]]
    assert S.near_classes(np.zeros(0), 1.0) == []


#: the matrix's 40-row neighbours at eps 5 and 8: released counts ~200 (SPLIT_NEAR_MID) and ~320 (SPLIT_NEAR_HIGH),
#: still the near route for p90 (n eps 0.1 < 100) and for the IQR (n eps 0.25 < 100)
_NEAR_CELLS = [(pair, eps, agg) for pair in ("one_at_+1e300", "one_at_-inf", "far_outlier_1e15", "equal_plus_far",
                                             "two_far_clusters", "empty_vs_one")
               for eps in (5.0, 8.0) for agg in ("p90", "iqr")]


@pytest.mark.parametrize(("pair", "epsilon", "agg"), _NEAR_CELLS)
def test_near_route_classes_at_the_extremes(pair, epsilon, agg):
    """The near route's mid and high classes (:func:`~dpsql.core.scalefree.near_classes`) on extreme neighbours,
    1000 runs a side (the classes depend on n eps only: the smallest epsilon would need ~2e8 rows per run)."""
    aggregate, p = ("quantile", 0.9) if agg == "p90" else ("iqr", 0.5)
    params = matrix_params(aggregate, "scalefree", epsilon, p=p)
    eps, claim, note = matrix_cell(aggregate, "scalefree", params, pair, 1000,
                                   zlib.crc32(f"near{pair}{epsilon}{agg}".encode()))
    assert eps <= claim, (eps, claim, note)


#: dp_mean's and dp_sum's range classes on the matrix's 40-row neighbours: eps 10 puts n_hat eps ~ 400 in the low
#: class (300-700), eps 25 ~ 1000 in the high class, eps 80 ~ 3200 in the top class (from TOP_FROM; the splits
#: changed on 2026-11-27, the top class came on 2026-11-28)
_MEAN_CELLS = [(pair, eps, agg) for pair in ("one_at_+1e300", "one_at_-inf", "far_outlier_1e15", "equal_plus_far",
                                             "two_far_clusters", "hugeint_min")
               for eps in (10.0, 25.0, 80.0) for agg in ("mean", "sum")]
_CLASS_AT = {10.0: "low", 25.0: "high", 80.0: "top"}


@pytest.mark.parametrize(("pair", "epsilon", "agg"), _MEAN_CELLS)
def test_mean_and_sum_range_classes_at_the_extremes(pair, epsilon, agg):
    """The low, high and top classes of :func:`~dpsql.core.scalefree.mean_classes` on extreme neighbours, 1000 runs a
    side (the classes depend on n eps only: at the smallest epsilon they would need ~4e8 rows per run)."""
    params = matrix_params(agg, "scalefree", epsilon)
    assert {r for r, idx, _ in S.mean_classes(np.array([40.0]), epsilon, agg) if idx.size} == {_CLASS_AT[epsilon]}
    eps, claim, note = matrix_cell(agg, "scalefree", params, pair, 1000,
                                   zlib.crc32(f"meancls{pair}{epsilon}{agg}".encode()))
    assert eps <= claim, (eps, claim, note)


@pytest.mark.parametrize("aggregate", ["mean", "sum"])
def test_an_overshooting_floor_does_not_collapse_the_range(aggregate, monkeypatch):
    """Seed 003's floor overshot N(1e6, 10)'s spread by 125 octaves in a rare run (n eps = 300): the centre's codes
    were linear up to 2**129, the centre collapsed to 0 and the scan began at 2**89 (a mean 7e23 IQR off).  With
    the centre's, the scan's and the cap's floor at most 2**CENTRE_TOP the centre and the scan find the data (the
    cap, decaying from 2**24, lands anywhere below it: a scan's run-off past the data, ~1 % of runs, is then not
    cut; with the floor's overshoot itself ~1e-4 of runs, that is ~1e-6)."""
    monkeypatch.setattr(S, "floor_exponent", lambda s, eps, rng, n_hat=None: np.full(s.groups, 129, dtype=np.int64))
    x = np.random.default_rng(5).normal(1e6, 10.0, 400)
    out = run(aggregate, Batch.from_lists([x] * 200), Params(epsilon=1.0), method="scalefree", rng=Rng.seeded(4))
    # IQR units (the mean), or the sum's relative error in units of 1 / (n eps): before, every run ~1e22 off
    err = np.abs(out - x.mean()) / 13.5 if aggregate == "mean" else np.abs(out / x.sum() - 1.0) * 400
    assert np.median(err) < (0.1 if aggregate == "mean" else 5.0) and np.mean(err < 30.0) > 0.95


@pytest.mark.parametrize(("aggregate", "p", "n"), [("mean", None, 100), ("quantile", 0.5, 100),
                                                   ("quantile", 0.5, 1000), ("quantile", 0.9, 1500)])
def test_an_overshooting_floor_does_not_collapse_the_median(aggregate, p, n, monkeypatch):
    """The same overshoot on the median's codes (dp_median; dp_mean's small-count route; a wide-route p90): at
    n eps_floor = 10-20 seed 003's floor lay above 2**24 in ~1.5e-3 of runs on N(1e6, 10) and the release
    collapsed to ~0 (7e4 IQR off in 6.6e-4 of runs at n eps = 100).  ``code_floor`` keeps the codes fine."""
    monkeypatch.setattr(S, "floor_exponent", lambda s, eps, rng, n_hat=None: np.full(s.groups, 129, dtype=np.int64))
    x = np.random.default_rng(n).normal(1e6, 10.0, n)
    out = run(aggregate, Batch.from_lists([x] * 200), Params(epsilon=1.0, p=p), method="scalefree",
              rng=Rng.seeded(5))
    exact = x.mean() if aggregate == "mean" else np.quantile(x, p)
    err = np.abs(out[~np.isnan(out)] - exact) / 13.5
    assert np.median(err) < 0.5 and np.mean(err < 3.0) > 0.95  # before: ~7e4 in every run


def test_route_check_parts():
    """:func:`~dpsql.core.scalefree.confirm_parts`: groups outside the zone keep their class, split and count; a zone
    group's second count (plus CONFIRM_MARGIN / eps) can only lower its class; the confirmed splits and the second
    count spend eps with the first count."""
    eps = 1.0
    n = np.array([210.0, 290.0, 250.0, 275.0])
    zone = S.confirm_zone("mid", n, eps, "mean")
    np.testing.assert_array_equal(zone, [True, False, True, True])
    parts = S.confirm_parts("mid", n, zone, np.array([100.0, 230.0, 5000.0]), S.SPLIT_MEAN_MID, eps, "mean")
    got = [(list(idx), r) for idx, _, r, _ in parts if idx.size]
    assert got == [([1], "mid"), ([0], "few"), ([2, 3], "mid")]
    assert parts[0][3] is S.SPLIT_MEAN_MID and parts[0][1].tolist() == [290.0]
    w = S.SPLIT_MEAN_MID["count"] ** 2
    np.testing.assert_allclose(parts[1][1], [(w * 210.0 + S.CONFIRM**2 * 100.0) / (w + S.CONFIRM**2)])
    for _, _, r, sp in parts[1:]:
        assert abs(sum(sp.values()) + S.CONFIRM - 1.0) < 1e-12, (r, sp)
    assert not S.confirm_zone("high", np.array([700.0]), eps, "mean").any()
    assert not S.confirm_zone("mid", np.array([290.0]), eps, "mean").any()
    assert S.confirm_zone("low", np.array([379.0]), eps, "sum").all()
    low = S.confirm_parts("low", np.array([310.0]), np.array([True]), np.array([250.0]), S.SPLIT_SUM_LOW, eps, "sum")
    assert [r for idx, _, r, _ in low if idx.size] == ["few"]  # dp_sum has no mid class


@pytest.mark.parametrize("check", [True, False])
def test_route_check_stops_an_overshooting_count(check, monkeypatch):
    """Issue 12: the first count overshooting by 7 noise scales (+140 at eps = 1, probability ~5e-4) put a group
    of 100 rows of N(1e6, 10) in dp_mean's mid class, whose centre (0.45 eps: n eps_centre = 45) missed the data
    in ~5 % of runs, 1e10-1e15 IQR off.  The second count sends most such groups back to the small-count route
    (a few stay: their first count lay above the zone, or the second count overshot too): <= 0.5 % of 1,500 seeded
    runs off by more than 100 IQR, >= 2 % without the check (CONFIRM_ZONE = 0).  Unconditionally (the overshoot
    itself ~1e-3) that is 4e-4 -> ~1e-5 of runs at n eps = 80-120 (benchmarks/results/route_check.md)."""
    if not check:
        monkeypatch.setattr(S, "CONFIRM_ZONE", 0.0)
    first = S.noisy_count
    calls = []

    def overshooting(batch, epsilon, rng):
        calls.append(epsilon)
        return first(batch, epsilon, rng) + (140.0 if len(calls) == 1 else 0.0)

    monkeypatch.setattr(S, "noisy_count", overshooting)
    x = np.random.default_rng(3).normal(1e6, 10.0, 100)
    out = run("mean", Batch.from_lists([x] * 1500), Params(epsilon=1.0), method="scalefree", rng=Rng.seeded(31))
    err = np.abs(out - x.mean()) / np.subtract(*np.percentile(x, [75, 25]))
    far = np.mean(err > 100.0)
    assert (far <= 0.005) if check else (far >= 0.02), far  # measured: 0.0013 / 0.033


#: the route check on the matrix's 40-row neighbours: eps 5.5 puts n_hat eps ~ 220 in dp_mean's mid zone, eps 8.5
#: ~ 340 in the low class's zone (mean and sum); the count's noise spreads the runs over the zone, the groups it
#: confirms, demotes or leaves alone (at the smallest epsilon the zones would need ~4e8 rows per run, at the largest
#: 40 rows are far above them: the edge pairs' cells are the classes' tests above)
_CHECK_CELLS = [(pair, eps, agg) for pair in ("one_at_+1e300", "one_at_-inf", "far_outlier_1e15", "equal_plus_far",
                                              "two_far_clusters", "hugeint_min")
                for eps, agg in ((5.5, "mean"), (8.5, "mean"), (8.5, "sum"))]


@pytest.mark.parametrize(("pair", "epsilon", "agg"), _CHECK_CELLS)
def test_route_check_at_the_extremes(pair, epsilon, agg):
    """The second count and the routes it leads to (:func:`~dpsql.core.scalefree.confirm_parts`) on extreme
    neighbours, 1000 runs a side: empirical eps <= the claim."""
    route = "mid" if epsilon == 5.5 else "low"
    n40 = np.array([40.0])
    assert {r for r, idx, _ in S.mean_classes(n40, epsilon, agg) if idx.size} == {route}
    assert S.confirm_zone(route, n40, epsilon, agg).all()
    params = matrix_params(agg, "scalefree", epsilon)
    eps, claim, note = matrix_cell(agg, "scalefree", params, pair, 1000,
                                   zlib.crc32(f"check{pair}{epsilon}{agg}".encode()))
    assert eps <= claim, (eps, claim, note)


@pytest.mark.parametrize(("epsilon", "agg"), [(5.5, "mean"), (8.5, "mean"), (8.5, "sum")])
def test_route_check_spends_eps(epsilon, agg):
    """A group through the route check spends eps (first count, second count, the confirmed split), whatever
    route the second count gives it (one group per run, 60 seeded runs across the zone)."""
    from dpsql.core.spending import meter

    x = np.random.default_rng(4).normal(1e6, 10.0, 40)
    for seed in range(60):
        with meter() as m:
            out = run(agg, Batch.from_lists([x]), Params(epsilon=epsilon), method="scalefree", rng=Rng.seeded(seed))
        assert np.isnan(out[0]) or abs(m.spent("pure") - epsilon) < 1e-9, (seed, m.describe())


#: the near route's low class (n_hat eps < NEAR_FROM[0]) with its scale step on the matrix's 40-row neighbours: eps
#: 2.5 puts n_hat eps ~ 100 there, above the tail's NULL (60); p90 and the IQR (both near at n min(p, 1 - p) eps < 100)
_SCALE_CELLS = [(pair, agg) for pair in ("one_at_+1e300", "one_at_-inf", "far_outlier_1e15", "equal_plus_far",
                                         "two_far_clusters", "hugeint_min", "subnormal")
                for agg in ("p90", "iqr")]


@pytest.mark.parametrize(("pair", "agg"), _SCALE_CELLS)
def test_near_scale_route_at_the_extremes(pair, agg):
    """The scale step (:func:`~dpsql.core.scalefree.near_scale`) through the whole near route on extreme neighbours,
    1000 runs a side: empirical eps <= the claim."""
    aggregate, p = ("quantile", 0.9) if agg == "p90" else ("iqr", 0.5)
    assert [sp for sp, idx in S.near_classes(np.array([40.0]), 2.5) if idx.size] == [S.SPLIT_NEAR]
    params = matrix_params(aggregate, "scalefree", 2.5, p=p)
    eps, claim, note = matrix_cell(aggregate, "scalefree", params, pair, 1000,
                                   zlib.crc32(f"scale{pair}{agg}".encode()))
    assert eps <= claim, (eps, claim, note)


_SCALE_DATA = {pair: EXTREME_NEIGHBOURS[pair] for pair in ("one_at_+inf", "one_at_-1e300", "far_outlier_1e15",
                                                          "equal_plus_far", "two_far_clusters", "bigint_max")}


@pytest.mark.parametrize("epsilon", [MIN_EPSILON, 0.3, MAX_EPSILON])
@pytest.mark.parametrize("pair", list(_SCALE_DATA))
@pytest.mark.parametrize("centre", [5.0, 0.0])
def test_near_scale_privacy(pair, epsilon, centre):
    """:func:`~dpsql.core.scalefree.near_scale` alone, the centre and the floor fixed (released values), at the
    smallest and largest accepted eps and one between, on extreme neighbours (rows at +-inf and +-1e300 code to the
    window's top; c = 0 anchors the window at the floor): 3000 runs a side, empirical eps <= eps."""
    d, d2 = _SCALE_DATA[pair]
    runs = 3000
    outs = []
    for data in (d, d2):
        s = Batch.from_lists([data] * runs).sorted()
        e = np.full(runs, 0, dtype=np.int64)
        outs.append(S.near_scale(s, np.full(runs, centre), e, epsilon, Rng.seeded(zlib.crc32(f"ns{pair}".encode()))))
    assert empirical_epsilon(*outs) <= epsilon


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e3])
def test_near_route_keeps_the_spread_in_any_unit(scale):
    """Issue 12: seed 003's floor is noise around 2**0 at the near route's small n eps, so on data whose spread is
    far from 1 (penguins' body mass in grams, IQR ~1,100) the decaying codes began ~10 octaves below it and dp_iqr
    released exactly 0 in ~40 % of runs (p90 sat at the median).  With the scale step the IQR of the same data in
    grams, kilograms or milligrams is found: exactly 0 in < 10 % of 400 seeded runs, median error < 0.6 IQR."""
    x = np.round(np.random.default_rng(12).normal(4200.0, 800.0, 100) / 25.0) * 25.0 * scale
    iqr = np.subtract(*np.percentile(x, [75, 25]))
    out = run("iqr", Batch.from_lists([x] * 400), Params(epsilon=1.0), method="scalefree", rng=Rng.seeded(13))
    ok = ~np.isnan(out)
    assert np.mean(out[ok] == 0.0) < 0.10, np.mean(out[ok] == 0.0)
    assert np.median(np.abs(out[ok] - iqr)) < 0.6 * iqr


#: the route classes with their released count held fixed (a public input, as a released value is to the steps
#: after it), so moderate eps reaches them with 40 rows: the route check's zones (mid at n_hat eps = 230, low at 330)
#: and the top class (3,000); the empirical eps of 2,000 runs a side can only show violations well below the
#: eps = 5.5-80 the matrix cells above need for these classes
_FIXED_ROUTES = [("mid", 230.0, "mean"), ("low", 330.0, "mean"), ("low", 330.0, "sum"), ("top", 3000.0, "mean"),
                 ("top", 3000.0, "sum")]


@pytest.mark.parametrize("eps", [MIN_EPSILON, 0.5, MAX_EPSILON])
@pytest.mark.parametrize(("route", "ne", "agg"), _FIXED_ROUTES)
@pytest.mark.parametrize("pair", ["one_at_+1e300", "one_at_-inf", "far_outlier_1e15", "equal_plus_far",
                                  "two_far_clusters"])
def test_route_classes_with_a_fixed_count(route, ne, agg, pair, eps):
    """:func:`~dpsql.core.scalefree.mean_sum_route` of the route-check zones and the top class at eps = 0.5 and at
    the smallest and largest accepted eps on extreme neighbours, the first count fixed (so n_hat eps sits in the
    class whatever eps): the second count, the routes it gives and the class's steps, 2,000 runs a side, empirical
    eps <= eps."""
    runs = 2000
    classes = dict((r, sp) for r, _, sp in S.mean_classes(np.zeros(0), eps, agg))
    d, d2 = EXTREME_NEIGHBOURS[pair]
    outs = []
    for data in (d, d2):
        s = Batch.from_lists([data] * runs).sorted()
        n = np.full(runs, ne / eps)
        assert (route not in ("mid", "low")) or S.confirm_zone(route, n, eps, agg).all()
        rng = Rng.seeded(zlib.crc32(f"fx{pair}{route}{agg}".encode()))
        outs.append(S.mean_sum_route(s, n, route, classes[route], eps, rng, Params(epsilon=eps), None, agg)[0])
    assert empirical_epsilon(*outs) <= eps
