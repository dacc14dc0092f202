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
discrete Laplace variate is the difference of two geometric variates; a geometric variate of scale ``t``
is split into independent parts (a high part of scale in [1, 2) and blocks of 16 low bits, see
:func:`geometric`) so that no float step handles a number above 2**16 and the law stays exact at every
scale up to :data:`MAX_SCALE` (2**48; the epsilon floor keeps every mechanism below it).  Exponential
variates keep 53 significant bits over their whole range, both tails included (no truncation, no 0).
The only inexactness left is float64 rounding in ``log``/``log1p``/``expm1`` on numbers of order one: a
relative error below 1e-10 in the probability of each integer, which changes the privacy loss by less
than 1e-9 (documented in docs/methods.md, "At the extremes").

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
    "normal",
    "laplace_log_normal",
    "uniform_log_normal",
    "arsinh_normal",
    "student_t3",
    "failures_before_success",
    "segment_argmax",
    "exponential_mechanism",
]

_U53 = 2.0**-53
_LN_2_11 = 11.0 * math.log(2.0)
#: the largest discrete Laplace / Gaussian scale accepted (the epsilon floor keeps every mechanism below it)
MAX_SCALE = 2.0**48
_BLOCK = 16  # low bits of a geometric variate drawn per inversion step


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
        """Exp(1), never truncated and never 0, with float64 precision over its whole range.

        A 64-bit word ``w`` gives ``U = (2**64 - w - 1/2) 2**-64`` and ``E = -log U`` (the old 53-bit
        uniform stopped the tail near 36.7 and gave ``E = 0`` with probability 2**-53).  Two ends are
        redrawn exactly:

        * large end, ``U < 2**-11`` (``E > 11 ln 2``): memoryless, so ``E = 11 ln 2 + E'`` with a fresh
          ``E'``; the tail keeps 53 significant bits however deep it goes;
        * small end, ``V = 1 - U < 2**-11``: given that event ``V`` is uniform on ``[0, 2**-11)``, so
          ``V = 2**-11 V'`` with a fresh ``V'`` (repeated while needed) and ``E = -log1p(-V)``; ``E`` near 0
          keeps 53 significant bits, which is what the Gumbel upper tail ``-log E`` reads.

        Elsewhere ``E`` has absolute error <= 2**-53 with ``E >= 2**-11``, a relative error <= 2**-42.
        """
        n = int(n)
        w = self.words(n)
        u_int = ~w  # 2**64 - 1 - w
        with np.errstate(divide="ignore"):
            e = -np.log((u_int.astype(np.float64) + 0.5) * 2.0**-64)
        deep = np.flatnonzero(u_int < np.uint64(2**53))
        if deep.size:  # memoryless restart: E | E > 11 ln 2 is 11 ln 2 + Exp(1)
            e[deep] = _LN_2_11 + self.exponential(deep.size)
        near0 = np.flatnonzero(w < np.uint64(2**53))
        if near0.size:
            e[near0] = self._small_exponential(near0.size)
        return e

    def _small_exponential(self, n: int) -> np.ndarray:
        """``E`` given ``E < -log(1 - 2**-11)``: ``-log1p(-V)`` with ``V`` uniform on ``[0, 2**-11)``."""
        scale = np.full(n, 2.0**-11)
        v = np.empty(n)
        todo = np.arange(n)
        while todo.size:
            w = self.words(todo.size)
            ok = w >= np.uint64(2**53)  # 53 significant bits; else V' < 2**-11: refine again
            i = todo[ok]
            v[i] = (w[ok].astype(np.float64) + 0.5) * 2.0**-64 * scale[i]
            todo = todo[~ok]
            scale[todo] *= 2.0**-11
        return -np.log1p(-v)

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
    """``n`` variates with ``P(G >= k) = exp(-k / t)``, k = 0, 1, ... (int64), exact at every scale.

    Drawing ``floor(t * E)`` directly loses the integer grid once ``t * E`` nears 2**53 / (the spacing of
    ``E``), so large scales are split.  With ``m = 2**j <= t < 2m`` (``m = 1`` when ``t < 1``), the
    geometric law factorises: ``q**g = (q**m)**H * q**L`` for ``g = H m + L``, ``0 <= L < m``, so ``H``
    and ``L`` are independent; ``H`` is geometric with scale ``t / m`` in [1, 2) (drawn as
    ``floor((t / m) E)``), and ``L`` is a geometric truncated to ``[0, 2**j)``, whose blocks of
    ``_BLOCK`` bits are again independent truncated geometrics, each drawn by inversion of its CDF
    (``v = floor(2**b * (-log1p(-U (1 - e**-a))) / a)``, ``a = 2**(lo + b) / t <= 1``).  Every float
    step works on numbers of order 1 to 2**16, so each integer's probability has relative error
    ~1e-10 or less whatever ``t`` is.  ``t`` must be at most :data:`MAX_SCALE`; then ``H m`` reaches
    2**62 (where it is capped) only with probability below exp(-8000).
    """
    n = int(n)
    t_arr = np.asarray(t, dtype=np.float64)
    if np.any(~(t_arr <= MAX_SCALE)):
        raise ValueError("noise scale too large")
    if t_arr.ndim == 0:  # one scale for all draws: the split is computed once
        tf = float(t_arr)
        jj = max(math.frexp(tf)[1] - 1, 0)
        h = np.floor(math.ldexp(tf, -jj) * rng.exponential(n))
        g = (np.minimum(h, 2.0 ** (62 - jj) - 1.0) * 2.0**jj).astype(np.int64)
        for lo in range(0, jj, _BLOCK):
            b = min(jj - lo, _BLOCK)
            g += _low_block(np.full(n, math.ldexp(1.0, lo + b) / tf), b, rng) << lo
        return g
    t_arr = np.broadcast_to(t_arr, (n,))
    _, ex = np.frexp(t_arr)
    j = np.maximum(ex.astype(np.int64) - 1, 0)  # 2**j <= t < 2**(j+1), or j = 0 for t < 1
    h = np.floor(np.ldexp(t_arr, -j) * rng.exponential(n))
    g = np.ldexp(np.minimum(h, np.ldexp(1.0, 62 - j) - 1.0), j).astype(np.int64)
    for lo in range(0, int(j.max(initial=0)), _BLOCK):
        sel = np.flatnonzero(j > lo)
        b = np.minimum(j[sel] - lo, _BLOCK)
        g[sel] += _low_block(np.ldexp(1.0, lo + b) / t_arr[sel], b, rng) << lo
    return g


def _low_block(a: np.ndarray, b: np.ndarray | int, rng: Rng) -> np.ndarray:
    """``v`` in ``[0, 2**b)`` with ``P(v) ~ exp(-a v / 2**b)`` (``0 < a <= 1``), by inversion of the CDF."""
    u = (rng.words(a.size) >> np.uint64(11)).astype(np.float64) * _U53  # uniform on [0, 1)
    y = -np.log1p(u * np.expm1(-a)) / a  # in [0, 1)
    return np.minimum(np.floor(np.ldexp(y, b)), np.ldexp(1.0, b) - 1.0).astype(np.int64)


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
        # accept with probability exp(-x) as the event {E >= x}: exact far into the tail, where a
        # 53-bit uniform would round exp(-x) to 0 and truncate the Gaussian
        x = (np.abs(y) - sg * sg / t) ** 2 / (2.0 * sg * sg)
        ok = rng.exponential(todo.size) >= x
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out.reshape(shape)


def gumbel(n: int, rng: Rng) -> np.ndarray:
    """Standard Gumbel variates ``-log(E)``, ``E ~ Exp(1)`` (tail-exact exponential)."""
    return -np.log(rng.exponential(n))


def normal(n: int, rng: Rng) -> np.ndarray:
    """Standard normals by Box-Muller with a tail-exact radius ``sqrt(2E)`` (``E`` from :meth:`Rng.exponential`)."""
    return np.sqrt(2.0 * rng.exponential(n)) * np.cos(2.0 * math.pi * rng.uniform(n))


# Continuous noise shapes of the smooth-sensitivity mechanism (Bun & Steinke 2019; dpsql.core.smooth calibrates
# them and snaps the release to a grid).  ``sigma`` is each draw's shape parameter; one draw per entry.


def laplace_log_normal(sigma: np.ndarray, rng: Rng) -> np.ndarray:
    """Laplace log-normal ``L exp(sigma N)``: ``L`` standard Laplace (an exponential with a random sign)."""
    n = sigma.size
    lap = rng.exponential(n) * np.where(rng.uniform(n) <= 0.5, -1.0, 1.0)
    return lap * np.exp(sigma * normal(n, rng))


def uniform_log_normal(sigma: np.ndarray, rng: Rng) -> np.ndarray:
    """Uniform log-normal ``U exp(sigma N)``, ``U`` uniform on [-1, 1]."""
    n = sigma.size
    return (2.0 * rng.uniform(n) - 1.0) * np.exp(sigma * normal(n, rng))


def arsinh_normal(n: int, rng: Rng) -> np.ndarray:
    """Arsinh-normal ``sinh(N)``."""
    return np.sinh(normal(n, rng))


def student_t3(n: int, rng: Rng) -> np.ndarray:
    """Student's t with 3 degrees of freedom: ``N / sqrt(chi2_3 / 3)``, ``chi2_3 = 2E + N**2``."""
    chi2 = 2.0 * rng.exponential(n) + normal(n, rng) ** 2  # chi-square with 3 dof
    return normal(n, rng) / np.sqrt(np.maximum(chi2, 1e-300) / 3.0)


def failures_before_success(p: np.ndarray, rng: Rng) -> np.ndarray:
    """Bernoulli(p) trials: the number of failures before the first success, one per entry of ``p`` (float64;
    +inf when p = 0), in one step by inversion: ``floor(E / -log(1 - p))`` with ``E`` tail-exact Exp(1), so
    ``P(J >= j) = (1 - p)**j``."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        lam = -np.log1p(-p)  # +inf when p == 1, 0 when p underflows
        j = np.floor(rng.exponential(p.size).reshape(p.shape) / lam)
    return np.where(np.isnan(j), np.inf, j)


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
