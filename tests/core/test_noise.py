"""The noise module: distributions are right, production draws come from the OS CSPRNG."""

import math

import numpy as np
import pytest
from scipy import stats

from dpsql.noise import Rng, discrete_gaussian, discrete_laplace, exponential_mechanism, system_rng


def test_production_rng_is_the_os_csprng():
    assert system_rng().is_secure
    assert not Rng.seeded(1).is_secure
    a, b = system_rng().words(4), system_rng().words(4)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("t", [0.3, 1.0, 7.5, 1e4])
def test_discrete_laplace_pmf(t):
    # chi-square goodness of fit against P(k) = (1-q)/(1+q) q^|k|; false-alarm rate 1e-4 per case
    n = 200_000
    x = discrete_laplace(t, Rng.seeded(11), n)
    assert x.dtype == np.int64
    q = math.exp(-1.0 / t)
    if t > 100:
        # compare moments: Var = 2q/(1-q)^2
        var = 2 * q / (1 - q) ** 2
        assert abs(x.var() / var - 1) < 0.02
        return
    ks = np.arange(-30, 31)
    p = (1 - q) / (1 + q) * q ** np.abs(ks)
    obs = np.array([(x == k).sum() for k in ks])
    keep = p * n > 5
    chi2 = (((obs - n * p) ** 2) / (n * p))[keep].sum()
    assert chi2 < stats.chi2.ppf(1 - 1e-4, keep.sum())


def test_discrete_laplace_tail_is_not_truncated():
    # with t = 1 the variate exceeds 40 with probability ~ e^-40; the memoryless restart makes such
    # values possible at all (plain 53-bit inversion stops near 36.7)
    rng = Rng.seeded(3)
    e = rng.exponential(2_000_000)
    assert e.max() > 10
    assert np.all(np.isfinite(e)) and np.all(e > 0)


def test_discrete_gaussian_variance():
    x = discrete_gaussian(4.0, Rng.seeded(5), 200_000)
    assert abs(x.mean()) < 0.05
    assert abs(x.std() / 4.0 - 1) < 0.01


def test_exponential_mechanism_frequencies():
    logw = np.log(np.array([1.0, 2.0, 7.0, 1.0, 1.0]))
    offsets = np.array([0, 3, 5])
    R = 40_000
    lw = np.tile(logw, R)
    offs = np.concatenate([[0], np.cumsum(np.tile(np.diff(offsets), R))])
    pick = exponential_mechanism(lw, offs, Rng.seeded(9))
    local = pick - offs[:-1]
    first = local[0::2]
    assert abs((first == 2).mean() - 0.7) < 0.01
    second = local[1::2]
    assert abs((second == 0).mean() - 0.5) < 0.01


def test_integers_uniform_and_exact():
    rng = Rng.seeded(2)
    lo = np.zeros(60_000, dtype=np.int64)
    hi = np.full(60_000, 5, dtype=np.int64)
    x = rng.integers(lo, hi)
    assert x.min() == 0 and x.max() == 5
    counts = np.bincount(x, minlength=6)
    assert stats.chisquare(counts).pvalue > 1e-4
    big = rng.integers(np.array([2**50]), np.array([2**50 + 3]))
    assert 2**50 <= big[0] <= 2**50 + 3


def test_noise_rejects_bad_scale():
    with pytest.raises(ValueError):
        discrete_laplace(float("nan"), Rng.seeded(1), 3)
    with pytest.raises(ValueError):
        discrete_laplace(-1.0, Rng.seeded(1), 3)


def test_two_stage_exponential_mechanism_has_the_softmax_law():
    """Segments larger than 4 blocks are sampled block-then-member; the law must not change."""
    n1 = 6000
    lw1 = np.log(np.arange(1, n1 + 1, dtype=float))  # P(i) proportional to i
    lw1[2000:2500] = -np.inf
    lw2 = np.full(5000, -np.inf)
    lw2[3], lw2[4999] = 0.0, np.log(3.0)
    lw = np.concatenate([lw1, lw2])
    off = np.array([0, n1, n1 + 5000])
    rng = Rng.seeded(21)
    R = 6000
    picks = np.array([exponential_mechanism(lw, off, rng, block=256) for _ in range(R)])
    w = np.where(np.isfinite(lw1), np.exp(lw1), 0.0)
    p = np.add.reduceat(w / w.sum(), np.arange(0, n1, 1000))
    obs = np.bincount(picks[:, 0] // 1000, minlength=6) / R
    assert np.all(np.abs(obs - p) < 0.02)
    assert obs[2] == pytest.approx(p[2], abs=0.02) and not np.any((picks[:, 0] >= 2000) & (picks[:, 0] < 2500))
    second = picks[:, 1] - n1
    assert set(np.unique(second)) <= {3, 4999}
    assert abs((second == 4999).mean() - 0.75) < 0.02


# --------------------------------------------------------------------------- exactness at every scale (issue 11)


def _z(k: int, n: int, p: float) -> float:
    return abs(k - n * p) / math.sqrt(n * p * (1 - p) + 1e-300)


@pytest.mark.parametrize("t", [0.3, 1.0, 3.0, 2**16 - 0.5, 2**16 + 0.5, 1.3 * 2**17, 1.7 * 2**33, 2.0**48])
@pytest.mark.parametrize("vector", [False, True])
def test_geometric_law_at_every_scale(t, vector):
    """P(G >= k) = exp(-k/t) at every scale up to MAX_SCALE, and the low bits follow the truncated law.

    The old sampler, floor(t E) capped at 2**62, saturated for huge t (both draws of a discrete Laplace
    equal, noise exactly 0) and lost the integer grid once t E neared 2**53 / spacing of E."""
    from dpsql.noise import geometric

    n = 200_000
    g = geometric(np.full(n, t) if vector else t, n, Rng.seeded(int(t * 7) % 1000 + vector))
    assert g.dtype == np.int64 and g.min() >= 0
    for x in (0.01, 0.25, 1.0, 3.0):
        k = max(int(x * t), 1)
        p = math.exp(-k / t)
        assert _z(int((g >= k).sum()), n, p) < 5, (x, k)
    if t >= 2:  # the bits below 2**j, j = floor(log2 t): a geometric truncated to [0, m), ratio q
        m = 2 ** min(int(math.log2(t)), 16)
        q = math.exp(-1.0 / t)
        p_half = (1 - q ** (m // 2)) / (1 - q**m)
        assert _z(int(((g % m) < m // 2).sum()), n, p_half) < 5
        assert _z(int((g % 2 == 0).sum()), n, 1 / (1 + q)) < 5


def test_discrete_laplace_does_not_saturate_at_the_largest_scale():
    from dpsql.noise import MAX_SCALE

    z = discrete_laplace(MAX_SCALE, Rng.seeded(4), 50_000)
    assert np.count_nonzero(z == 0) == 0
    assert abs((z > 0).mean() - 0.5) < 0.02
    assert _z(int((np.abs(z) >= MAX_SCALE).sum()), z.size, 2 * math.exp(-1) / (1 + math.exp(-1 / MAX_SCALE))) < 5
    with pytest.raises(ValueError):
        discrete_laplace(MAX_SCALE * 2, Rng.seeded(1), 3)
    with pytest.raises(ValueError):
        discrete_laplace(float("inf"), Rng.seeded(1), 3)


def test_exponential_is_exact_at_both_ends():
    from scipy import stats

    e = Rng.seeded(4).exponential(4_000_000)
    assert np.all(e > 0) and np.all(np.isfinite(e))
    assert stats.kstest(e, "expon").pvalue > 1e-4
    small = e[e < 2**-11] * 2**11  # the refined small end: uniform given the event
    assert stats.kstest(small, "uniform").pvalue > 1e-4
    assert _z(small.size, e.size, -math.expm1(-(2**-11))) < 5
    tail = e[e > 11 * math.log(2)] - 11 * math.log(2)  # memoryless restart
    assert stats.kstest(tail, "expon").pvalue > 1e-4
    assert e.max() > 14  # beyond what a 53-bit uniform's -log reaches at this sample size is allowed


def test_discrete_gaussian_at_a_large_scale():
    x = discrete_gaussian(2.0**40, Rng.seeded(6), 100_000)
    assert abs(x.std() / 2.0**40 - 1) < 0.01
    assert np.count_nonzero(x == 0) == 0
