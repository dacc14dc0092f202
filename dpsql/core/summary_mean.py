"""Summary plans for dp_mean and dp_sum (issue 17): scalefree's :func:`~dpsql.core.scalefree.run_mean` and
:func:`~dpsql.core.scalefree.run_sum` from per-group summaries (a :class:`MeanSource`), draw for draw the list
route's releases from :class:`MeanBatchSource` (tests/core/test_summary_mean.py).

Per group, as :func:`~dpsql.core.scalefree._mean_sum` (the same mechanisms, shares and order of draws):

1. **Count**: the released count (``0.05 eps``, :func:`released_count`); the route class and its split from it
   (:func:`~dpsql.core.scalefree.mean_classes`: few / mid (dp_mean only) / low / high; NULL below
   ``NULL_BELOW``).
2. **Floor**: :func:`dpsql.core.summary._floor` (gap histograms; the subsampled floor above ``FLOOR_KEEP``), the
   median's own.
3. **Few route**: the median (:func:`dpsql.core.summary._window_em`: bucket passes and a tail-count pass); dp_sum
   also a second count, from the exact sizes.
4. **Range routes**: the centre (the same window EM, clamped into the domain); the radius
   (:func:`~dpsql.core.ranges.radius`, monotone SVT over ``x_1 = 0``, ``x_k = s0 2**((k-2)/2)``) from ONE pass,
   :meth:`MeanSource.radius_histogram`: per row the first ladder index k whose range ``[c - x_k, c + x_k]`` holds
   it (comparisons exactly as radius makes them: ``v < c - x`` and ``v > c + x``, with c - x and c + x rounded
   as in numpy).  The predicate is monotone in k (x_k does not decrease, IEEE rounding is monotone), so the
   number of rows outside at radius k is ``n - #{k_row <= k}``: every query the SVT can ask, whatever its blocks,
   from one histogram (the SVT itself, :func:`~dpsql.core.primitives.svt_scan`, runs unchanged: its draws
   are the list route's).  The cap: the exponential mechanism for the largest ``d = |x - c|`` on the NEAR
   codes (p = 1, target rank n), through the window passes over the derived value d
   (:meth:`MeanSource.derived`; :func:`_em`).  The clipped sum: :meth:`MeanSource.clipped_sums`, the exact
   int64 fixed-point sums of :func:`~dpsql.core.primitives.fixed_point_sum` over ``clip(x, l, r) [- c]``, then
   :func:`~dpsql.core.primitives.release_fixed_sum` (release_sum's noise step).
5. **Hybrid** (``small``): groups whose released count is below ``small`` are read as rows
   (:meth:`~dpsql.core.summary.Source.batch`) and run the list route's own code for their class
   (:func:`~dpsql.core.scalefree.mean_sum_route`), in chunks of ``ROWS_CHUNK`` released rows.

Cost: that of run_mean / run_sum, charged by the same calls (epsilon per group, pure).  Privacy: every
summary is the exact statistic the list route's mechanism reads (the floor's matching in law, as for the
median: :mod:`dpsql.core.summary`), so the add/remove argument is scalefree's; which passes run is a function of
released counts (the classes, the split, the ladders), never of the rows.  Passes per route class of groups:
the floor's (as the median's), 3 bucket + 1 tail pass for the centre (or the median), one radius histogram,
3 bucket + 1 tail pass for the cap over d, one clipped-sum pass.

Nothing is left unsummarised: every step reads counts or exact integer sums.  The EM over d needs the NEAR
measure's true codes on raw cells (:func:`near_codes`; NEAR cells are unions of raw cells: octave k above the
floor keeps the top ``36 - k + 1`` of the 36 raw mantissa bits, the linear octave is the raw one);
:func:`_em` and :func:`_locate` are core.summary's one-p window EM and bucket locator with the measure as a
parameter (copies: core.summary's own are being generalised to several ps at the same time; fold them in).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from ..noise import Rng
from . import scalefree as _sf
from .batch import DOMAIN, Batch
from .helpers import B_MIN
from .primitives import (
    fixed_point_sum,
    noisy_count_of,
    per_row,
    pow2_floor,
    propose,
    rank_window,
    release_fixed_sum,
    svt_scan,
    window_reach,
)
from .ranges import K_RADIUS, _step
from .registry import Params
from .scalefree import (
    CAP_BELOW,
    CAP_SLACK,
    CAP_TRUST,
    E_MIN,
    E_TOP,
    NEAR,
    OUTSIDE,
    SCAN,
    SPLIT_MEAN,
    SUM_FEW,
    FloatCodes,
    decode,
    mean_classes,
    mean_sum_route,
    mid_fallback,
)
from .spending import charge_pure
from .summary import (
    RAW_BITS,
    ROWS_CHUNK,
    BatchSource,
    Source,
    _floor,
    _KnownCodes,
    _shifts,
    _window_em,
    bucket_ends,
    raw_value,
    true_codes,
)

__all__ = ["MeanSource", "MeanBatchSource", "mean", "sum", "released_count", "row_groups", "inside_index",
           "near_codes", "RADIUS_QUERIES"]

#: the radius scan's query bound (``radius(..., fine=True)``: 2 K_RADIUS); ladder indices run from 1 to it
RADIUS_QUERIES = 2 * K_RADIUS


class MeanSource(Source, Protocol):
    """A :class:`~dpsql.core.summary.Source` with the summaries the mean and the sum read besides."""

    def radius_histogram(self, groups: np.ndarray, c: np.ndarray, s0: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group of ``groups`` (``c``, ``s0`` one per group): the histogram of :func:`inside_index` over its
        rows, as (index into ``groups``, k, count)."""

    def derived(self, groups: np.ndarray, c: np.ndarray) -> Source:
        """A Source whose group i holds ``|x - c[i]|`` (float64, as numpy computes it) for the rows x of
        ``groups[i]`` (not clamped: up to 2**1001)."""

    def clipped_sums(self, groups: np.ndarray, l: np.ndarray, h: np.ndarray, c: np.ndarray | None,
                     sens: np.ndarray) -> np.ndarray:
        """Per group: :func:`~dpsql.core.primitives.fixed_point_sum` of ``clip(x, l, h)`` (minus ``c`` when
        given) at sensitivity ``sens``: the exact int64 sum of ``rint(clip(y, -S, S) / gamma)``."""


def _inside(v: np.ndarray, c: np.ndarray, s0: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Row v lies in ``[c - x_k, c + x_k]`` as :func:`~dpsql.core.ranges.radius` compares (fine ladder)."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.where(k == 1, 0.0, _step(s0, k - 2, True))
        return (v >= c - x) & (v <= c + x)


def inside_index(v: np.ndarray, c: np.ndarray, s0: np.ndarray) -> np.ndarray:
    """Per row the smallest ladder index k in ``[1, RADIUS_QUERIES]`` at which it is inside (RADIUS_QUERIES when
    none is): binary search on a predicate monotone in k (the reference; the SQL pass computes the same)."""
    lo = np.ones(v.size, dtype=np.int64)
    hi = np.full(v.size, RADIUS_QUERIES, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        ok = _inside(v, c, s0, mid)
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid + 1)
    return lo


class MeanBatchSource(BatchSource):
    """:class:`~dpsql.core.summary.BatchSource` with the mean's summaries: the reference for the SQL passes."""

    def radius_histogram(self, groups, c, s0):  # noqa: ANN001, ANN201, D102
        sub = self._sub(groups)
        g = sub.group_ids
        return self._count(g, inside_index(sub.values, c[g], s0[g]))

    def derived(self, groups: np.ndarray, c: np.ndarray) -> BatchSource:  # noqa: D102
        sub = self._sub(groups)
        return BatchSource(Batch(np.abs(sub.values - per_row(c, sub.offsets)), sub.offsets))

    def clipped_sums(self, groups, l, h, c, sens):  # noqa: ANN001, ANN201, D102
        sub = self._sub(groups)
        x = np.clip(sub.values, per_row(l, sub.offsets), per_row(h, sub.offsets))
        if c is not None:
            x = x - per_row(c, sub.offsets)
        return fixed_point_sum(x, sub.offsets, sens)


def near_codes(rel: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The NEAR code (centre 0, :class:`~dpsql.core.scalefree.FloatCodes` with ``decay = NEAR``) of every value in
    raw cell ``rel`` (monotone: NEAR cells are unions of raw cells)."""
    rel = np.asarray(rel, dtype=np.int64)
    e = np.broadcast_to(np.asarray(e, dtype=np.int64), rel.shape)
    if not rel.size:
        return rel.copy()
    v = raw_value(rel, e)
    ctr = _sf._mag_max(e, NEAR)
    mag = np.minimum(_sf._magnitude(np.abs(v), e, NEAR), ctr)
    return np.where(v < 0, ctr - mag, ctr + mag)


def _codes(decay: int):  # noqa: ANN202
    return true_codes if decay == _sf.LOGUNIFORM else near_codes


def _locate(g: np.ndarray, b: np.ndarray, c: np.ndarray, shift: np.ndarray, e: np.ndarray, base: np.ndarray,
            n: np.ndarray, i_lo: np.ndarray, i_hi: np.ndarray, decay: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`dpsql.core.summary._locate` for the measure ``decay`` (its argument holds for any monotone map of
    raw cells to codes)."""
    codes = _codes(decay)
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
    ends = bucket_ends(b, np.asarray(shift, dtype=np.int64)[g])

    def t_at(side: int, pos: np.ndarray) -> np.ndarray:
        return codes(ends[side][pos], e[g[pos]])

    thr_lo, thr_hi = t_at(0, j) - 2, t_at(1, h)
    lo_pos, right = start.copy(), np.where(empty, start, j)
    while np.any(act := lo_pos < right):
        mid = (lo_pos + right) // 2
        ok = np.zeros(G, dtype=bool)
        ok[act] = t_at(1, mid[act]) > thr_lo[act]
        right, lo_pos = np.where(act & ok, mid, right), np.where(act & ~ok, mid + 1, lo_pos)
    hi_pos, left = h.copy(), np.where(empty, h, top)
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


def _raw_at_most(y: np.ndarray, e: np.ndarray, decay: int) -> np.ndarray:
    """The largest raw code whose code (measure ``decay``) is at most y: core.summary's binary search."""
    codes = _codes(decay)
    top = (1002 - np.asarray(e, dtype=np.int64)) << RAW_BITS  # above every raw code of |x| <= 2**1001
    lo, hi = -top, top.copy()
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // 2
        ok = codes(mid, e) <= y
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return lo


def _em(src: Source, groups: np.ndarray, n: np.ndarray, e: np.ndarray, p: float, epsilon: float, rng: Rng,
        shifts: np.ndarray, decay: int) -> np.ndarray:
    """:func:`dpsql.core.summary._window_em` (one p) on the measure ``decay``: the codes
    :func:`~dpsql.core.scalefree._quantile` draws with that measure, centre 0."""
    G = groups.size
    sens = max(p, 1.0 - p)
    eps = epsilon / sens
    K = FloatCodes(np.zeros(0), np.zeros(G + 1, dtype=np.int64), e, decay=decay).K
    t = p * n.astype(np.float64)
    W = window_reach(K, eps)
    i_lo, i_hi = np.floor(t).astype(np.int64) - W, np.ceil(t).astype(np.int64) + W
    base = np.zeros(G, dtype=np.int64)
    lo = hi = prev = None
    for j in range(shifts.shape[1]):
        shift = shifts[:, j]
        hg, hb, hc = src.bucket_histogram(groups, e, shift, prev, lo, hi)
        if j == shifts.shape[1] - 1:
            break
        lo, hi, base = _locate(hg, hb, hc, shift, e, base, n, i_lo, i_hi, decay)
        prev = shift
    offsets = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(n, out=offsets[1:])
    codes = _KnownCodes(offsets, base, K, hg, _codes(decay)(hb, e[hg]), hc)
    charge_pure(eps * sens, "exponential mechanism (rank window)")
    win = rank_window(codes, offsets, K, t, 0, eps)
    final = np.empty(G, dtype=np.int64)
    rounds = []
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
    which = np.concatenate([r[0] for r in rounds]) if rounds else np.zeros(0, dtype=np.int64)
    ys = np.concatenate([r[1] for r in rounds]) if rounds else np.zeros(0, dtype=np.int64)
    thr = _raw_at_most(np.concatenate([ys, ys - 1]), e[np.concatenate([which, which])], decay)
    got = src.rank_counts(groups, e, np.concatenate([which, which]), thr)
    le, lt = got[: ys.size], got[ys.size:]
    out = final.copy()
    done = np.zeros(G, dtype=bool)
    at = 0
    for tg, yt, env, E in rounds:
        f, g_ = le[at:at + tg.size], lt[at:at + tg.size]
        at += tg.size
        loss = np.maximum(0.0, np.maximum(t[tg] - f, g_ - t[tg]))
        acc = (E >= win.half * (loss - env)) & ~done[tg]
        out[tg[acc]] = yt[acc]
        done[tg[acc]] = True
    return out


def _radius(hist: tuple[np.ndarray, np.ndarray, np.ndarray], n: np.ndarray, s0: np.ndarray, eps_scan: float,
            rng: Rng, outside: float | None = None) -> np.ndarray:
    """:func:`~dpsql.core.ranges.radius` (fine ladder, monotone SVT, ``outside = OUTSIDE / eps_scan``) from the
    radius histogram: the same queries (``-#outside = #{k_row <= k} - n``), threshold and draws."""
    hg, hk, hc = (np.asarray(a, dtype=np.int64) for a in hist)
    G = n.size
    width = RADIUS_QUERIES + 1
    key = hg * width + hk
    order = np.argsort(key, kind="stable")
    key, cum = key[order], np.cumsum(hc[order])
    first = np.searchsorted(key, np.arange(G, dtype=np.int64) * width)
    before = np.where(first > 0, cum[np.maximum(first - 1, 0)], 0) if key.size else np.zeros(G, dtype=np.int64)

    def q(active: np.ndarray, ks: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(key, (active * width)[:, None] + ks[None, :], side="right")
        upto = np.where(pos > 0, cum[np.maximum(pos - 1, 0)], 0) if key.size else np.zeros(pos.shape, np.int64)
        return (upto - before[active][:, None]) - n[active][:, None]

    thr = -int(math.ceil(OUTSIDE / eps_scan if outside is None else outside))
    i = svt_scan(q, G, thr, 1, eps_scan, rng, RADIUS_QUERIES, monotone=True)
    with np.errstate(over="ignore"):
        r = np.where(i == 1, 0.0, _step(s0, i - 2, True))
    return np.minimum(r, 2.0**1002)


def released_count(src: Source, epsilon: float, rng: Rng) -> np.ndarray:
    """The released count of :func:`mean` / :func:`sum` (``SPLIT_MEAN['count'] = SPLIT_SUM['count']``): the first
    draw of either; pass it back as ``n_hat`` to continue from it."""
    return noisy_count_of(np.asarray(src.sizes(), dtype=np.int64), SPLIT_MEAN["count"] * epsilon, rng)


def row_groups(n_hat: np.ndarray, epsilon: float, kind: str, small: float) -> np.ndarray:
    """The groups :func:`mean` (``kind='mean'``) or :func:`sum` reads as rows given the released count: in a route
    class (not NULL) and ``n_hat < small``.  A function of released values and public constants only."""
    n_hat = np.asarray(n_hat, dtype=np.float64)
    every = [idx for _, idx, _ in mean_classes(n_hat, epsilon, kind)]
    idx = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *every]))
    return idx[n_hat[idx] < small]


def _rows_route(src: Source, rows: np.ndarray, n_hat: np.ndarray, route: str, sp: dict[str, float], eps: float,
                rng: Rng, kind: str) -> np.ndarray:
    """The list route's code for the groups ``rows`` of one class on their rows, chunk by chunk (``ROWS_CHUNK``
    released rows, as :func:`dpsql.core.summary._rows_route`; one chunk: the list route's draws)."""
    w = np.cumsum(np.maximum(n_hat[rows], 1.0))
    out = np.empty(rows.size)
    params = Params(epsilon=eps)
    for part in np.split(np.arange(rows.size), np.flatnonzero(np.diff(np.floor(w / ROWS_CHUNK))) + 1):
        g = rows[part]
        out[part] = mean_sum_route(src.batch(g), n_hat[g], route, sp, eps, rng, params, None, kind)[0]
    return out


def _route(src: MeanSource, idx: np.ndarray, n: np.ndarray, nh: np.ndarray, route: str, sp: dict[str, float],
           eps: float, rng: Rng, kind: str) -> np.ndarray:
    """One route class through the summaries (module docstring): :func:`~dpsql.core.scalefree.mean_sum_route`'s
    steps and draws."""
    n = n[idx]
    if route == "few":
        rest = sp["median"] * eps
        eps_med = rest if kind == "mean" else SUM_FEW["median"] * rest
        shifts = _shifts(nh, 0.5, eps_med)
        e = _floor(src, idx, nh, sp["bound"] * eps, rng, shifts[:, 0])
        med = decode(_window_em(src, idx, n, e, 0.5, eps_med, rng, shifts), e)
        if kind == "mean":
            return med
        w1, w2 = (sp["count"] * eps) ** 2, (SUM_FEW["count"] * rest) ** 2
        n2 = (w1 * nh + w2 * noisy_count_of(n, SUM_FEW["count"] * rest, rng)) / (w1 + w2)
        with np.errstate(over="ignore"):
            return med * np.maximum(n2, 0.0)
    eps_c, eps_r = sp["centre"] * eps, sp["radius"] * eps
    shifts = _shifts(nh, 0.5, eps_c)
    e = _floor(src, idx, nh, sp["bound"] * eps, rng, shifts[:, 0])
    c = np.clip(decode(_window_em(src, idx, n, e, 0.5, eps_c, rng, shifts), e), -DOMAIN, DOMAIN)
    b = np.ldexp(1.0, e)
    s0 = np.maximum(np.minimum(b * 2.0**-8, pow2_floor(np.abs(c)) * 2.0**-20), b * 2.0**-40)
    s0 = np.maximum(s0, B_MIN)
    eps_scan = SCAN * eps_r
    r = _radius(src.radius_histogram(idx, c, s0), n, s0, eps_scan, rng)
    with np.errstate(divide="ignore"):
        ec = np.maximum(e, np.frexp(np.abs(c))[1].astype(np.int64) - CAP_BELOW)
    ec = np.clip(ec, E_MIN, E_TOP - 1)
    eps_cap = (1.0 - SCAN) * eps_r
    local = np.arange(idx.size, dtype=np.int64)
    k = _em(src.derived(idx, c), local, n, ec, 1.0, eps_cap, rng, _shifts(nh, 1.0, eps_cap), NEAR)
    cap = decode(k, ec, np.zeros(idx.size), NEAR)
    capped = np.clip(CAP_SLACK * cap, 0.0, 2.0**1002)
    cut = (cap <= 0.0) | (r > CAP_TRUST * cap)
    r = np.where(cut, np.minimum(r, capped), r)
    l, h = c - r, c + r
    cc, half = l / 2.0 + h / 2.0, h / 2.0 - l / 2.0
    sens = half if kind == "mean" else np.maximum(np.abs(l), np.abs(h))
    sums = src.clipped_sums(idx, l, h, cc if kind == "mean" else None, sens)
    total = release_fixed_sum(sums, sens, sp["sum"] * eps, rng)
    if kind != "mean":
        return total
    fall = mid_fallback(route, half, sp, eps, nh, e)
    return np.where(fall, c, np.clip(cc + total / np.maximum(nh, 1.0), l, h))


def _mean_sum(src: MeanSource, epsilon: float, rng: Rng, kind: str, n_hat: np.ndarray | None,
              small: float) -> np.ndarray:
    n = np.asarray(src.sizes(), dtype=np.int64)
    if n_hat is None:
        n_hat = released_count(src, epsilon, rng)
    out = np.full(n.size, np.nan)
    for route, idx, sp in mean_classes(n_hat, epsilon, kind):
        few = n_hat[idx] < small
        if few.any():
            out[idx[few]] = _rows_route(src, idx[few], n_hat, route, sp, epsilon, rng, kind)
            idx = idx[~few]
        if idx.size:
            out[idx] = _route(src, idx, n, n_hat[idx], route, sp, epsilon, rng, kind)
    if kind == "mean":
        out = np.where(n_hat >= 1.0, out, np.nan)
    return out


def mean(src: MeanSource, epsilon: float, rng: Rng, n_hat: np.ndarray | None = None,
         small: float = 0.0) -> np.ndarray:
    """dp_mean, scalefree, without bounds: :func:`~dpsql.core.scalefree.run_mean`'s release (module docstring);
    NaN = NULL.  Cost epsilon (pure).  ``n_hat``: the released count (:func:`released_count`), else drawn here;
    ``small``: groups with ``n_hat < small`` run the list route's code on their rows (:meth:`Source.batch`) before
    the others take the passes, class by class: the same law group by group, the same draws when a class is all
    rows (in one chunk) or all passes."""
    return _mean_sum(src, epsilon, rng, "mean", n_hat, small)


def sum(src: MeanSource, epsilon: float, rng: Rng, n_hat: np.ndarray | None = None,  # noqa: A001
        small: float = 0.0) -> np.ndarray:
    """dp_sum, scalefree, without bounds: :func:`~dpsql.core.scalefree.run_sum`'s release, as :func:`mean`."""
    return _mean_sum(src, epsilon, rng, "sum", n_hat, small)
