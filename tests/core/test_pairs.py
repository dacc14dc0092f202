"""The random matching behind the IQR bound: every segment's order is a uniformly random permutation,
on each path of ``Rng.shuffle_segments`` (partition by labels, per-leaf Fisher-Yates, packed-key sort,
tied keys), and the pairs cover each group."""

import itertools
import math

import numpy as np
import pytest

import dpsql.noise as noise
from dpsql.core.batch import Batch
from dpsql.core.ranges import _gap_exponent_counts, random_pairs
from dpsql.noise import Rng


def _perm_freqs(out: np.ndarray, size: int) -> np.ndarray:
    """Frequencies of the orders of ``out`` read as consecutive segments of ``size`` holding 0..size-1."""
    perms = {p: i for i, p in enumerate(itertools.permutations(range(size)))}
    codes = [perms[tuple(r)] for r in out.reshape(-1, size).astype(int)]
    return np.bincount(codes, minlength=len(perms)) / len(codes)


def _assert_uniform(out: np.ndarray, size: int, reps: int) -> None:
    f = _perm_freqs(out, size)
    p = 1 / math.factorial(size)
    # every order within 5 standard errors (a false alarm has probability < 1e-4 over all cells)
    assert np.all(np.abs(f - p) <= 5 * np.sqrt(p * (1 - p) / reps)), f


def _segments(reps: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    values = np.tile(np.arange(size, dtype=np.float64), reps)
    return values, np.arange(reps + 1, dtype=np.int64) * size


@pytest.mark.parametrize(
    "leaf, key_sort_below",
    [
        (2**15, 0),  # small segments, one Fisher-Yates call each
        (2**15, 10**9),  # small segments, one packed-key sort for all
        (1, 0),  # every segment partitioned by random labels first, then Fisher-Yates per part
        (1, 10**9),  # partitioned, then the key sort over the parts
    ],
)
def test_every_path_gives_uniform_orders(monkeypatch: pytest.MonkeyPatch, leaf: int, key_sort_below: int) -> None:
    monkeypatch.setattr(noise, "_LEAF", leaf)
    monkeypatch.setattr(noise, "_KEY_SORT_BELOW", key_sort_below)
    reps, size = 24000, 4
    values, offsets = _segments(reps, size)
    out = Rng.seeded(1).shuffle_segments(values, offsets)
    _assert_uniform(out, size, reps)


class _ZeroWords(Rng):
    """All random words are 0 (every label and every key's random bits tie); Fisher-Yates still seeded."""

    def __init__(self) -> None:
        super().__init__(np.random.Generator(np.random.PCG64(7)))

    def words(self, n: int) -> np.ndarray:
        return np.zeros(int(n), dtype=np.uint64)


def test_tied_keys_are_broken_uniformly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "_KEY_SORT_BELOW", 10**9)
    reps, size = 24000, 4
    values, offsets = _segments(reps, size)
    out = _ZeroWords().shuffle_segments(values, offsets)
    _assert_uniform(out, size, reps)


def test_large_segments_are_partitioned_recursively_and_stay_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "_LEAF", 4)
    sizes = [0, 1, 3, 9, 200, 5000, 2]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = np.arange(offsets[-1], dtype=np.float64)
    for below in (0, 10**9):
        monkeypatch.setattr(noise, "_KEY_SORT_BELOW", below)
        out = Rng.seeded(3).shuffle_segments(values, offsets)
        for a, b in zip(offsets[:-1], offsets[1:], strict=True):
            assert sorted(out[a:b]) == list(range(a, b))
        assert not np.array_equal(out[offsets[5] : offsets[6]], values[offsets[5] : offsets[6]])


def test_first_position_is_uniform_in_a_partitioned_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64-row segment split into parts by labels: the row placed first is uniform over all 64."""
    monkeypatch.setattr(noise, "_LEAF", 4)
    reps, size = 12800, 64
    values, offsets = _segments(reps, size)
    out = Rng.seeded(5).shuffle_segments(values, offsets).reshape(reps, size)
    for col in (0, 31, 63):
        f = np.bincount(out[:, col].astype(int), minlength=size) / reps
        assert np.all(np.abs(f - 1 / size) <= 5 * np.sqrt(1 / size / reps)), (col, f)


def test_production_generator_shuffles_without_a_seed() -> None:
    values, offsets = _segments(3, 10)
    out = noise.system_rng().shuffle_segments(values, offsets)
    assert sorted(out.tolist()) == sorted(values.tolist())


def test_random_pairs_stay_in_their_group_and_cover_it() -> None:
    sizes = [0, 1, 2, 5, 8, 1001]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    b = Batch(np.arange(off[-1], dtype=np.float64), off)
    a, c, g = random_pairs(b, Rng.seeded(2))
    group_of = b.group_ids
    assert np.all(group_of[a.astype(int)] == g) and np.all(group_of[c.astype(int)] == g)
    assert np.bincount(g, minlength=len(sizes)).tolist() == [s // 2 for s in sizes]
    assert np.unique(np.concatenate([a, c])).size == 2 * a.size


def _matching_freqs(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Pairs of 4-row groups (values 0..3) -> frequencies of the 3 perfect matchings, named by the partner
    of row 0 (1: {01, 23}, 2: {02, 13}, 3: {03, 12})."""
    lo = np.minimum(first, second).reshape(-1, 2)
    hi = np.maximum(first, second).reshape(-1, 2)
    partner = np.where(lo[:, 0] == 0, hi[:, 0], hi[:, 1]).astype(int)
    return np.bincount(partner - 1, minlength=3) / partner.size


def test_random_pairs_form_a_uniform_matching() -> None:
    """Four rows have 3 perfect matchings; each appears a third of the time (one group and many)."""
    reps = 3000
    rng = Rng.seeded(11)
    one = Batch(np.arange(4.0), np.array([0, 4], dtype=np.int64))
    draws = [random_pairs(one, rng) for _ in range(reps)]
    f1 = _matching_freqs(np.concatenate([d[0] for d in draws]), np.concatenate([d[1] for d in draws]))
    many = Batch(np.tile(np.arange(4.0), 10 * reps), np.arange(10 * reps + 1, dtype=np.int64) * 4)
    first, second, _ = random_pairs(many, rng)
    f2 = _matching_freqs(first, second)
    for f, m in ((f1, reps), (f2, 10 * reps)):
        assert np.all(np.abs(f - 1 / 3) <= 5 * np.sqrt(2 / 9 / m)), f


@pytest.mark.parametrize("groups", [1, 7, 2500])  # dense table (<= ~2000 groups) and sorted keys
def test_gap_exponent_counts_match_brute_force(groups: int) -> None:
    rng = np.random.default_rng(groups)
    n = 20000
    pg = np.sort(rng.integers(0, groups, n))
    y = np.abs(rng.standard_cauchy(n)) * 2.0 ** rng.integers(-1100, 1000, n)
    y[rng.random(n) < 0.05] = 0.0
    powers = rng.random(n) < 0.05
    y[powers] = 2.0 ** rng.integers(-5, 5, int(powers.sum()))  # exact powers of two: y <= 2**k with equality
    y = np.minimum(y, 2.0**1001)
    count_le = _gap_exponent_counts(y, pg, groups)
    g = rng.integers(0, groups, 40)
    k = np.array([-998, -997, -500, -1, 0, 1, 2, 3, 500, 1099, 1100])
    got = count_le(g, k)
    with np.errstate(over="ignore"):
        bound = np.ldexp(1.0, k)  # inf above 2**1023: every finite gap is below
    want = np.array([[np.sum((pg == gi) & (y <= bj)) for bj in bound] for gi in g])
    assert np.array_equal(got, want)


def test_presort_gives_the_sorted_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsql.core.batch as batch_mod

    monkeypatch.setattr(batch_mod, "PRESORT_MIN", 0)
    rng = np.random.default_rng(4)
    off = np.array([0, 0, 5, 1000, 1001, 3000], dtype=np.int64)
    b = Batch(rng.normal(size=3000), off)
    before = b.values.copy()
    b.presort()
    b.presort()  # a second call while the first runs is a no-op
    # the matching reads the unsorted values meanwhile
    first, second, _ = random_pairs(b, Rng.seeded(1))
    s = b.sorted()
    assert s is b.sorted() and s.is_sorted()
    assert np.array_equal(b.values, before)
    for lo, hi in zip(off[:-1], off[1:], strict=True):
        assert np.array_equal(s.values[lo:hi], np.sort(before[lo:hi]))


@pytest.mark.parametrize(
    "agg, method",
    [("mean", "universal"), ("sum", "universal"), ("var", "universal"), ("quantile", "universal"),
     ("iqr", "universal"), ("quantile", "threshold"), ("iqr", "threshold"), ("mean", "shifted_cm"),
     ("mean", "trimmed_t"), ("mean", "subset"), ("mean", "asymmetric"), ("var", "asymmetric")],
)
def test_sorting_in_a_worker_thread_changes_no_release(monkeypatch: pytest.MonkeyPatch, agg: str, method) -> None:
    """The same seed gives the same release whether the sort overlaps the matching or not."""
    import dpsql.core.batch as batch_mod
    from dpsql.core import Params, run

    rng = np.random.default_rng(8)
    off = np.array([0, 1500, 1503, 4000], dtype=np.int64)
    values = rng.lognormal(size=4000) * 100
    params = Params(epsilon=1.0, p=0.5 if agg == "quantile" else None)
    out = []
    for threshold in (10**9, 0):
        monkeypatch.setattr(batch_mod, "PRESORT_MIN", threshold)
        out.append(run(agg, Batch(values.copy(), off), params, method=method, rng=Rng.seeded(21)))
    assert np.array_equal(out[0], out[1], equal_nan=True)
