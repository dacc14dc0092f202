"""The random matching behind the IQR bound: every group's order is a uniformly random permutation."""

import itertools

import numpy as np

from dpsql.core.batch import Batch
from dpsql.core.universal import _shuffle_within_groups, random_pairs
from dpsql.noise import Rng


def _perm_freqs(order: np.ndarray, offsets: np.ndarray, size: int) -> np.ndarray:
    perms = {p: i for i, p in enumerate(itertools.permutations(range(size)))}
    local = order - np.repeat(offsets[:-1], size)
    codes = [perms[tuple(r)] for r in local.reshape(-1, size)]
    return np.bincount(codes, minlength=len(perms)) / len(codes)


def test_shuffle_within_groups_is_uniform() -> None:
    reps, size = 24000, 3
    b = Batch(np.zeros(reps * size), np.arange(reps + 1, dtype=np.int64) * size)
    order = _shuffle_within_groups(b, b.group_ids, Rng.seeded(1))
    assert order is not None
    f = _perm_freqs(order, b.offsets, size)
    assert np.all(np.abs(f - 1 / 6) <= 5 * np.sqrt(1 / 6 * 5 / 6 / reps))


class _TiesFirst(Rng):
    """Returns all-zero words on the first request (every key ties), then a seeded stream."""

    def __init__(self) -> None:
        super().__init__(np.random.Generator(np.random.PCG64(7)))
        self.calls = 0

    def words(self, n: int) -> np.ndarray:
        self.calls += 1
        return np.zeros(int(n), dtype=np.uint64) if self.calls == 1 else super().words(n)


def test_shuffle_within_groups_redraws_on_ties() -> None:
    b = Batch(np.zeros(40), np.array([0, 10, 25, 40]))
    rng = _TiesFirst()
    order = _shuffle_within_groups(b, b.group_ids, rng)
    assert rng.calls == 2
    for g in range(3):
        sl = order[b.offsets[g]:b.offsets[g + 1]]
        assert sorted(sl) == list(range(b.offsets[g], b.offsets[g + 1]))


def test_random_pairs_stay_in_their_group_and_cover_it() -> None:
    sizes = [0, 1, 2, 5, 8, 1001]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    b = Batch(np.arange(off[-1], dtype=np.float64), off)
    first, second, g = random_pairs(b, Rng.seeded(2))
    gid = b.group_ids
    assert np.all(gid[first] == g) and np.all(gid[second] == g)
    assert np.bincount(g, minlength=len(sizes)).tolist() == [s // 2 for s in sizes]
    assert np.unique(np.concatenate([first, second])).size == 2 * first.size
