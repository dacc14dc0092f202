"""The radius scan's drift past a released anchor (issue 12): a public per-step term, so the monotone SVT's
privacy is unchanged; past the anchor the scan stops within a few steps instead of running off."""

import zlib

import numpy as np
import pytest

from dpsql.core import Batch
from dpsql.core.ranges import drift_start, radius
from dpsql.core.registry import MAX_EPSILON, MIN_EPSILON
from dpsql.noise import Rng
from dpsql.testing import EDGE_PAIRS, EXTREME_NEIGHBOURS, empirical_epsilon


def test_drift_start_is_the_first_step_reaching_the_anchor():
    b = np.array([1.0, 1.0, 0.5, 2.0**-1074, 4.0])
    anchor = np.array([0.5, 3.0, 1e6, 2.0**1002, np.inf])
    k = drift_start(b, anchor, fine=True)
    assert k[0] == 0 and k[-1] >= 0
    for i in range(4):  # in logs: b 2**(k / 2) may overflow
        assert np.log2(b[i]) + k[i] / 2.0 >= np.log2(anchor[i]) - 1e-9 or k[i] == 0
        assert k[i] == 0 or np.log2(b[i]) + (k[i] - 1) / 2.0 < np.log2(anchor[i])
    assert k[3] == 2 * (1002 + 1074)
    assert np.array_equal(drift_start(b[:3], anchor[:3], fine=False), [0, 2, 21])


def _scan(values: list[float], runs: int, eps: float, rng: Rng, drift: int, anchor: float) -> np.ndarray:
    s = Batch.from_lists([values] * runs).sorted()
    c = np.full(runs, 50.0)
    b = np.full(runs, 2.0**-4)
    return radius(s, c, b, eps, rng, 0.5, outside=2.0 / eps, monotone=True, fine=True,
                  anchor=np.full(runs, anchor), drift=drift)


def test_the_drift_stops_run_offs_past_the_anchor():
    """Uniform data within 50 of c, anchor 100: without the drift a large threshold draw runs the scan far past
    the data; with one noise scale per step it stops within a few steps of the anchor."""
    x = list(np.linspace(0.0, 100.0, 400))
    eps = 1.0
    off = _scan(x, 4000, eps, Rng.seeded(3), 0, 100.0)
    on = _scan(x, 4000, eps, Rng.seeded(3), 2, 100.0)
    assert np.mean(off > 1600.0) > 0.01
    assert np.mean(on > 1600.0) < 1e-3  # 8 steps past the anchor: ~e**-8
    assert np.median(on) == np.median(off)  # below the anchor the queries are the same


_CELLS = ([(pair, 1.0) for pair in ("one_at_+1e300", "one_at_-inf", "hugeint_min", "far_outlier_1e15",
                                     "two_far_clusters", "equal_plus_far")]
          + [(pair, eps) for pair in EDGE_PAIRS for eps in (MIN_EPSILON, MAX_EPSILON)])


@pytest.mark.parametrize(("pair", "epsilon"), _CELLS)
def test_drifted_scan_privacy(pair, epsilon):
    """The drifted scan on extreme neighbours, the anchor inside the base data (so the far row's query crosses
    the drift zone), 3000 runs a side: empirical eps <= eps."""
    d, d2 = EXTREME_NEIGHBOURS[pair]
    drift = int(np.ceil(2.0 / epsilon))
    rng = Rng.seeded(zlib.crc32(f"drift{pair}{epsilon}".encode()))
    a = _scan(d, 3000, epsilon, rng, drift, 20.0)
    b = _scan(d2, 3000, epsilon, rng, drift, 20.0)
    assert empirical_epsilon(a, b) <= epsilon
