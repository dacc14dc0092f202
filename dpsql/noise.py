"""Noise: the only module that draws randomness.

Production randomness comes from the operating system's CSPRNG: small requests read ``os.urandom``
directly; bulk requests (shuffles, a noise draw per group of a large chunk) expand a fresh 128-bit key
read from ``os.urandom`` with AES-128 in counter mode (``randomgen.AESCounter``, AES-NI), the same
construction as OpenSSL's and NIST's CTR-DRBG.  One call serves a whole chunk of groups.  Tests pass an explicit,
seeded :class:`Rng` (``Rng.seeded(1)``); production code never seeds.

Floating-point safety.  Every additive mechanism in dpsql releases ``grid * (k + z)`` where ``k`` is an
integer computed from the data and ``z`` is an integer drawn from the *discrete* Laplace distribution
(:func:`discrete_laplace`).  The set of possible outputs is the grid itself and does not depend on
the data, so Mironov's porous-Laplace attack and precision-based attacks have nothing to read.  The
discrete Laplace variate is the difference of two geometric variates, each ``floor(t * E)`` with
``E ~ Exp(1)``; ``E`` is sampled by inversion with a memoryless restart below ``2**-20`` so that the
tail is never truncated.  The only inexactness left is float64 rounding of ``log`` and of the product,
a relative error of order 1e-16 in the probability of each integer, which changes the privacy loss by
less than 1e-12 (documented in the README).

The exponential mechanism is sampled with the Gumbel-max trick on log-weights
(:func:`gumbel`), never by exponentiating raw scores.
"""

from __future__ import annotations

import math
import os

import numpy as np
import randomgen

__all__ = [
    "Rng",
    "system_rng",
    "discrete_laplace",
    "discrete_gaussian",
    "gumbel",
    "segment_argmax",
    "exponential_mechanism",
]

_U53 = 2.0**-53
_RESTART = 2.0**-20
_LN_RESTART = 20.0 * math.log(2.0)


class Rng:
    """A source of uniform 64-bit words.

    ``Rng()`` reads the OS CSPRNG.  ``Rng.seeded(seed)`` uses numpy's PCG64 and exists for tests only:
    it makes statistical tests deterministic.  Everything else (uniforms, exponentials, Gumbels,
    Bernoulli draws, bounded integers, segment shuffles) is derived here from the 64-bit words or the same
    generator, so the seeded and the production paths share one code path.
    """

    __slots__ = ("_gen",)

    def __init__(self, _generator: np.random.Generator | None = None) -> None:
        self._gen = _generator

    @classmethod
    def seeded(cls, seed: int) -> Rng:
        """A reproducible generator, for tests and benchmarks of accuracy only."""
        return cls(np.random.Generator(np.random.PCG64(seed)))

    @property
    def is_secure(self) -> bool:
        return self._gen is None

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform uint64 words."""
        n = int(n)
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        if self._gen is None:
            if n <= _DIRECT:
                return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()
            return _aes().integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        return self._gen.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)

    def shuffle_segments(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """A copy of ``values`` in which every segment ``offsets[g]:offsets[g+1]`` is in uniformly random
        order, independently across segments.

        Rao-Sandelius two-stage shuffle, because numpy's Fisher-Yates over a large array costs a cache miss
        per element (0.7 s for 10M rows here, against 0.2 s when the same rows are shuffled in 32k pieces):

        1. a segment of more than ``2 * _LEAF`` rows gives every row an i.i.d. uniform label of at most 8
           bits and is stably partitioned by label (a radix argsort); parts still too large are split again;
        2. every part ("leaf") is then put in uniform order: one in-cache Fisher-Yates call per leaf, or,
           when leaves are tiny and many (mean size < ``_KEY_SORT_BELOW``), one sort of packed keys
           ``leaf | random bits | position`` whose ties in the random bits are broken by a uniform shuffle
           of each tied run.

        Why the result is uniform: the labels are i.i.d. across rows, so given the part sizes each part is
        a uniformly random subset of its segment; a uniform order of every part, concatenated in label
        order, is then a uniform order of the segment (Rao 1961, Sandelius 1962).  Sorting by i.i.d. keys
        with ties broken uniformly is a uniform order by exchangeability.  Every random bit comes from
        this generator (the CSPRNG in production).
        """
        gen = _aes() if self._gen is None else self._gen
        out = np.array(values, copy=True)
        offsets = np.asarray(offsets, dtype=np.int64)
        cuts = [offsets]
        big = np.flatnonzero(np.diff(offsets) > 2 * _LEAF)
        todo = list(zip(offsets[big].tolist(), offsets[big + 1].tolist(), strict=True))
        while todo:
            a, b = todo.pop()
            m = b - a
            bits = min(8, max(1, math.ceil(math.log2(m / _LEAF))))
            label = self.words((m + 7) // 8).view(np.uint8)[:m] >> np.uint8(8 - bits)  # i.i.d. uniform bytes
            out[a:b] = out[a:b][np.argsort(label, kind="stable")]
            ends = a + np.cumsum(np.bincount(label, minlength=1 << bits))
            cuts.append(ends)
            starts = np.concatenate([[a], ends[:-1]])
            todo.extend((int(s), int(e)) for s, e in zip(starts, ends, strict=True) if e - s > 2 * _LEAF)
        bounds = np.unique(np.concatenate(cuts)) if len(cuts) > 1 else offsets
        leaves = bounds.size - 1
        if leaves > 0 and out.size < _KEY_SORT_BELOW * leaves:
            order = self._key_sort_order(bounds, gen)
            if order is not None:
                return out[order]
        edges = bounds.tolist()
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            if b - a > 1:
                gen.shuffle(out[a:b])
        return out

    def _key_sort_order(self, bounds: np.ndarray, gen: np.random.Generator) -> np.ndarray | None:
        """Row indices putting every segment of ``bounds`` in uniform order by one sort of packed keys
        (see :meth:`shuffle_segments`); None when fewer than 16 random bits fit in a key."""
        sizes = np.diff(bounds)
        leaves = sizes.size
        lb = max(int(leaves - 1).bit_length(), 1)
        ib = max(int(sizes.max(initial=1) - 1).bit_length(), 1)
        rb = 64 - lb - ib
        if rb < 16:
            return None
        start = np.repeat(bounds[:-1], sizes)  # first row of each row's leaf
        n = start.size
        key = self.words(n) >> np.uint64(lb + ib) << np.uint64(ib)
        key |= np.repeat(np.arange(leaves, dtype=np.uint64) << np.uint64(64 - lb), sizes)
        key |= (np.arange(n, dtype=np.int64) - start).view(np.uint64)
        key.sort()
        order = (key & np.uint64((1 << ib) - 1)).view(np.int64)
        order += start  # leaves keep their place in the sorted keys, so row i's leaf starts at start[i]
        top = key >> np.uint64(ib)
        tie = np.flatnonzero(top[1:] == top[:-1])
        if tie.size:  # runs of equal (leaf, random bits): shuffle each run uniformly
            new_run = np.ones(tie.size, dtype=bool)
            new_run[1:] = tie[1:] != tie[:-1] + 1
            starts = tie[new_run]
            ends = np.append(tie[np.flatnonzero(new_run)[1:] - 1], tie[-1]) + 2
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
                gen.shuffle(order[s:e])
        return order

    def uniform(self, n: int) -> np.ndarray:
        """Uniform on (0, 1], 53 random bits each (the value 0 never occurs, 1 may)."""
        w = self.words(n) >> np.uint64(11)
        return (w.astype(np.float64) + 1.0) * _U53

    def exponential(self, n: int) -> np.ndarray:
        """Exp(1) by inversion, with a memoryless restart so the tail is exact (never truncated).

        If ``U < 2**-20`` then ``E = -log U > 20 log 2`` and, by memorylessness,
        ``E - 20 log 2 ~ Exp(1)`` afresh; we redraw those entries and add ``20 log 2``.  This keeps the
        relative precision of ``E`` in the tail instead of stopping at ``-log 2**-53``.
        """
        u = self.uniform(n)
        e = -np.log(u)
        deep = np.flatnonzero(u < _RESTART)
        shift = 0.0
        while deep.size:
            shift += _LN_RESTART
            u2 = self.uniform(deep.size)
            e[deep] = shift - np.log(u2)
            deep = deep[u2 < _RESTART]
        return e

    def bernoulli(self, p: float, n: int) -> np.ndarray:
        """``n`` independent Bernoulli(p) draws (p is a public, data-independent rate)."""
        if p >= 1.0:
            return np.ones(int(n), dtype=bool)
        if p <= 0.0:
            return np.zeros(int(n), dtype=bool)
        thresh = np.uint64(min(int(p * 2.0**64), 2**64 - 1))
        return self.words(n) < thresh

    def integers(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Uniform integers in ``[low, high]`` (inclusive, int64, elementwise), exact by rejection."""
        low = np.asarray(low, dtype=np.int64)
        high = np.asarray(high, dtype=np.int64)
        span = (high - low).astype(np.uint64) + np.uint64(1)  # 0 means 2**64 (never used here)
        out = np.empty(low.shape, dtype=np.int64)
        todo = np.arange(low.size)
        flat_low, flat_span = low.reshape(-1), span.reshape(-1)
        flat_out = out.reshape(-1)
        while todo.size:
            s = flat_span[todo]
            s = np.where(s == 0, np.uint64(1), s)
            w = self.words(todo.size)
            # accept w below the largest multiple of s: unbiased
            limit = (np.uint64(2**64 - 1) // s) * s
            ok = w < limit
            acc = todo[ok]
            flat_out[acc] = flat_low[acc] + (w[ok] % s[ok]).astype(np.int64)
            todo = todo[~ok]
        return out


_SYSTEM = Rng()
_LEAF = 2**15  # rows shuffled by one in-cache Fisher-Yates call (parts of up to 2 * _LEAF float64 fit in L2)
_KEY_SORT_BELOW = 64  # mean leaf size under which one key sort beats a Python call per leaf (4 us each)
_DIRECT = 4096  # words read straight from os.urandom; larger requests use a fresh AES-CTR stream


def _aes() -> np.random.Generator:
    """A generator over AES-128-CTR keyed with 128 fresh bits from the OS CSPRNG (never reused)."""
    key = int.from_bytes(os.urandom(16), "little")
    return np.random.Generator(randomgen.AESCounter(key=key))


def system_rng() -> Rng:
    """The production generator (OS CSPRNG)."""
    return _SYSTEM


def geometric(t: np.ndarray | float, n: int, rng: Rng) -> np.ndarray:
    """``floor(t * E)`` with ``E ~ Exp(1)``: P(G >= k) = exp(-k / t), k = 0, 1, ... (int64)."""
    e = rng.exponential(n)
    g = np.floor(np.asarray(t, dtype=np.float64) * e)
    return np.minimum(g, 2.0**62).astype(np.int64)


def discrete_laplace(t: np.ndarray | float, rng: Rng, n: int | None = None) -> np.ndarray:
    """Discrete Laplace with scale ``t`` (P(k) proportional to exp(-|k| / t)), as int64.

    ``t`` may be an array (one scale per draw) or a float with ``n`` draws.  ``t == 0`` gives 0.
    If integer-valued ``q`` has sensitivity ``d``, releasing ``q + discrete_laplace(d / eps)`` is
    eps-DP (the ratio of probabilities of any integer under shifts by ``d`` is at most e^eps).
    """
    t_arr = np.asarray(t, dtype=np.float64)
    if n is None:
        n = t_arr.size
        shape = t_arr.shape
    else:
        shape = (int(n),)
    if np.any(~np.isfinite(t_arr)) or np.any(t_arr < 0):
        raise ValueError("noise scale must be finite and non-negative")
    n = int(n)
    t_flat = np.broadcast_to(t_arr.reshape(-1) if t_arr.ndim else t_arr, (n,))
    # both geometric variates in one draw (the first n words feed g1, the next n g2, as two calls would)
    g = geometric(np.concatenate([t_flat, t_flat]) if t_arr.ndim else t_arr, 2 * n, rng)
    return (g[:n] - g[n:]).reshape(shape)


def discrete_gaussian(sigma: np.ndarray | float, rng: Rng, n: int | None = None) -> np.ndarray:
    """Discrete Gaussian N_Z(0, sigma**2) (P(k) proportional to exp(-k**2 / (2 sigma**2))), as int64.

    Canonne-Kamath-Steinke (2020) rejection from a discrete Laplace of scale ``t = floor(sigma) + 1``:
    accept ``Y`` with probability ``exp(-(|Y| - sigma**2/t)**2 / (2 sigma**2))``; vectorised (redraw the
    rejected entries).  The acceptance test compares a 53-bit uniform with a float64 exponential (a
    relative error of order 1e-16 per probability).  If integer ``q`` has L2 sensitivity ``d``,
    ``q + discrete_gaussian(sigma)`` is ``d**2 / (2 sigma**2)``-zCDP.
    """
    s_arr = np.asarray(sigma, dtype=np.float64)
    if n is None:
        n = s_arr.size
        shape = s_arr.shape
    else:
        shape = (int(n),)
    s_flat = np.broadcast_to(s_arr.reshape(-1) if s_arr.ndim else s_arr, (int(n),)).astype(np.float64)
    if np.any(~np.isfinite(s_flat)) or np.any(s_flat < 0):
        raise ValueError("noise scale must be finite and non-negative")
    out = np.zeros(int(n), dtype=np.int64)
    todo = np.flatnonzero(s_flat > 0)
    while todo.size:
        sg = s_flat[todo]
        t = np.floor(sg) + 1.0
        y = discrete_laplace(t, rng)
        p = np.exp(-((np.abs(y) - sg * sg / t) ** 2) / (2.0 * sg * sg))
        ok = rng.uniform(todo.size) <= p
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out.reshape(shape)


def gumbel(n: int, rng: Rng) -> np.ndarray:
    """Standard Gumbel variates ``-log(E)``, ``E ~ Exp(1)`` (tail-exact exponential)."""
    return -np.log(rng.exponential(n))


def segment_argmax(scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Index (into ``scores``) of the maximum within each segment ``offsets[g]:offsets[g+1]``.

    Segments must be non-empty.  Vectorised: one lexsort-free pass with ``np.maximum.reduceat``.
    """
    starts = offsets[:-1]
    seg_max = np.maximum.reduceat(scores, starts)
    sizes = np.diff(offsets)
    seg_of = np.repeat(np.arange(sizes.size), sizes)
    hit = scores == seg_max[seg_of]
    idx = np.flatnonzero(hit)
    # first hit per segment
    first = np.searchsorted(idx, starts)
    return idx[first]


def exponential_mechanism(log_weights: np.ndarray, offsets: np.ndarray, rng: Rng, block: int = 1024) -> np.ndarray:
    """Sample one candidate per segment with probability proportional to ``exp(log_weights)``.

    Gumbel-max: ``argmax(log_w + Gumbel)`` has exactly the softmax law.  ``-inf`` log-weights are
    never chosen (a segment must hold at least one finite log-weight).  Returns indices into
    ``log_weights``.

    Large segments are sampled in two exact stages: candidates are cut into blocks of ``block``; a
    block is drawn by Gumbel-max on its log-sum-exp (the probability of a block is the sum of its
    members'), then a member of the chosen block by Gumbel-max inside it.  The law is the same; the
    random draws fall from one per candidate to one per block plus one block per segment.  Block sums
    add positive terms, so each block's weight keeps float64 relative precision.
    """
    log_weights = np.asarray(log_weights, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    if log_weights.size <= 4 * block or sizes.max(initial=0) <= 4 * block:
        z = log_weights + gumbel(log_weights.size, rng)
        return segment_argmax(z, offsets)
    # stage 1: blocks inside each segment
    nblk = -(-sizes // block)
    blk_off = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(nblk, out=blk_off[1:])
    seg_of_blk = np.repeat(np.arange(sizes.size), nblk)
    local = np.arange(blk_off[-1]) - blk_off[seg_of_blk]
    blk_start = offsets[seg_of_blk] + local * block
    blk_max = np.maximum.reduceat(log_weights, blk_start)
    finite = np.isfinite(blk_max)
    rep_max = np.repeat(np.where(finite, blk_max, 0.0), np.diff(np.append(blk_start, log_weights.size)))
    with np.errstate(under="ignore"):
        ex = np.exp(log_weights - rep_max)
    with np.errstate(divide="ignore"):
        blk_lse = np.where(finite, blk_max + np.log(np.add.reduceat(ex, blk_start)), -np.inf)
    chosen_blk = exponential_mechanism(blk_lse, blk_off, rng, block=block)
    # stage 2: a member of each chosen block
    start = blk_start[chosen_blk]
    end = np.minimum(np.append(blk_start[1:], log_weights.size)[chosen_blk], offsets[1:])
    lens = end - start
    idx = np.repeat(start - np.cumsum(np.append(0, lens[:-1])), lens) + np.arange(lens.sum())
    sub_off = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=sub_off[1:])
    z = log_weights[idx] + gumbel(idx.size, rng)
    return idx[segment_argmax(z, sub_off)]
