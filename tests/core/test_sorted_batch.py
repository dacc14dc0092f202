"""core.batch.SortedBatch: a sorted batch is its own sorted batch without a reference cycle, so its arrays go with
its last reference (not with the cyclic collector: a per-chunk sort would otherwise keep every chunk's rows)."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from dpsql.core.batch import Batch, SortedBatch


def test_sorted_is_its_own_sorted_batch_without_a_cycle() -> None:
    b = Batch(np.array([3.0, 1.0, 2.0, 5.0, 4.0]), np.array([0, 3, 5]))
    s = b.sorted()
    assert isinstance(s, SortedBatch) and s.sorted() is s and s.is_sorted() and b.sorted() is s
    assert np.array_equal(s.values, [1.0, 2.0, 3.0, 4.0, 5.0]) and np.array_equal(s.offsets, b.offsets)
    s.composite()  # cached on it
    s._sorted = None  # ignored: still sorted
    assert s.sorted() is s
    gone = weakref.ref(s)
    gc.disable()
    try:
        del b, s
        assert gone() is None  # freed by reference counting alone
    finally:
        gc.enable()
