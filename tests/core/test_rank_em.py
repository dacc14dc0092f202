"""The windowed rank EM (primitives.rank_em) against brute force: same law as the whole-domain sampler.

rank_em reads only the codes near the target and covers the rest with two envelope candidates plus a
rejection step.  A small ``reach`` makes the tails carry real mass, so these tests exercise the rejection
path; the default reach makes tails nearly never chosen.
"""

import numpy as np
import pytest

from dpsql.core import subset as ss
from dpsql.core.primitives import _pieces, quantile_em, rank_em, seg_search
from dpsql.noise import Rng


def _loss(codes: np.ndarray, K: int, t: float, w: int) -> np.ndarray:
    y = np.arange(K + 1)
    cle = np.array([np.sum(codes <= v + w) for v in y])
    clt = np.array([np.sum(codes < v - w) for v in y])
    return np.maximum(0, np.maximum(t - cle, clt - t))


def _law(codes: np.ndarray, K: int, t: float, w: int, eps: float) -> np.ndarray:
    lo = _loss(codes, K, t, w)
    p = np.exp(-eps * (lo - lo.min()) / 2.0)
    return p / p.sum()


def _draw(codes, K, t, w, eps, reps, seed, reach=None, fn=rank_em):
    flat = np.tile(np.asarray(codes, dtype=np.int64), reps)
    off = np.arange(reps + 1, dtype=np.int64) * len(codes)
    return fn(flat, off, np.full(reps, K), np.full(reps, t), w, eps, Rng.seeded(seed), reach)


def _check(draws: np.ndarray, probs: np.ndarray) -> None:
    assert draws.min() >= 0 and draws.max() < probs.size
    freq = np.bincount(draws, minlength=probs.size) / draws.size
    tol = 5.0 * np.sqrt(probs * (1 - probs) / draws.size) + 1e-3
    assert np.all(np.abs(freq - probs) <= tol), (np.round(freq, 4), np.round(probs, 4))


CASES = [
    # codes (sorted), K, target
    ([1, 3, 3, 4, 9, 9, 9, 12, 20, 21, 22, 30, 31, 38], 40, 7.0),
    ([1, 3, 3, 4, 9, 9, 9, 12, 20, 21, 22, 30, 31, 38], 40, 2.5),
    ([5] * 9 + [6] * 3 + [30] * 4, 40, 8.5),
    (list(range(0, 40, 3)), 45, 11.3),
]


@pytest.mark.parametrize("window", [0, 1, 2])
@pytest.mark.parametrize("reach", [1, 2, 4, None])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_rank_em_law_with_tails(case: int, reach: int | None, window: int) -> None:
    codes, K, t = CASES[case]
    eps = 0.6
    draws = _draw(codes, K, t, window, eps, 20000, 11 + case, reach)
    _check(draws, _law(np.array(codes), K, t, window, eps))


def test_rank_em_tails_are_exercised() -> None:
    """With reach 1 a large share of draws comes from outside the window (the rejection path runs)."""
    codes, K, t = CASES[0]
    draws = _draw(codes, K, t, 0, 0.3, 20000, 5, 1)
    a, b = codes[int(t) - 1 - 1], codes[int(np.ceil(t)) + 1 - 1]
    outside = np.mean((draws < a) | (draws > b))
    assert outside > 0.2


def test_rank_em_matches_the_reference_samplers() -> None:
    """Two-sample check: rank_em, the whole-domain threshold sampler and quantile_em agree."""
    codes, K, t = CASES[0]
    eps, reps = 0.8, 20000
    probs = _law(np.array(codes), K, t, 0, eps)
    ref = _draw(codes, K, t, 0, eps, reps, 3, fn=lambda *a: ss.threshold_codes_reference(*a[:-1]))
    _check(ref, probs)
    flat = np.tile(np.asarray(codes, dtype=np.int64), reps)
    off = np.arange(reps + 1, dtype=np.int64) * len(codes)
    qe = quantile_em(flat, off, np.zeros(reps, dtype=np.int64), np.full(reps, K), np.full(reps, t), eps,
                     Rng.seeded(4))
    _check(qe, probs)
    new = _draw(codes, K, t, 0, eps, reps, 5)
    _check(new, probs)


def test_rank_em_mixed_groups_and_edge_targets() -> None:
    """Many different groups in one call (empty, one row, targets beyond n or below 1), each with its law."""
    g = np.random.default_rng(0)
    groups = []
    for _ in range(12):
        n = int(g.integers(0, 15))
        K = int(g.integers(1, 30))
        codes = np.sort(g.integers(0, K + 1, n))
        t = float(g.choice([-1.0, 0.0, n / 2.0, n, n + 3.0, g.uniform(0, n + 1)]))
        groups.append((codes, K, t))
    reps, eps, w = 6000, 0.9, 1
    flat, off, Ks, ts = [], [0], [], []
    for _ in range(reps):
        for codes, K, t in groups:
            flat.extend(codes)
            off.append(off[-1] + codes.size)
            Ks.append(K)
            ts.append(t)
    out = rank_em(np.array(flat, dtype=np.int64), np.array(off), np.array(Ks), np.array(ts), w, eps,
                  Rng.seeded(9), 2).reshape(reps, len(groups))
    for k, (codes, K, t) in enumerate(groups):
        _check(out[:, k], _law(codes, K, t, w, eps))


@pytest.mark.parametrize("w", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_pieces_give_the_counts_everywhere(seed: int, w: int) -> None:
    """Every integer of each window gets the counts #{c <= y + w} and #{c < y - w} of brute force (w = 0
    takes the direct construction, w > 0 the merge of entry and exit events)."""
    g = np.random.default_rng(seed)
    G = 5
    data = [np.sort(g.integers(0, 50, int(g.integers(0, 30)))) for _ in range(G)]
    A = g.integers(0, 25, G)
    B = A + g.integers(0, 25, G)
    cs, cg, base = [], [], []
    for i, d in enumerate(data):
        sub = d[(d >= A[i] - w - 1) & (d <= B[i] + w)]
        base.append(int(np.sum(d < A[i] - w - 1)))
        cs.append(sub)
        cg.append(np.full(sub.size, i))
    pg, left, F, Gc = _pieces(np.concatenate(cs).astype(np.int64), np.concatenate(cg).astype(np.int64), G,
                              A, B, np.array(base), w)
    for i, d in enumerate(data):
        m = pg == i
        assert left[m][0] == A[i] and np.all(np.diff(left[m]) > 0) and left[m][-1] <= B[i]
        for y in range(A[i], B[i] + 1):
            j = np.searchsorted(left[m], y, side="right") - 1
            assert F[m][j] == np.sum(d <= y + w) and Gc[m][j] == np.sum(d < y - w)


def test_seg_search_matches_numpy() -> None:
    g = np.random.default_rng(1)
    a = np.concatenate([np.sort(g.integers(0, 20, s)) for s in (0, 7, 30, 1, 12)])
    off = np.cumsum([0, 0, 7, 30, 1, 12])
    lo, hi = off[:-1], off[1:]
    for side in ("left", "right"):
        for x in range(-1, 22):
            got = seg_search(a, lo, hi, np.full(5, x), side)
            want = [lo[i] + np.searchsorted(a[lo[i]:hi[i]], x, side=side) for i in range(5)]
            assert list(got) == want
