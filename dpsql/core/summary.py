"""Summary plans (issue 17): the default dp_median / dp_quantile / dp_iqr from per-group summaries.

The list route ships every group to Python (``list(x)``) and runs :func:`~dpsql.core.scalefree.run_quantile`
on the sorted values.  Here the same mechanism runs on summaries that a :class:`Source` computes wherever the
data live (:mod:`dpsql.plans` computes them with native DuckDB passes; :class:`BatchSource` from a
:class:`~dpsql.core.batch.Batch`, the reference the tests hold the SQL to).  The output law is the list
route's (draw for draw from :class:`BatchSource`; in law from the DuckDB source, whose
matching draws differ, item 2):

1. **Count** (``Source.sizes``): the exact per-group n; the count noise and the class (``SPLIT_LOW`` below
   ``n_hat eps = LOW_UNTIL``, else ``SPLIT``) as in scalefree; NULL below ``NULL_BELOW['median']``.
2. **Floor** (``Source.gap_histogram``): per group the histogram of ``ceil_log2 |a - b|`` (clipped into the
   exponents the scans ask about) over a uniformly random maximal matching of its rows.  Seed 003's IQR lower
   bound (:func:`~dpsql.core.ranges.iqr_lower_bound`) reads the pairs only through these counts
   (``count_le(g, k)`` is the histogram's cumulative sum), so :func:`floor_from_histogram` runs its two SVTs on
   them with the same draws.  The matching's law is all the proof uses (the coupling argument of seed 003
   Alg. 7 for a uniform maximal matching): a source may draw it any way whose law is uniform and independent
   of the values (:class:`BatchSource` replays the list route's :func:`~dpsql.core.ranges.random_pairs` draw
   for draw; the DuckDB source orders each group by one CSPRNG word per row, joined by position, rejecting
   ties: the same law, other draws -- :mod:`dpsql.plans` has the proof sketch and why a salted native hash is
   not enough).  With ``scalefree.FLOOR_SAMPLE`` on, a group whose released count passes ``FLOOR_KEEP`` has
   its floor on a Poisson subsample (rate from :func:`~dpsql.core.scalefree.floor_rate`, a power of two, a
   function of n_hat and epsilon): one gap histogram per rate class, in the list route's order, the matching
   uniform over the kept rows (:func:`_floor`; :class:`BatchSource` replays the list route's coins).
3. **The exponential mechanism near the target** (``Source.bucket_histogram``, three passes): the codes are
   :class:`~dpsql.core.scalefree.FloatCodes` with the released floor (log-uniform, centre 0); a code's offset from
   the centre is ``rel = sign * mag``, ``mag < 2**(M_BITS + 11)``.  A bucket at shift s is ``sign * (mag >> s)``:
   buckets are disjoint runs of consecutive codes, ordered as the codes, and each shift's buckets refine the previous
   shift's.  Three passes per group, at two shifts from :func:`ladder` (a function of the released count and epsilon
   only: about ``n_hat / W`` buckets per octave at the second, so the number of buckets per group stays bounded)
   and at 0; the first counts every row per bucket, the others the rows inside the previous pass's
   range; the range kept is from the bucket before the one holding rank ``floor(t) - W`` to the one holding rank
   ``ceil(t) + W`` (the window of :func:`~dpsql.core.primitives.rank_em`, W its reach).  The last pass (shift 0) is
   the codes themselves with multiplicities: every row whose code can move the loss inside the window (codes from
   ``a - 1`` to ``b``, a and b the codes at the window's end ranks) is in it, every row below it has a code below
   ``a - 1`` and every row above a code above ``b``.  So :func:`~dpsql.core.primitives.rank_window` on a codes object
   that knows only those positions (and answers -1 below, K + 1 above) reads exactly what it reads on the full data:
   the same candidates, whatever the shifts (any shifts that do not increase from pass to pass).
4. **Tails** (``Source.rank_counts``, one pass, always run): rank_em's rejection step needs ``#{c <= y}`` and
   ``#{c < y}`` at a proposal y in a tail, outside the fetched codes.  A data-dependent extra pass would be a
   timing channel, so the rounds are drawn first (:func:`~dpsql.core.primitives.propose` until every group has
   drawn a piece; a tail round records its proposal and its Exp(1) acceptance variate), then ONE pass counts
   at every recorded proposal (a dummy when there is none), then each group releases its first accepted
   proposal, else its piece.  These are the sequential sampler's own random variables, evaluated eagerly: the
   law is exactly rank_em's.  The draws are rank_em's whenever no tail proposal is accepted (a tail is
   proposed with probability below 2**-12 per group); after an accepted one the eager rounds draw more.

Passes per class of groups: gap histogram (one per rate class of the floor), three bucket histograms, tail
counts (fixed; the classes and rate classes present are functions of the released counts; a source may count the
first bucket histogram in the gap passes' scans, its shifts being chosen before the floor,
:meth:`Source.gap_histogram`).  Fan-out: the first bucket histogram has at
most ``2**ceil(b / 2)`` buckets per octave the data fill, the second as many per kept bucket of the first (``2**b
~ n_hat / W``), the last pass the distinct codes of a few W rows around each group's window (ties come back as
one row with a count).  Cost: that of scalefree's median, charged by the same calls.

Hybrid (``small``, :func:`row_groups`): groups whose released count is below ``small`` are read as rows
(:meth:`Source.batch`) and run the list route's code for a class (floor, then the mechanism), continuing from the
released count (:func:`released_count`, passed back as ``n_hat``): same law group by group, same cost, the split
post-processing of the released count.

Several levels (:func:`quantiles`; dp_iqr is :func:`iqr` at :data:`IQR_PS`): scalefree's ``_tail_quantiles``,
one released count, one floor and (near) one centre for every level, then a mechanism per level at an equal
part of the share; the first bucket pass and the tail-count pass serve every level (:func:`_window_ems`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..noise import Rng
from . import scalefree as _sf
from .batch import Batch, take_groups
from .helpers import amplified, subsample
from .primitives import ceil_log2, noisy_count_of, propose, rank_window, window_reach
from .ranges import K_DOWN, K_UP, iqr_lower_bound_from, random_pairs
from .registry import Params
from .scalefree import (
    E_TOP,
    LOGUNIFORM,
    M_BITS,
    NULL_BELOW,
    ROUTE,
    SPLIT,
    SPLIT_TAIL,
    ZONE,
    ZONE_ABOVE,
    FloatCodes,
    class_quantiles,
    decode,
    floor_exponent,
    floor_exponent_of,
    median_classes,
    near_classes,
    octave_table,
    quantile_ci,
)
from .spending import charge_pure, subsampled

__all__ = ["Source", "BatchSource", "median", "quantile", "quantiles", "iqr", "IQR_PS", "released_count", "row_groups",
           "floor_from_histogram", "ladder", "first_buckets", "GAP_LO", "GAP_HI", "GAP_ZERO", "gap_keys", "row_parts",
           "announce_rows", "announce_classes"]
#: gap exponents are clipped into [GAP_LO, GAP_HI] (every exponent seed 003's scans ask about, with a margin;
#: ranges' ``_CL_LO`` / ``_CL_HI``: the clip changes no count they read)
GAP_LO, GAP_HI = -(K_DOWN - 2) - 2, K_UP - 2 + 1
#: the key of a zero gap (below every clipped exponent: ``count_le`` counts it at every k, as the pairs' does; the
#: floor reads the zero gaps' number from it, :func:`~dpsql.core.ranges.iqr_lower_bound`'s ``ties``)
GAP_ZERO = GAP_LO - 1


def gap_keys(y: np.ndarray) -> np.ndarray:
    """The gap histogram's key of each gap ``y >= 0``: ``GAP_ZERO`` for 0, else ``ceil_log2(y)`` clipped into
    [GAP_LO, GAP_HI]."""
    return np.where(y == 0, GAP_ZERO, np.clip(ceil_log2(y), GAP_LO, GAP_HI))


class Source(Protocol):
    """Per-group summaries of one value column over G groups (group-local indices ``0..G-1``)."""

    def sizes(self) -> np.ndarray:
        """Exact row count per group (NULL and NaN dropped), int64."""

    def gap_histogram(self, groups: np.ndarray, rng: Rng, first: np.ndarray | None = None, rate: float = 1.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the groups ``groups`` (ascending): a uniformly random maximal matching of each group's rows
        (with ``rate`` < 1, a power of two: of a Poisson subsample of them, each row kept independently with
        probability ``rate``, independent of the values), and the histogram of ``clip(ceil_log2 |a - b|,
        GAP_LO, GAP_HI)`` over its pairs, as (index into ``groups``, exponent, count).  ``first`` (one shift
        per group): the shift of the first bucket pass to come (prev None); a source may count its rows in
        this pass's scan already, by sign, floor exponent and top mantissa bits, which need no floor
        (:func:`first_buckets` maps them once it is released)."""

    def bucket_histogram(self, groups: np.ndarray, e: np.ndarray, shift: np.ndarray, prev: np.ndarray | None,
                         lo: np.ndarray | None, hi: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows of ``groups`` per bucket ``sign * (mag >> shift)`` of their raw codes (floor exponents ``e``;
        ``shift``, ``prev``, ``lo``, ``hi``: one per group), counting only rows whose bucket at shift ``prev``
        lies in ``[lo, hi]`` (all rows when prev is None): (index into ``groups``, bucket, count), sorted by
        index then bucket."""

    def rank_counts(self, groups: np.ndarray, e: np.ndarray, which: np.ndarray, thr: np.ndarray) -> np.ndarray:
        """``#{rows of groups[which[i]] with raw code <= thr[i]}``; the pass runs even when there are no
        points."""

    def batch(self, groups: np.ndarray) -> Batch:
        """The rows of ``groups`` as a sorted, cleaned Batch (the list route's input), for the quantile's near
        route and the hybrid's small groups (small released counts only: :func:`row_groups`).  Before a run of
        such requests the code calls the source's optional ``will_batch(parts, rows)`` with the parts it will
        request, in order, and their released rows (:func:`announce_rows`): a source may fetch them in fewer,
        larger pieces, one at a time (dpsql.plans: bounded memory)."""


RAW_BITS = 36  # mantissa bits of the raw codes (scalefree's M_BITS; every measure's cells are unions of these)
#: the floor exponent :func:`first_buckets` takes for x = 0 (below every other: its raw code is 0)
ZERO_EXPONENT = -(1 << 20)


def raw_codes(values: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Raw code offsets ``sign * mag`` of values (centre 0) given each value's floor exponent ``e``: ``mag =
    floor(|x| 2**(RAW_BITS - e))`` below ``2**e``, else ``k 2**RAW_BITS + `` the top RAW_BITS mantissa bits, k
    the octave above the floor.  Exact float steps only (the SQL passes compute the same)."""
    a = np.abs(values)
    m, ex = np.frexp(a)
    big = a >= np.ldexp(1.0, e)
    lin = np.floor(np.ldexp(np.where(big, 0.0, a), RAW_BITS - e)).astype(np.int64)
    k = ex.astype(np.int64) - e
    frac = np.floor(np.ldexp(2.0 * m - 1.0, RAW_BITS)).astype(np.int64)
    mag = np.where(big, (np.maximum(k, 0) << RAW_BITS) + frac, lin)
    return np.where(values < 0, -mag, mag)


def raw_value(rel: np.ndarray, e: np.ndarray) -> np.ndarray:
    """A value inside raw code ``rel``'s cell (its end nearest 0, exactly representable)."""
    mag = np.abs(rel)
    k = mag >> RAW_BITS
    frac = (mag & ((1 << RAW_BITS) - 1)).astype(np.float64)
    with np.errstate(over="ignore"):
        v = np.where(k == 0, np.ldexp(mag.astype(np.float64), e - RAW_BITS),
                     np.ldexp(1.0 + np.ldexp(frac, -RAW_BITS), e + k - 1))
    return np.where(rel < 0, -v, v)


def true_codes(rel: np.ndarray, e: np.ndarray, decay: int = LOGUNIFORM) -> np.ndarray:
    """The scalefree code (:class:`~dpsql.core.scalefree.FloatCodes`, centre 0; absolute, not an offset) of every
    value in raw cell ``rel``: a monotone map, since each of the measure's cells is a union of raw cells.  ``decay =
    NEAR`` (the mean's cap, :mod:`dpsql.core.summary_mean`): NEAR cells are unions of raw cells too (octave k above
    the floor keeps the top ``36 - k + 1`` of the raw cell's 36 mantissa bits, the linear octave is the raw one)."""
    rel = np.asarray(rel, dtype=np.int64)
    e = np.broadcast_to(np.asarray(e, dtype=np.int64), rel.shape)
    if not rel.size:
        return rel.copy()
    if decay == LOGUNIFORM:
        return _codes_per_row(raw_value(rel, e), e)
    v = raw_value(rel, e)  # FloatCodes.take with c = 0
    ctr = _sf._mag_max(e, decay)
    mag = np.minimum(_sf._magnitude(np.abs(v), e, decay), ctr)
    return np.where(v < 0, ctr - mag, ctr + mag)


def first_buckets(neg: np.ndarray, ex: np.ndarray, m: np.ndarray, e: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """The raw bucket at shift ``RAW_BITS - bits`` of a value given without its floor: its sign, ``ex =
    floor(log2 |x|)`` (:data:`ZERO_EXPONENT` for 0) and ``m``, the top ``bits`` bits of its mantissa (``|x| =
    2**ex (1 + f)``, ``m = floor(f 2**bits)``), for the floor ``e``.  At or above ``2**e`` the raw magnitude is
    ``(ex + 1 - e) 2**RAW_BITS + floor(f 2**RAW_BITS)``, so the bucket is ``((ex + 1 - e) << bits) + m``; below,
    it is ``floor(|x| 2**(RAW_BITS - e)) >> (RAW_BITS - bits) = floor((1 + f) 2**(bits - (e - ex)))`` ``= (2**bits
    + m) >> (e - ex)`` (floors of floors by powers of two): exact, as :func:`raw_codes` then :func:`bucket_of`."""
    ex, m = np.asarray(ex, dtype=np.int64), np.asarray(m, dtype=np.int64)
    e, bits = np.asarray(e, dtype=np.int64), np.asarray(bits, dtype=np.int64)
    above = ((ex + 1 - e) << bits) + m
    below = ((np.int64(1) << bits) + m) >> np.clip(e - ex, 0, 62)
    mag = np.where(ex >= e, above, np.where(ex == ZERO_EXPONENT, 0, below))
    return np.where(np.asarray(neg, dtype=bool), -mag, mag)


def bucket_of(rel: np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """``sign * (|rel| >> shift)``: the bucket of a raw code offset at a shift (a scalar or one per entry)."""
    return np.sign(rel) * (np.abs(rel) >> shift)


def _codes_per_row(v: np.ndarray, e: np.ndarray) -> np.ndarray:
    """FloatCodes of values v (centre 0, the log-uniform measure), each with its own floor e: scalefree's
    ``FloatCodes(v, arange, e).take`` computed with every octave table at once (FloatCodes masks every entry
    once per table it meets: with 10**4 groups' floors that was most of the route's Python time).  The same
    integers (tests/core/test_summary.py compares them on floors from -1074 to 1002)."""
    if not v.size:
        return np.zeros(0, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    flat, tid = np.unique(np.maximum(ZONE - e, ZONE_ABOVE), return_inverse=True)
    tables = [octave_table(int(f)) for f in flat]
    bits = np.stack([t[0] for t in tables])
    base = np.stack([t[1] for t in tables])
    k_top = E_TOP - e
    ctr = base[tid, k_top] + np.left_shift(1, bits[tid, k_top]) - 1
    ay = np.abs(v)
    big = ay >= np.ldexp(1.0, e)
    m, ex = np.frexp(ay)
    k = np.clip(ex.astype(np.int64) - e, 1, k_top)
    b = bits[tid, k]
    frac = np.floor(np.ldexp(2.0 * m - 1.0, b)).astype(np.int64)
    lin = np.floor(np.ldexp(np.where(big, 0.0, ay), M_BITS - e)).astype(np.int64)
    mag = np.where(big, base[tid, k] + np.clip(frac, 0, np.left_shift(1, b) - 1), np.minimum(lin, (1 << M_BITS) - 1))
    mag = np.minimum(mag, ctr)
    return np.where(v < 0, ctr - mag, ctr + mag)


class BatchSource:
    """The summaries computed from a Batch in Python: the reference for the SQL passes (tests)."""

    def __init__(self, batch: Batch) -> None:
        self.s = batch.sorted()

    def sizes(self) -> np.ndarray:
        return self.s.sizes

    def _sub(self, groups: np.ndarray) -> Batch:
        return take_groups(self.s, groups)

    @staticmethod
    def _count(g: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not g.size:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        key, c = np.unique(np.stack([g, k]), axis=1, return_counts=True)
        return key[0], key[1], c.astype(np.int64)

    def gap_histogram(self, groups: np.ndarray, rng: Rng, first: np.ndarray | None = None, rate: float = 1.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sub = self._sub(groups)
        a, b, pg = random_pairs(sub if rate >= 1.0 else subsample(sub, rate, rng), rng)
        return self._count(pg, gap_keys(np.abs(a - b)))

    def bucket_histogram(self, groups, e, shift, prev, lo, hi):  # noqa: ANN001, ANN201, D102
        sub = self._sub(groups)
        g = sub.group_ids
        rel = raw_codes(sub.values, e[g])
        keep = np.ones(rel.size, dtype=bool)
        shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), (groups.size,))
        if prev is not None:
            b = bucket_of(rel, np.broadcast_to(np.asarray(prev, dtype=np.int64), (groups.size,))[g])
            keep = (b >= lo[g]) & (b <= hi[g])
        return self._count(g[keep], bucket_of(rel[keep], shift[g[keep]]))

    def batch(self, groups: np.ndarray) -> Batch:  # noqa: D102
        return self._sub(groups)

    def rank_counts(self, groups, e, which, thr):  # noqa: ANN001, ANN201, D102
        sub = self._sub(groups)
        r = raw_codes(sub.values, e[sub.group_ids])
        pairs = zip(which, thr, strict=True)
        return np.array([np.count_nonzero(r[sub.offsets[w]:sub.offsets[w + 1]] <= y) for w, y in pairs], dtype=np.int64)


def floor_from_histogram(g: np.ndarray, k: np.ndarray, c: np.ndarray, G: int, epsilon: float,
                         rng: Rng) -> np.ndarray:
    """The scale-free floor (:func:`~dpsql.core.ranges.iqr_lower_bound` with ``ties=True``, eps-DP) from the
    gap-exponent histogram (group, key, count; keys from :func:`gap_keys`), through
    :func:`~dpsql.core.ranges.iqr_lower_bound_from`: the same queries, thresholds and draws as on the pairs
    (tests/core/test_summary.py compares the two)."""
    width = GAP_HI - GAP_ZERO + 1
    npairs = np.bincount(g, weights=c, minlength=G).astype(np.int64)
    zero = k == GAP_ZERO
    zeros = np.bincount(g[zero], weights=c[zero], minlength=G).astype(np.int64)
    key = g * width + (k - GAP_ZERO)
    order = np.argsort(key, kind="stable")
    key, cum = key[order], np.cumsum(c[order])
    first = np.searchsorted(key, np.arange(G, dtype=np.int64) * width)
    before = np.where(first > 0, cum[np.maximum(first - 1, 0)], 0) if key.size else np.zeros(G, dtype=np.int64)

    def count_le(gg: np.ndarray, ks: np.ndarray) -> np.ndarray:
        q = (gg * width)[:, None] + (np.clip(ks, GAP_LO, GAP_HI) - GAP_ZERO)[None, :]
        pos = np.searchsorted(key, q, side="right")
        upto = np.where(pos > 0, cum[np.maximum(pos - 1, 0)], 0) if key.size else np.zeros(q.shape, np.int64)
        return upto - before[gg][:, None]

    return iqr_lower_bound_from(count_le, npairs, epsilon, rng, zeros)


class _KnownCodes:
    """Sorted per-group codes known only on a run of positions (the fetched window): ``-1`` below it, ``K + 1``
    above it (enough for :func:`rank_window`, see the module docstring)."""

    def __init__(self, offsets: np.ndarray, base: np.ndarray, K: np.ndarray, g: np.ndarray, code: np.ndarray,
                 count: np.ndarray) -> None:
        G = offsets.size - 1
        self.offsets, self.base, self.K = offsets, base, K
        self.code, self.cum = code, np.cumsum(count)
        self.first = np.searchsorted(g, np.arange(G + 1, dtype=np.int64))
        self.before = np.where(self.first > 0, self.cum[np.maximum(self.first - 1, 0)], 0) if code.size \
            else np.zeros(G + 1, dtype=np.int64)
        self.known = self.before[1:] - self.before[:-1]
        self.size = int(offsets[-1])

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        g = np.clip(np.searchsorted(self.offsets, idx, side="right") - 1, 0, self.K.size - 1)
        local = idx - self.offsets[g] - self.base[g]
        j = np.searchsorted(self.cum, self.before[g] + local, side="right") if self.code.size else local * 0
        c = self.code[np.clip(j, 0, max(self.code.size - 1, 0))] if self.code.size else local * 0
        return np.where(local < 0, -1, np.where(local >= self.known[g], self.K[g] + 1, c))


def bucket_ends(b: np.ndarray, shift: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lowest and the highest raw code of buckets ``b`` at ``shift`` (a scalar or one per bucket; bucket 0
    spans both signs)."""
    b = np.asarray(b, dtype=np.int64)
    one = np.left_shift(np.int64(1), np.asarray(shift, dtype=np.int64))
    return (np.where(b > 0, b << shift, -(((-b) << shift) + one - 1)),
            np.where(b >= 0, (b << shift) + one - 1, -((-b) << shift)))


#: the largest code range K of the log-uniform codes over every floor E_MIN .. E_TOP - 1 (a constant: :func:`ladder`
#: is chosen before the floor is released; tests/core/test_summary.py recomputes it, ~0.1 s, not at import)
K_BOUND = 156_680_406_958_094


def ladder(n_hat: np.ndarray, epsilon: float) -> np.ndarray:
    """The bucket shifts of the three window passes per group, coarse to fine, shape (G, 3): ``RAW_BITS -
    ceil(b / 2)`` over every row, ``RAW_BITS - b`` inside the first pass's kept range, then the codes (0),
    with ``2**b`` buckets per octave at about ``n_hat / W`` (W = :func:`~dpsql.core.primitives.window_reach`
    at :data:`K_BOUND`, at least the window's reach: the window spans about 2 W ranks).  A bucket of the
    second pass then holds about W / 4 rows where the data are densest (a quarter of the rows in one octave),
    so the code pass gets a few W rows per group, and every pass has at most ``2**ceil(b / 2)`` buckets per
    octave (first pass) or per kept bucket (second pass): bounded fan-out at any group size.  (With the fixed
    ladder 36, 24, 12, 0 of before, the second pass split the kept octaves into 4,096 buckets each: at 10**4
    groups of 10**3 rows nearly every row was a bucket of its own, millions of keys; the octave pass of its
    own cost a scan more.)

    Privacy: a function of released values and public parameters only: ``n_hat`` is the released count,
    ``epsilon`` the mechanism's share (at its sensitivity), :data:`K_BOUND` a constant; never of the rows, so
    choosing it is post-processing (it is chosen before the floor: a source may count the first pass's rows
    in the gap pass's scan, :meth:`Source.gap_histogram`).  And the law does not depend on the ladder at all:
    any shifts that do not increase from pass to pass make each pass's buckets refine the previous pass's,
    and the code pass then holds every row whose code the window can read (module docstring, item 3): the
    releases are the same draw for draw whatever the ladder (tests/core/test_summary.py and
    tests/plans/test_plans.py run random ladders).  Only the passes' intermediate sizes, and so their time,
    change; they were data-dependent before through the kept ranges, and the number of passes stays fixed."""
    W = float(window_reach(np.array([K_BOUND]), epsilon)[0])
    ratio = np.maximum(np.asarray(n_hat, dtype=np.float64), 1.0) / W
    b = np.clip(np.ceil(np.log2(np.maximum(ratio, 1.0))), 0, RAW_BITS).astype(np.int64)
    return np.stack([RAW_BITS - (b + 1) // 2, RAW_BITS - b, np.zeros(b.size, dtype=np.int64)], axis=1)


def _locate(g: np.ndarray, b: np.ndarray, c: np.ndarray, shift: np.ndarray, e: np.ndarray, base: np.ndarray,
            n: np.ndarray, i_lo: np.ndarray, i_hi: np.ndarray, decay: int = LOGUNIFORM
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From one bucket pass (sorted by group, bucket; ``e`` and ``shift`` per group): per group the bucket range
    to keep and the
    number of rows below it.  With j the bucket holding rank ``i_lo`` and h the one holding ``i_hi``: every
    bucket whose highest true code is above ``T(lowest of j) - 2`` from below, up to every bucket whose lowest
    true code is at most ``T(highest of h)`` (all buckets when ``i_lo < 1`` / ``i_hi > n``).  So every row left
    out below has a code <= a - 2 and every row left out above a code > b (module docstring); with the
    log-uniform table that is the bucket before j to h.  An empty group keeps the empty range [1, 0]."""
    G = n.size
    cum = np.cumsum(c)
    first = np.searchsorted(g, np.arange(G + 1, dtype=np.int64))
    start, stop = first[:-1], first[1:]
    before = np.where(first > 0, cum[np.maximum(first - 1, 0)], 0) if c.size else np.zeros(G + 1, dtype=np.int64)
    empty = stop == start
    if not c.size:
        return np.ones(G, dtype=np.int64), np.zeros(G, dtype=np.int64), base
    last = c.size - 1
    top = np.maximum(stop - 1, start)
    j = np.searchsorted(cum, before[:-1] + np.maximum(i_lo - base, 1), side="left")
    h = np.searchsorted(cum, before[:-1] + np.clip(i_hi - base, 1, n), side="left")
    j, h = np.clip(np.minimum(j, top), 0, last), np.clip(np.minimum(h, top), 0, last)
    # first kept: the first bucket of the group with t_hi > T(lowest of j) - 2, at or before j (t_hi ascends
    # within a group); last kept: the last with t_lo <= T(highest of h), at or after h.  Binary searches per
    # group: true codes of O(G log fan-out) bucket ends instead of every bucket's (most of the Python time at
    # 10**4 groups)
    ends = bucket_ends(b, np.asarray(shift, dtype=np.int64)[g])

    def t_at(side: int, pos: np.ndarray) -> np.ndarray:
        return true_codes(ends[side][pos], e[g[pos]], decay)

    thr_lo, thr_hi = t_at(0, j) - 2, t_at(1, h)
    lo_pos, right = start.copy(), np.where(empty, start, j)  # answer in [lo_pos, right]; it holds at right
    while np.any(act := lo_pos < right):
        mid = (lo_pos + right) // 2
        ok = np.zeros(G, dtype=bool)
        ok[act] = t_at(1, mid[act]) > thr_lo[act]
        right, lo_pos = np.where(act & ok, mid, right), np.where(act & ~ok, mid + 1, lo_pos)
    hi_pos, left = h.copy(), np.where(empty, h, top)  # answer in [hi_pos, left]; it holds at hi_pos
    while np.any(act := hi_pos < left):
        mid = (hi_pos + left + 1) // 2
        ok = np.zeros(G, dtype=bool)
        ok[act] = t_at(0, mid[act]) <= thr_hi[act]
        hi_pos, left = np.where(act & ok, mid, hi_pos), np.where(act & ~ok, mid - 1, left)
    lo_pos = np.where(i_lo < 1, start, lo_pos)
    hi_pos = np.where(i_hi > n, top, hi_pos)
    lo_pos, hi_pos = np.clip(lo_pos, 0, last), np.clip(hi_pos, 0, last)
    lo = np.where(empty, 1, b[lo_pos])
    hi = np.where(empty, 0, b[hi_pos])
    below = np.where(empty | (lo_pos <= start), 0, cum[np.maximum(lo_pos - 1, 0)] - before[:-1])
    return lo.astype(np.int64), hi.astype(np.int64), base + below


def _raw_at_most(y: np.ndarray, e: np.ndarray, decay: int = LOGUNIFORM) -> np.ndarray:
    """The largest raw code whose true code is at most y (binary search over the raw codes; monotone map)."""
    top = (1002 - np.asarray(e, dtype=np.int64)) << RAW_BITS  # above every raw code of |x| <= 2**1001
    lo, hi = -top, top.copy()  # invariant: T(lo) <= y or lo is below every code; T(hi) > y or hi above every code
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // 2
        ok = true_codes(mid, e, decay) <= y
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return lo


def _shifts(n_hat: np.ndarray, p: float, epsilon: float) -> np.ndarray:
    """:func:`ladder` for the exponential mechanism at ``epsilon`` and sensitivity max(p, 1 - p)."""
    return ladder(n_hat, epsilon / max(p, 1.0 - p))


def _window_em(src: Source, groups: np.ndarray, n: np.ndarray, e: np.ndarray, p: float, epsilon: float,
               rng: Rng, shifts: np.ndarray, decay: int = LOGUNIFORM, rank_shift: np.ndarray | float = 0.0
               ) -> np.ndarray:
    """The codes :func:`~dpsql.core.scalefree._quantile` draws (rank_em at sensitivity max(p, 1 - p)), from
    the bucket passes (shifts per group and pass, :func:`_shifts` of the released counts) and one tail-count
    pass: :func:`_window_ems` for one p (``decay``: the measure, as there; ``rank_shift``: _quantile's
    ``shift``, the target ``p n + rank_shift``)."""
    return _window_ems(src, groups, n, e, (p,), epsilon, rng, shifts, decay, rank_shift)[0]


def _window_ems(src: Source, groups: np.ndarray, n: np.ndarray, e: np.ndarray, ps: tuple[float, ...],
                epsilon: float, rng: Rng, shifts: np.ndarray, decay: int = LOGUNIFORM,
                rank_shift: np.ndarray | float = 0.0) -> list[np.ndarray]:
    """For each p of ``ps`` in order, the codes :func:`~dpsql.core.scalefree._quantile` draws at ``epsilon`` on the
    same floor ``e`` (rank_em at sensitivity max(p, 1 - p)): :func:`~dpsql.core.scalefree._tail_quantiles`' calls,
    one after the other.  The first bucket pass depends on the groups, the floor and the shifts only, not on p:
    it runs once (or comes from the gap passes' scans) for every p; then per p the finer passes, its window and
    its proposal rounds (p's draws, in the list route's order); then ONE tail-count pass for every p's recorded
    proposals (counting draws nothing, so holding p's acceptance tests until the later ps have drawn moves no
    draw).  Passes: 1 + (passes - 1) per p + 1, whatever the data.  ``decay``: the measure (log-uniform; NEAR
    with centre 0 for the mean's cap, :mod:`dpsql.core.summary_mean`)."""
    G = groups.size
    shape = FloatCodes(np.zeros(0), np.zeros(G + 1, dtype=np.int64), e, decay=decay)
    K = shape.K
    offsets = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(n, out=offsets[1:])
    first = src.bucket_histogram(groups, e, shifts[:, 0], None, None, None)
    pending = []  # per p: (target, window, released codes so far, rounds with tail picks)
    for p in ps:
        sens = max(p, 1.0 - p)
        eps = epsilon / sens
        t = p * n.astype(np.float64) + rank_shift
        W = window_reach(K, eps, _sf.LEVELS)
        i_lo, i_hi = np.floor(t).astype(np.int64) - W, np.ceil(t).astype(np.int64) + W
        base = np.zeros(G, dtype=np.int64)
        hg, hb, hc = first
        for j in range(1, shifts.shape[1]):
            lo, hi, base = _locate(hg, hb, hc, shifts[:, j - 1], e, base, n, i_lo, i_hi, decay)
            hg, hb, hc = src.bucket_histogram(groups, e, shifts[:, j], shifts[:, j - 1], lo, hi)
        # the known codes: raw codes mapped to true codes (adjacent raw codes may share one; runs stay sorted)
        codes = _KnownCodes(offsets, base, K, hg, true_codes(hb, e[hg], decay), hc)
        charge_pure(eps * sens, "exponential mechanism (rank window)")
        win = rank_window(codes, offsets, K, t, 0, eps, levels=_sf.LEVELS, origin=shape.centre)
        final = np.empty(G, dtype=np.int64)
        rounds = []  # (groups, proposals, envelope, E) per round with tail picks
        todo = np.arange(G)
        while todo.size:
            y, is_lo, is_piece = propose(win, todo, rng)
            final[todo[is_piece]] = y[is_piece]
            tail = np.flatnonzero(~is_piece)
            if tail.size:
                tg = todo[tail]
                env = np.where(is_lo[tail], win.L_lo[tg], win.L_hi[tg])
                rounds.append((tg, y[tail], env, rng.exponential(tail.size)))
            todo = todo[tail]
        pending.append((t, win, final, rounds))
    every = [r for _, _, _, rounds in pending for r in rounds]
    which = np.concatenate([r[0] for r in every]) if every else np.zeros(0, dtype=np.int64)
    ys = np.concatenate([r[1] for r in every]) if every else np.zeros(0, dtype=np.int64)
    # #{c <= y} and #{c < y} = #{c <= y - 1}, as counts of raw codes up to a threshold: one pass for every p
    thr = _raw_at_most(np.concatenate([ys, ys - 1]), e[np.concatenate([which, which])], decay)
    got = src.rank_counts(groups, e, np.concatenate([which, which]), thr)
    le, lt = got[: ys.size], got[ys.size:]
    outs = []
    at = 0
    for t, win, final, rounds in pending:
        out = final.copy()
        done = np.zeros(G, dtype=bool)
        for tg, yt, env, E in rounds:
            f, g_ = le[at:at + tg.size], lt[at:at + tg.size]
            at += tg.size
            loss = np.maximum(0.0, np.maximum(t[tg] - f, g_ - t[tg]))
            acc = (E >= win.half * (loss - env)) & ~done[tg]
            out[tg[acc]] = yt[acc]
            done[tg[acc]] = True
        outs.append(out)
    return outs


def _floor(src: Source, groups: np.ndarray, n_hat: np.ndarray, epsilon: float, rng: Rng,
           first: np.ndarray) -> np.ndarray:
    """The floor exponent of ``groups`` (:func:`~dpsql.core.scalefree.floor_exponent`, eps-DP), from gap
    histograms: with ``FLOOR_SAMPLE`` on, per rate class of :func:`~dpsql.core.scalefree.floor_rate` (a function
    of the released count and epsilon), in the list route's order (rate 1 first, then falling rates), each
    class's histogram on a Poisson subsample at its rate and the SVTs at ``amplified(eps, rate)`` inside
    ``subsampled(rate)`` (the amplification argument is scalefree's).  ``first`` (the first bucket pass's
    shifts) goes to the source with each rate class (it may count that pass's rows in the gap passes' scans,
    :meth:`Source.gap_histogram`)."""
    eta = _sf.floor_rate(n_hat, epsilon) if _sf.FLOOR_SAMPLE else np.ones(groups.size)
    rates = np.unique(eta)[::-1]  # the rate-1 class first
    out = np.empty(groups.size, dtype=np.int64)
    for r in rates:
        at = np.flatnonzero(eta == r)
        r = float(r)
        hg, hk, hc = src.gap_histogram(groups[at], rng, first[at], r)
        if r >= 1.0:
            out[at] = floor_exponent_of(floor_from_histogram(hg, hk, hc, at.size, epsilon, rng))
            continue
        with subsampled(r, "floor"):
            out[at] = floor_exponent_of(floor_from_histogram(hg, hk, hc, at.size, amplified(epsilon, r), rng))
    return out


def released_count(src: Source, epsilon: float, rng: Rng, p: float | tuple[float, ...] = 0.5) -> np.ndarray:
    """The released count of :func:`median` (p = 1/2), :func:`quantile` or :func:`quantiles` (``p`` a tuple of
    levels: :func:`iqr`'s :data:`IQR_PS`): the first draw of either, at ``SPLIT['count'] eps`` or
    ``SPLIT_TAIL['count'] eps``; pass it back as ``n_hat`` to continue from it."""
    ps = p if isinstance(p, tuple) else (p,)
    share = SPLIT["count"] if ps == (0.5,) else SPLIT_TAIL["count"]
    return noisy_count_of(np.asarray(src.sizes(), dtype=np.int64), share * epsilon, rng)


def row_groups(n_hat: np.ndarray, epsilon: float, p: float | tuple[float, ...], small: float) -> np.ndarray:
    """The groups :func:`median` / :func:`quantile` / :func:`quantiles` (``p`` a tuple) read as rows
    (:meth:`Source.batch`) given the released count: released (not NULL) and ``n_hat < small``, and away from
    p = 1/2 the near route's too (routed on the smallest ``min(p, 1 - p)``).  A function of released values and
    public constants only (a caller may fetch them once for several calls)."""
    n_hat = np.asarray(n_hat, dtype=np.float64)
    ps = p if isinstance(p, tuple) else (p,)
    if ps == (0.5,):
        ok = n_hat * epsilon >= NULL_BELOW["median"]
        return np.flatnonzero(ok & (n_hat < small))
    ok = n_hat * epsilon >= NULL_BELOW["tail"]
    wide = n_hat * min(min(q, 1.0 - q) for q in ps) * epsilon >= ROUTE
    return np.flatnonzero(ok & (~wide | (n_hat < small)))


#: the hybrid's rows run the list code in chunks of consecutive groups of about this many released rows (a
#: random permutation of 10**7 rows at once leaves the caches: the floor at 10**4 groups of 10**3 rows took 1.3-1.8
#: s in one piece, 0.7-0.9 s in chunks of 5e5-2e6 rows)
ROWS_CHUNK = 2.0**19


def row_parts(rows: np.ndarray, n_hat: np.ndarray) -> list[np.ndarray]:
    """``rows`` (groups, in the order the list code runs them) cut into consecutive parts of about
    :data:`ROWS_CHUNK` released rows (``max(n_hat, 1)`` per group): a function of the released counts only."""
    w = np.cumsum(np.maximum(n_hat[rows], 1.0))
    cuts = np.flatnonzero(np.diff(np.floor(w / ROWS_CHUNK))) + 1
    return [rows[part] for part in np.split(np.arange(rows.size), cuts)]


def announce_rows(src: object, parts: list[np.ndarray], n_hat: np.ndarray) -> list[np.ndarray]:
    """Tell ``src`` (its optional ``will_batch(parts, rows)``) which ``parts`` it will be asked for by
    :meth:`Source.batch`, in this order, with their released rows; returns ``parts``.  Released values only.
    Once per call, before its first :meth:`Source.batch`, with every part of the call (:func:`announce_classes`):
    a source may fetch them in pieces, one pass each, and a second announcement starts new pieces."""
    hook = getattr(src, "will_batch", None)
    if hook is not None and parts:
        hook(parts, [float(np.maximum(n_hat[g], 1.0).sum()) for g in parts])
    return parts


def announce_classes(src: object, rows: list[np.ndarray], n_hat: np.ndarray) -> list[list[np.ndarray]]:
    """The row parts (:func:`row_parts`) of each class's ``rows`` (one array per class, in the order the call runs
    the classes), announced ONCE for the whole call (:func:`announce_rows`: all classes' parts, in that order);
    returns each class's parts (none for an empty class).  Announcing draws nothing: the classes keep their order
    and their parts (each class cut on its own, as before), so every draw stays; only the source's pieces change
    (a class of two groups no longer costs a rows pass of its own).  Released counts only."""
    per = [row_parts(r, n_hat) if r.size else [] for r in rows]
    announce_rows(src, [g for p in per for g in p], n_hat)
    return per


def _rows_route(src: Source, rows: np.ndarray, n_hat: np.ndarray, eps_bound: float, eps_em: float, p: float,
                rng: Rng, parts: list[np.ndarray] | None = None) -> np.ndarray:
    """The list route's code for the groups ``rows`` of one class (floor at ``eps_bound`` with the floor's Poisson
    rate from the released count, then the mechanism at ``eps_em`` on the log-uniform codes) on their rows,
    chunk by chunk (:data:`ROWS_CHUNK`, cut on released counts): each group's mechanisms and inputs are the list
    route's, the chunks only reorder independent draws (one chunk: the list route's draws).  ``parts``: ``rows``'
    parts, already announced with the call's others (:func:`announce_classes`); else cut and announced here."""
    return _rows_routes(src, rows, n_hat, eps_bound, eps_em, (p,), rng, parts)[0]


def _rows_routes(src: Source, rows: np.ndarray, n_hat: np.ndarray, eps_bound: float, eps_em: float,
                 ps: tuple[float, ...], rng: Rng, parts: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """:func:`_rows_route` for several levels: per chunk the floor once, then the mechanism at ``eps_em`` for each
    p of ``ps`` in order (the list route's ``_tail_quantiles`` on a wide class)."""
    out = [np.empty(rows.size) for _ in ps]
    at = 0
    if parts is None:
        parts = announce_rows(src, row_parts(rows, n_hat), n_hat)
    for g in parts:
        part = slice(at, at + g.size)
        at += g.size
        sub = src.batch(g)
        e = _sf.code_floor(floor_exponent(sub, eps_bound, rng, n_hat[g]))
        for o, p in zip(out, ps, strict=True):
            o[part] = quantile_ci(sub, e, p, eps_em, rng, None, 0, None)[0]
    return out


def median(src: Source, epsilon: float, rng: Rng, p: float = 0.5, n_hat: np.ndarray | None = None,
           small: float = 0.0) -> np.ndarray:
    """dp_median (= dp_quantile at p = 1/2), scalefree, without bounds: the law of
    :func:`~dpsql.core.scalefree.run_quantile` (module docstring); NaN = NULL.  Cost epsilon (pure).

    ``n_hat``: the released count (:func:`released_count`), else drawn here.  ``small`` (the hybrid route): in
    each class the groups with ``n_hat < small`` are read as rows (:meth:`Source.batch`) and run the list route's
    code for a class (:func:`~dpsql.core.scalefree.floor_exponent`, then
    :func:`~dpsql.core.scalefree.quantile_ci`; :func:`_rows_route`) before the others take the passes: the same
    law group by group (each group's mechanisms, shares and inputs are the list route's; groups are independent),
    the same draws when a class is all rows (in one chunk) or all passes."""
    if p != 0.5:
        return quantile(src, epsilon, rng, p, n_hat, small)
    n = np.asarray(src.sizes(), dtype=np.int64)
    if n_hat is None:
        n_hat = released_count(src, epsilon, rng)
    out = np.full(n.size, np.nan)
    classes = median_classes(n_hat, epsilon)
    # every class's rows announced at once, in the order asked for (one rows pass when they fit one piece)
    parts = announce_classes(src, [idx[n_hat[idx] < small] for _, idx in classes], n_hat)
    for (sp, idx), pc in zip(classes, parts, strict=True):
        few = n_hat[idx] < small
        if few.any():
            out[idx[few]] = _rows_route(src, idx[few], n_hat, sp["bound"] * epsilon, sp["em"] * epsilon, p, rng,
                                        pc)
            idx = idx[~few]
        if not idx.size:
            continue
        shifts = _shifts(n_hat[idx], p, sp["em"] * epsilon)
        e = _sf.code_floor(_floor(src, idx, n_hat[idx], sp["bound"] * epsilon, rng, shifts[:, 0]))
        k = _window_em(src, idx, n[idx], e, p, sp["em"] * epsilon, rng, shifts)
        out[idx] = decode(k, e)
    return out


def quantile(src: Source, epsilon: float, rng: Rng, p: float, n_hat: np.ndarray | None = None,
             small: float = 0.0) -> np.ndarray:
    """dp_quantile at p != 1/2, scalefree, without bounds: :func:`~dpsql.core.scalefree.run_quantile`'s
    ``_tail_quantiles`` for one p, step for step and draw for draw from a :class:`BatchSource`
    (:func:`quantiles` with ``ps = (p,)``, whose docstring has the steps).  Cost epsilon (pure)."""
    if not 0.0 < p < 1.0 or p == 0.5:
        raise ValueError("quantile: 0 < p < 1, p != 1/2 (the median has its own route)")
    return quantiles(src, epsilon, rng, (p,), n_hat, small)[0]


def quantiles(src: Source, epsilon: float, rng: Rng, ps: tuple[float, ...], n_hat: np.ndarray | None = None,
              small: float = 0.0) -> list[np.ndarray]:
    """The ``ps``-quantiles (each p != 1/2) of every group, scalefree, without bounds, one array per p:
    :func:`~dpsql.core.scalefree._tail_quantiles` step for step and draw for draw from a :class:`BatchSource`.
    One count at ``SPLIT_TAIL['count'] eps`` (or ``n_hat``, :func:`released_count` with the tuple ``ps``); NULL
    below ``n_hat eps = NULL_BELOW['tail']``; then, routed on the released count (post-processing), the wide
    groups (``n_hat min_p min(p, 1 - p) eps >= ROUTE``: large groups) get ONE floor at ``SPLIT_TAIL['bound'] eps``
    (:meth:`Source.gap_histogram`) and, for each p in order, the exponential mechanism at ``(centre + em) eps /
    len(ps)`` on the log-uniform codes, centre 0 (the bucket and tail passes of :func:`median`, sensitivity max(p,
    1 - p); the first bucket pass and the tail pass shared by the ps, :func:`_window_ems`); the near groups (small
    released counts) run scalefree's near route (one floor, one centre, then per p the centred octave-decaying
    codes at ``em eps / len(ps)``) on their rows (:meth:`Source.batch`: the list route's input for those groups
    only).  ``small``: wide groups with ``n_hat < small`` run the wide route's list code on their rows too, before
    the others (as :func:`median`).  Same queries, same shares, same draws as the list route (when the wide groups
    are all rows or all passes).

    Cost epsilon (pure, sequential composition): the count, the floor, (near) the centre, and len(ps) mechanisms
    at an equal part of the rest, each eps_p-DP on released inputs (floor, centre); the privacy argument is
    scalefree's (the matching's law, item 2 of the module docstring).  Add/remove: a row moves the count by one,
    the floor's gap histogram by one pair out and at most one in (the coupling of seed 003), and each p's rank
    loss by at most max(p, 1 - p), the sensitivity its mechanism is calibrated to; the route, the classes and the
    ladder are functions of the released count.  Passes per wide class: the floor's gap passes (the first bucket
    histogram counted in them), two bucket passes per p, one tail pass: fixed by the released counts and len(ps)."""
    ps = tuple(float(p) for p in ps)
    if not ps or any(not 0.0 < p < 1.0 or p == 0.5 for p in ps):
        raise ValueError("quantiles: every 0 < p < 1, p != 1/2 (the median has its own route)")
    n = np.asarray(src.sizes(), dtype=np.int64)
    if n_hat is None:
        n_hat = released_count(src, epsilon, rng, ps)
    wide = n_hat * min(min(p, 1.0 - p) for p in ps) * epsilon >= ROUTE
    null = n_hat * epsilon < NULL_BELOW["tail"]
    out = [np.full(n.size, np.nan) for _ in ps]
    share = (SPLIT_TAIL["centre"] + SPLIT_TAIL["em"]) * epsilon / len(ps)
    idx = np.flatnonzero(wide & ~null & (n_hat < small))
    near = np.flatnonzero(~wide & ~null)
    # the near route by class (:func:`~dpsql.core.scalefree.near_classes`), each in parts of ROWS_CHUNK released rows
    # (:func:`row_parts`; one part per class: the list route's draws); announced once with the wide rows' parts, in
    # the order asked for (the wide rows first)
    classes = near_classes(n_hat[near], epsilon)
    wide_parts, *near_parts = announce_classes(src, [idx] + [near[k] for _, k in classes], n_hat)
    if idx.size:  # the wide route's list code on rows
        for o, v in zip(out, _rows_routes(src, idx, n_hat, SPLIT_TAIL["bound"] * epsilon, share, ps, rng,
                                          wide_parts), strict=True):
            o[idx] = v
    idx = np.flatnonzero(wide & ~null & (n_hat >= small))
    if idx.size:
        # one ladder for every p (the releases do not depend on it: :func:`ladder`), at the largest sensitivity
        shifts = ladder(n_hat[idx], share / max(max(p, 1.0 - p) for p in ps))
        e = _sf.code_floor(_floor(src, idx, n_hat[idx], SPLIT_TAIL["bound"] * epsilon, rng, shifts[:, 0]))
        for o, k in zip(out, _window_ems(src, idx, n[idx], e, ps, share, rng, shifts), strict=True):
            o[idx] = decode(k, e)
    for (sp, _), parts in zip(classes, near_parts, strict=True):  # the near route (announced above)
        for g in parts:
            for o, got in zip(out, class_quantiles(src.batch(g), sp, ps, epsilon, rng, n_hat[g]), strict=True):
                o[g] = got[0]
    return out


#: dp_iqr's levels (scalefree's ``_run_iqr``)
IQR_PS = (0.25, 0.75)


def iqr(src: Source, epsilon: float, rng: Rng, n_hat: np.ndarray | None = None, small: float = 0.0) -> np.ndarray:
    """dp_iqr, scalefree, without bounds: :func:`~dpsql.core.scalefree.run_iqr` step for step and draw for draw
    from a :class:`BatchSource` (NaN = NULL): Q1 and Q3 by :func:`quantiles` at :data:`IQR_PS` (one count, one
    floor and, near, one centre; each quartile half of the mechanisms' share, sensitivity 3/4), then ``_run_iqr``'s
    post-processing: ``_clip_out`` (no bounds here: it keeps every value) and ``max(Q3 - Q1, 0)``.  Cost epsilon
    (pure): :func:`quantiles`' argument, and the rest is post-processing of the two released quartiles."""
    bounds = Params(epsilon=epsilon)
    q1, q3 = (_sf._clip_out(q, bounds) for q in quantiles(src, epsilon, rng, IQR_PS, n_hat, small))
    return np.maximum(q3 - q1, 0.0)
