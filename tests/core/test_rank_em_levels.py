"""The roundness base measure of the rank EM (primitives.levelled_mass, levelled_integers, rank_em(levels=Z)):
masses against brute force, the sampler's law against enumeration (with and without the tails' rejection path),
Z = 0 drawing exactly what the uniform sampler draws, and the mechanism's privacy on neighbouring datasets."""

import numpy as np
import pytest

from dpsql.core.primitives import LEVELS_MAX, levelled_integers, levelled_mass, rank_em
from dpsql.noise import Rng


def _m(c: int, Z: int) -> int:
    """m(c) = sum_{z <= min(tz(c), Z)} 2**z, brute force."""
    return sum(1 << z for z in range(Z + 1) if c % (1 << z) == 0)


def _check(draws: np.ndarray, probs: np.ndarray) -> None:
    assert draws.min() >= 0 and draws.max() < probs.size
    freq = np.bincount(draws, minlength=probs.size) / draws.size
    tol = 5.0 * np.sqrt(probs * (1 - probs) / draws.size) + 1e-3
    assert np.all(np.abs(freq - probs) <= tol), (np.round(freq, 4), np.round(probs, 4))


@pytest.mark.parametrize("Z", [0, 1, 3, 16, LEVELS_MAX])
def test_levelled_mass_is_the_sum_of_the_codes_masses(Z: int) -> None:
    g = np.random.default_rng(Z)
    lo = g.integers(0, 300, 400)
    hi = lo + g.integers(-1, 200, 400)  # -1: the empty range
    got = levelled_mass(lo, hi, Z)
    want = [sum(_m(c, Z) for c in range(a, b + 1)) for a, b in zip(lo, hi, strict=True)]
    assert got.tolist() == want
    # large codes (up to 2**50) stay exact in int64: per level the count times 2**z
    big = np.array([0, 1, 2**49, 2**50 - 1])
    m = levelled_mass(big[:2], big[2:], Z)
    for (a, b), v in zip(((0, 2**49), (1, 2**50 - 1)), m, strict=True):
        assert int(v) == sum(((b >> z) - ((a - 1) >> z)) << z for z in range(Z + 1))


def test_levelled_mass_and_integers_around_an_origin() -> None:
    """With an origin o the levels count from o: m(c) = sum_{z <= min(tz(c - o), Z)} 2**z (codes below o too)."""
    Z, o = 3, 21
    lo, hi = np.array([0, 5, 17, 21]), np.array([40, 20, 30, 21])
    want = [sum(_m(abs(c - o), Z) for c in range(a, b + 1)) for a, b in zip(lo, hi, strict=True)]
    assert levelled_mass(lo, hi, Z, o).tolist() == want
    n = 40000
    draws = levelled_integers(Rng.seeded(8), np.full(n, 0), np.full(n, 40), Z, np.full(n, o))
    m = np.array([_m(abs(c - o), Z) for c in range(41)], dtype=float)
    _check(draws, m / m.sum())


def test_levels_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError):
        levelled_mass(np.array([0]), np.array([3]), LEVELS_MAX + 1)


@pytest.mark.parametrize(("lo", "hi", "Z"), [(0, 40, 3), (5, 37, 2), (1, 64, 6), (16, 16, 4), (3, 5, 16)])
def test_levelled_integers_law(lo: int, hi: int, Z: int) -> None:
    n = 40000
    draws = levelled_integers(Rng.seeded(lo * 100 + hi), np.full(n, lo), np.full(n, hi), Z)
    m = np.array([_m(c, Z) if lo <= c <= hi else 0 for c in range(hi + 1)], dtype=float)
    _check(draws, m / m.sum())


def test_zero_levels_draw_what_the_uniform_sampler_draws() -> None:
    lo, hi = np.arange(50), np.arange(50) * 3 + 7
    a = levelled_integers(Rng.seeded(3), lo, hi, 0)
    b = Rng.seeded(3).integers(lo, hi)
    assert np.array_equal(a, b)


def _loss(codes: np.ndarray, K: int, t: float, w: int) -> np.ndarray:
    y = np.arange(K + 1)
    cle = np.array([np.sum(codes <= v + w) for v in y])
    clt = np.array([np.sum(codes < v - w) for v in y])
    return np.maximum(0, np.maximum(t - cle, clt - t))


def _law(codes: np.ndarray, K: int, t: float, w: int, eps: float, Z: int) -> np.ndarray:
    lo = _loss(codes, K, t, w)
    p = np.array([_m(c, Z) for c in range(K + 1)]) * np.exp(-eps * (lo - lo.min()) / 2.0)
    return p / p.sum()


CASES = [
    # codes (sorted), K, target: ties on round codes (8, 16, 32), targets inside and beside a tie block
    ([1, 3, 3, 4, 9, 9, 9, 12, 20, 21, 22, 30, 31, 38], 40, 7.0),
    ([5] * 9 + [8] * 6 + [30] * 4, 40, 8.5),
    ([16] * 5 + [17] * 5 + [33] * 6, 63, 5.5),
    (list(range(0, 40, 3)), 45, 11.3),
]


@pytest.mark.parametrize("window", [0, 1])
@pytest.mark.parametrize("reach", [1, 3, None])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_rank_em_with_levels_has_the_enumerated_law(case: int, reach: int | None, window: int) -> None:
    codes, K, t = CASES[case]
    eps, Z, reps = 0.6, 4, 20000
    flat = np.tile(np.asarray(codes, dtype=np.int64), reps)
    off = np.arange(reps + 1, dtype=np.int64) * len(codes)
    draws = rank_em(flat, off, np.full(reps, K), np.full(reps, t), window, eps, Rng.seeded(31 + case), reach,
                    levels=Z)
    _check(draws, _law(np.array(codes), K, t, window, eps, Z))


def test_rank_em_with_levels_around_an_origin_has_the_enumerated_law() -> None:
    codes, K, t = CASES[1]
    eps, Z, reps, o = 0.6, 4, 20000, 19
    flat = np.tile(np.asarray(codes, dtype=np.int64), reps)
    off = np.arange(reps + 1, dtype=np.int64) * len(codes)
    draws = rank_em(flat, off, np.full(reps, K), np.full(reps, t), 0, eps, Rng.seeded(3), 2, levels=Z,
                    origin=np.full(reps, o))
    lo = _loss(np.array(codes), K, t, 0)
    p = np.array([_m(abs(c - o), Z) for c in range(K + 1)]) * np.exp(-eps * (lo - lo.min()) / 2.0)
    _check(draws, p / p.sum())


def test_rank_em_levels_pull_to_a_round_tie() -> None:
    """A tie block on a round code whose edge is near the target: the uniform measure mostly misses the tied
    value, the roundness measure mostly returns it."""
    codes = np.array([3] * 10 + [2**12] * 12 + [2**12 + 700] * 10, dtype=np.int64)
    K, t, eps, reps = 2**13, 16.0, 1.0, 4000
    flat = np.tile(codes, reps)
    off = np.arange(reps + 1, dtype=np.int64) * codes.size
    hit = []
    for Z in (0, 12):
        d = rank_em(flat, off, np.full(reps, K), np.full(reps, t), 0, eps, Rng.seeded(5), levels=Z)
        hit.append(np.mean(d == 2**12))
    assert hit[0] < 0.05 and hit[1] > 0.5, hit


@pytest.mark.parametrize("eps", [1e-3, 0.5, 50.0])
def test_rank_em_levels_is_eps_dp_on_neighbours(eps: float) -> None:
    """The mechanism's exact law on neighbouring datasets (a row added: the target moves by p, one count by one),
    extreme codes (0, K, round and odd codes): the log ratio never exceeds eps * max(p, 1 - p) / s, the
    charge of a caller at sensitivity s = max(p, 1 - p) passing eps / s."""
    K, Z = 2**10, 8
    g = np.random.default_rng(7)
    for _ in range(25):
        n = int(g.integers(1, 12))
        base = np.sort(g.choice(np.array([0, 1, K, K - 1, 2**9, 2**9 + 1, 3, 512, 768]), n))
        extra = int(g.choice([0, K, 2**9, 5]))
        for p in (0.5, 0.9):
            s = max(p, 1 - p)
            e = eps / s
            a = _law(base, K, p * n, 0, e, Z)
            b = _law(np.sort(np.append(base, extra)), K, p * (n + 1), 0, e, Z)
            with np.errstate(divide="ignore"):
                r = np.max(np.abs(np.log(a) - np.log(b)))
            assert r <= eps * (1 + 1e-9), (r, eps)
