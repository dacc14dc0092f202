"""Batches of groups: flat float64 values plus offsets, and the data rules.

Data rules (documented in docs/sql-reference.md, applied here once for every estimator):

* NULL and NaN values are dropped (they are not counted).
* Every other value is clamped to ``[-DOMAIN, DOMAIN]`` with ``DOMAIN = 2**1000`` (about 1.07e301); so
  ``+inf`` and ``-inf`` become ``+DOMAIN`` and ``-DOMAIN``.  The clamp keeps differences and midpoints of
  any two values finite.
* Integers (and DECIMALs) are converted to the nearest float64; BIGINT/HUGEINT beyond 2**53 are rounded.
  Each rule is a fixed per-row map, so it never changes a mechanism's privacy guarantee.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

DOMAIN = 2.0**1000
#: batches at least this large sort in a worker thread when :meth:`Batch.presort` is called
PRESORT_MIN = 1 << 20

__all__ = ["Batch", "SortedBatch", "DOMAIN", "clean", "take_groups"]


@dataclass
class Batch:
    """``G`` groups: group ``g`` holds ``values[offsets[g]:offsets[g+1]]`` (finite, within DOMAIN)."""

    values: np.ndarray
    offsets: np.ndarray
    _sorted: Batch | None = field(default=None, repr=False, compare=False)
    _composite: np.ndarray | None = field(default=None, repr=False, compare=False)
    _pending: threading.Thread | None = field(default=None, repr=False, compare=False)

    @property
    def groups(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def group_ids(self) -> np.ndarray:
        """The group index of every value."""
        return np.repeat(np.arange(self.groups, dtype=np.int64), self.sizes)

    @classmethod
    def from_lists(cls, lists: list[list[float] | np.ndarray | None]) -> Batch:
        """Build (and clean) a batch from Python lists; ``None`` is an empty group."""
        sizes = [0 if v is None else len(v) for v in lists]
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        parts = [np.asarray(v, dtype=np.float64) for v in lists if v is not None and len(v)]
        values = np.concatenate(parts) if parts else np.zeros(0)
        return clean(values, offsets)

    def presort(self) -> None:
        """Start :meth:`sorted` in a worker thread, for a caller that has other work first (drawing the
        random matching, say); :meth:`sorted` then waits for it.  numpy's sort releases the GIL, so on
        a multi-core machine the two overlap.  Deterministic: the result is the same sorted batch; small
        batches (< PRESORT_MIN values) are left to :meth:`sorted`."""
        if self._sorted is None and self._pending is None and self.values.size >= PRESORT_MIN:
            self._pending = threading.Thread(target=self._sort, name="dpsql-presort", daemon=True)
            self._pending.start()

    def sorted(self) -> Batch:
        """The same groups with values sorted ascending inside each group (cached).

        numpy has no segmented sort, so this is the one step done group by group: each segment is
        sorted in place with ``ndarray.sort`` (O(1) Python work per group; measured faster than a
        lexsort on (group, value), which is an indirect merge sort)."""
        if self._pending is not None:
            self._pending.join()
            self._pending = None
        if self._sorted is None:  # not presorted, or the worker failed (then sort here, raising here)
            self._sort()
        return self._sorted  # type: ignore[return-value]

    def _sort(self) -> None:
        if self._sorted is None:
            v = self.values.copy()
            if self.groups == 1:
                v.sort()
            else:
                bounds = self.offsets.tolist()
                for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                    if b - a > 1:
                        v[a:b].sort()
            self._sorted = SortedBatch(v, self.offsets)

    def composite(self) -> np.ndarray:
        """Sorted (group, value) pairs as complex numbers (numpy orders complex lexicographically), so
        one ``np.searchsorted`` answers a query per group; cached on the sorted batch."""
        s = self.sorted()
        if s._composite is None:
            s._composite = s.group_ids.astype(np.float64) + 1j * s.values
        return s._composite

    def is_sorted(self) -> bool:
        return self._sorted is self


class SortedBatch(Batch):
    """A :class:`Batch` whose values are sorted inside each group: its own sorted batch (``sorted()`` returns it,
    ``is_sorted()`` is true) without a reference to itself.  ``b._sorted = b`` on a plain Batch is a reference
    cycle: its arrays (and its cached composite keys) then wait for the cyclic collector, which runs on object
    counts, not bytes, so a loop that sorts a batch per chunk of rows kept ~24 bytes per row of every chunk
    until a full collection (the hybrid route's rows, dpsql.plans: a creep of ~100 MB per 3e7 rows)."""

    @property
    def _sorted(self) -> Batch:
        return self

    @_sorted.setter
    def _sorted(self, value: Batch | None) -> None:
        pass


def take_groups(s: Batch, idx: np.ndarray) -> SortedBatch:
    """The groups ``idx`` of the sorted batch ``s``, in that order, as a :class:`SortedBatch` (no reference cycle): a
    view of ``s``'s values when ``idx`` is a run of consecutive ascending groups, else a copy.  (The core's and the
    summary plans' selections of groups by released values, and the summary sources' reference rows.)"""
    idx = np.asarray(idx, dtype=np.int64)
    lo, hi = s.offsets[idx], s.offsets[idx + 1]
    offsets = np.zeros(idx.size + 1, dtype=np.int64)
    np.cumsum(hi - lo, out=offsets[1:])
    if idx.size and np.all(np.diff(idx) == 1):
        return SortedBatch(s.values[lo[0]:hi[-1]], offsets)
    take = np.repeat(lo - offsets[:-1], hi - lo) + np.arange(int(offsets[-1]))
    return SortedBatch(s.values[take], offsets)


def clean(values: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None = None) -> Batch:
    """Apply the data rules: drop NULL (``valid == False``) and NaN, clamp to ``[-DOMAIN, DOMAIN]``.

    ``offsets[0]`` must be 0 and ``offsets[-1] == values.size`` (slice Arrow buffers first).
    """
    values = np.asarray(values, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    keep = ~np.isnan(values)
    if valid is not None:
        keep &= valid
    if not keep.all():
        csum = np.zeros(values.size + 1, dtype=np.int64)
        np.cumsum(keep, out=csum[1:])
        offsets = csum[offsets]
        values = values[keep]
    values = np.clip(values, -DOMAIN, DOMAIN)
    return Batch(values, offsets)
