"""Primitives against brute force: the quantile exponential mechanism's law, segment counts, SVT."""

import numpy as np

from dpsql.core.batch import Batch
from dpsql.core.primitives import quantile_em, release_sum, seg_count_le, seg_count_lt
from dpsql.noise import Rng


def _brute_law(data, lo, hi, t, eps):
    ys = np.arange(lo, hi + 1)
    d = np.asarray(data)
    c_le = np.array([(d <= y).sum() for y in ys])
    c_lt = np.array([(d < y).sum() for y in ys])
    score = np.maximum(np.maximum(t - c_le, c_lt - t), 0)
    w = np.exp(-eps * score / 2)
    return ys, w / w.sum()


def test_quantile_em_matches_brute_force_law():
    groups = [([2, 2, 5, 9, 9, 9, 15], 0, 20, 3.5), ([], 3, 8, 0.0), ([0, 20], 0, 20, 1.0), ([7] * 5, 0, 10, 2.5)]
    eps = 1.3
    R = 8000
    codes, offs, lo, hi, tg = [], [0], [], [], []
    for _ in range(R):
        for data, a, b, t in groups:
            codes.extend(sorted(data))
            offs.append(offs[-1] + len(data))
            lo.append(a)
            hi.append(b)
            tg.append(t)
    out = quantile_em(np.array(codes, dtype=np.int64), np.array(offs), np.array(lo), np.array(hi),
                      np.array(tg), eps, Rng.seeded(17)).reshape(R, len(groups))
    for k, (data, a, b, t) in enumerate(groups):
        ys, p = _brute_law(data, a, b, t, eps)
        freq = np.array([(out[:, k] == y).mean() for y in ys])
        assert np.all((out[:, k] >= a) & (out[:, k] <= b))
        # 4-sigma binomial tolerance per value
        tol = 4 * np.sqrt(p * (1 - p) / R) + 1e-3
        assert np.all(np.abs(freq - p) <= tol), (k, np.round(freq, 3), np.round(p, 3))


def test_segment_counts_match_numpy():
    g = np.random.default_rng(0)
    data = [list(g.normal(size=s)) for s in (0, 5, 100, 1)]
    b = Batch.from_lists(data)
    qs_g = np.array([0, 1, 1, 2, 2, 3])
    qs_t = np.array([0.0, -0.5, 10.0, 0.1, -3.0, 0.0])
    le = seg_count_le(b, qs_g, qs_t)
    lt = seg_count_lt(b, qs_g, qs_t)
    for i, (gg, t) in enumerate(zip(qs_g, qs_t, strict=True)):
        x = np.asarray(data[gg])
        assert le[i] == (x <= t).sum() and lt[i] == (x < t).sum()


def test_release_sum_is_on_the_grid_and_unbiased():
    vals = np.tile(np.array([0.3, -0.7, 0.9]), 2000)
    offs = np.arange(0, vals.size + 1, 3)
    out = release_sum(vals, offs, np.full(offs.size - 1, 1.0), 1.0, Rng.seeded(3))
    gamma = 2.0**-20
    assert np.all(np.abs(out / gamma - np.rint(out / gamma)) == 0)
    assert abs(out.mean() - 0.5) < 0.1
