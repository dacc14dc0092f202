"""The scale-free floor with zero gaps discounted (``iqr_lower_bound(..., ties=True)``, ``ranges.ZERO_GAP``).

Seed 003's IQR lower bound counts a tied pair as a small gap at every scale, so a column of a few values with more
than 3/16 tied pairs drove the floor to 2**-1000 and the median of {-5, -2, 7} came out as +-1e-18 ... 1e-216.
Here: the queries' sensitivity stays 16 (checked on every query of coupled neighbours), the floor and the whole
median pass the statistical privacy test on tied and extreme neighbours at the smallest, unit and largest epsilon,
and the median of such a column is its tie value.
"""

import math
import zlib

import numpy as np
import pytest

from dpsql.core import Batch, Params, ranges, run
from dpsql.core import scalefree as S
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.noise import Rng
from dpsql.testing import EXTREME_NEIGHBOURS, empirical_epsilon


def _queries(monkeypatch: pytest.MonkeyPatch, a: np.ndarray, b: np.ndarray, ties: bool) -> np.ndarray:
    """Every up and down query of the floor on the pairs (a, b) of one group, at k = 1 .. 1100."""
    seen = []

    def scan(q, groups, threshold, sensitivity, epsilon, rng, max_queries, **kw):  # noqa: ANN001, ANN202
        assert sensitivity == 16 and threshold == 0
        seen.append(q(np.arange(groups), np.arange(1, 1101)))
        return np.ones(groups, dtype=np.int64)  # stop at once: the downward scan runs too

    monkeypatch.setattr(ranges, "svt_scan", scan)
    ranges.iqr_lower_bound(Batch.from_lists([[0.0]]), 1.0, Rng.seeded(0), (a, b, np.zeros(a.size, np.int64)), ties)
    return np.concatenate(seen, axis=1)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("trial", range(30))
def test_one_gap_in_one_gap_out_moves_every_query_by_at_most_16(monkeypatch: pytest.MonkeyPatch, ties, trial):
    """The matching coupling: a neighbour's pairs are D's with one gap removed, one added, or one replaced."""
    r = np.random.default_rng(trial)
    pool = np.array([0.0, -2.0, 7.0, 1e-300, 5e-324, 2.0**-1000, 1e300, -1e300, 3.0, 3.0 + 2**-50])
    m = int(r.integers(1, 40))
    a, b = r.choice(pool, m), r.choice(pool, m)
    b[: m // 2] = a[: m // 2]  # many ties
    q = _queries(monkeypatch, a, b, ties)
    x, y = r.choice(pool, 2)
    for a2, b2 in ((a[1:], b[1:]), (np.r_[a, x], np.r_[b, y]), (np.r_[x, a[1:]], np.r_[y, b[1:]])):
        if a2.size:
            assert np.abs(_queries(monkeypatch, a2, b2, ties) - q).max() <= 16


_COLUMN = [-5.0] * 22 + [-2.0] * 4 + [7.0] * 24
_TIED = {
    "three_values_plus_one": (_COLUMN, _COLUMN + [-2.0]),
    "three_values_plus_far": (_COLUMN, _COLUMN + [1e300]),
    "zeros_plus_one": ([0.0] * 40, [0.0] * 41),
    "zeros_plus_a_value": ([0.0] * 40, [0.0] * 40 + [1.0]),
    "mostly_zeros_plus_inf": ([0.0] * 36 + [1.0] * 4, [0.0] * 36 + [1.0] * 4 + [math.inf]),
    "constant_tiny_plus_subnormal": ([1e-300] * 40, [1e-300] * 40 + [5e-324]),
}
_CELLS = ([(pair, 1.0) for pair in list(_TIED) + ["equal_plus_far", "two_far_clusters", "one_at_-inf"]]
          + [(pair, e) for pair in ("three_values_plus_one", "zeros_plus_a_value", "equal_plus_far")
             for e in (MIN_EPSILON, MAX_EPSILON)])


def _pair(name: str) -> tuple[list[float], list[float]]:
    return _TIED[name] if name in _TIED else EXTREME_NEIGHBOURS[name]


@pytest.mark.parametrize(("pair", "eps"), _CELLS)
def test_floor_with_ties_privacy(pair, eps):
    """The floor alone (rate 1), 3000 runs a side."""
    d, d2 = _pair(pair)
    rng = Rng.seeded(zlib.crc32(f"ties{pair}{eps}".encode()))
    a, b = (S.floor_exponent(Batch.from_lists([x] * 3000), eps, rng).astype(float) for x in (d, d2))
    assert empirical_epsilon(a, b) <= eps


@pytest.mark.parametrize("pair", ["three_values_plus_one", "zeros_plus_a_value", "mostly_zeros_plus_inf"])
def test_median_on_tied_neighbours_privacy(pair):
    d, d2 = _pair(pair)
    rng = Rng.seeded(zlib.crc32(f"tiesmedian{pair}".encode()))
    params = Params(epsilon=1.0, p=0.5)
    a, b = (run("quantile", Batch.from_lists([x] * 2000), params, method="scalefree", rng=rng) for x in (d, d2))
    assert empirical_epsilon(a, b) <= 1.0


def test_three_values_around_zero_keep_their_floor_and_median():
    """{-5 x4321, -2 x703, 7 x4976}, eps 1: the floor stays near the gaps' scale and the median is -2 (within its
    code's cell) in most runs; seed 003's queries sent the floor to 2**-1000 and the median to ~1e-18."""
    x = np.array([-5.0] * 4321 + [-2.0] * 703 + [7.0] * 4976)
    b = Batch.from_lists([x] * 100)
    e = S.floor_exponent(b, 0.05, Rng.seeded(1))
    assert np.all(e >= -8)
    r = run("quantile", b, Params(epsilon=1.0, p=0.5), method="scalefree", rng=Rng.seeded(2))
    assert np.mean(np.abs(r + 2.0) < 1e-9) >= 0.9


@pytest.mark.parametrize("data", [[0.0] * 1000, [1e-300] * 1000, [3.0] * 1000])
def test_a_constant_column_still_releases_its_value(data):
    """A constant column (every gap 0): its median is the value, to the codes' resolution at the floor."""
    b = Batch.from_lists([data] * 50)
    r = run("quantile", b, Params(epsilon=1.0, p=0.5), method="scalefree", rng=Rng.seeded(3))
    assert np.median(np.abs(r - data[0])) <= max(abs(data[0]) * 1e-9, 2.0**-30)
