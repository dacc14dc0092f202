"""Summary plans for dp_mean and dp_sum (issue 17): scalefree's :func:`~dpsql.core.scalefree.run_mean` and
:func:`~dpsql.core.scalefree.run_sum` from per-group summaries (a :class:`MeanSource`), draw for draw the list
route's releases from :class:`MeanBatchSource` (tests/core/test_summary_mean.py).

Per group, as :func:`~dpsql.core.scalefree._mean_sum` (the same mechanisms, shares and order of draws):

1. **Count**: the released count (``0.05 eps``, :func:`released_count`); the route class and its split from it
   (:func:`~dpsql.core.scalefree.mean_classes`: few / mid (dp_mean only) / low / high / top; NULL below
   ``NULL_BELOW``); per class, the route check's second count (:func:`~dpsql.core.scalefree.confirm_parts`, from
   the exact sizes) for the groups in its zone, which then run the route it gives them.
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
   (:meth:`MeanSource.derived`).  The clipped sum: :meth:`MeanSource.clipped_sums`, the exact
   int64 fixed-point sums of :func:`~dpsql.core.primitives.fixed_point_sum` over ``clip(x, l, r) [- c]``, then
   :func:`~dpsql.core.primitives.release_fixed_sum` (release_sum's noise step).
5. **Hybrid** (``small``): groups whose released count is below ``small`` are read as rows
   (:meth:`~dpsql.core.summary.Source.batch`) and run the list route's own code for their class
   (:func:`~dpsql.core.scalefree.mean_sum_route`), in chunks of ``core.summary.ROWS_CHUNK`` released rows
   (:func:`~dpsql.core.summary.row_parts`), every class's parts announced to the source once, first
   (:func:`~dpsql.core.summary.announce_classes`: one rows pass for all classes when they fit one piece).

Cost: that of run_mean / run_sum, charged by the same calls (epsilon per group, pure).  Privacy: every
summary is the exact statistic the list route's mechanism reads (the floor's matching in law, as for the
median: :mod:`dpsql.core.summary`), so the add/remove argument is scalefree's; which passes run is a function of
released counts (the classes, the split, the ladders), never of the rows.  Passes per route class of groups:
the floor's (as the median's), 3 bucket + 1 tail pass for the centre (or the median), one radius histogram,
3 bucket + 1 tail pass for the cap over d (a source may count the cap's first bucket pass in the radius
histogram's scan: ``first`` of :meth:`MeanSource.radius_histogram`), one clipped-sum pass.

Nothing is left unsummarised: every step reads counts or exact integer sums.  The EM over d is core.summary's
window EM on the NEAR measure (``decay = NEAR``: :func:`dpsql.core.summary.true_codes` maps raw cells to NEAR codes;
NEAR cells are unions of raw cells).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from ..noise import Rng
from .batch import DOMAIN, Batch
from .primitives import (
    fixed_point_sum,
    noisy_count_of,
    per_row,
    release_fixed_sum,
    svt_scan,
)
from .ranges import K_RADIUS, _step, drift_start, drift_term
from .registry import Params
from .scalefree import (
    CONFIRM,
    NEAR,
    OUTSIDE,
    SPLIT_MEAN,
    SUM_FEW,
    anchor_of,
    cap_exponent,
    cap_shift,
    code_floor,
    confirm_parts,
    confirm_zone,
    cut_to_cap,
    decode,
    drift_rows,
    mean_classes,
    mean_sum_route,
    mid_fallback,
    scan_share,
    scan_start,
)
from .summary import (
    BatchSource,
    Source,
    _floor,
    _shifts,
    _window_em,
    announce_classes,
    announce_rows,
    row_parts,
)

__all__ = ["MeanSource", "MeanBatchSource", "mean", "sum", "released_count", "row_groups", "inside_index",
           "RADIUS_QUERIES"]

#: the radius scan's query bound (``radius(..., fine=True)``: 2 K_RADIUS); ladder indices run from 1 to it
RADIUS_QUERIES = 2 * K_RADIUS


class MeanSource(Source, Protocol):
    """A :class:`~dpsql.core.summary.Source` with the summaries the mean and the sum read besides."""

    def radius_histogram(self, groups: np.ndarray, c: np.ndarray, s0: np.ndarray, first: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group of ``groups`` (``c``, ``s0`` one per group): the histogram of :func:`inside_index` over its
        rows, as (index into ``groups``, k, count).  ``first``: the shift per group of the first bucket pass
        that the cap's window EM will ask of :meth:`derived` on the same groups and ``c`` (a function of the
        released counts); a source may count that pass's rows in this pass's scan and answer it from them
        (the same counts, no draw between: it changes which scan counts them, never what is counted)."""

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

    def radius_histogram(self, groups, c, s0, first=None):  # noqa: ANN001, ANN201, D102
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


def _radius(hist: tuple[np.ndarray, np.ndarray, np.ndarray], n: np.ndarray, s0: np.ndarray, eps_scan: float,
            rng: Rng, outside: float | None = None, anchor: np.ndarray | None = None, drift: int = 0
            ) -> np.ndarray:
    """:func:`~dpsql.core.ranges.radius` (fine ladder, monotone SVT, ``outside = OUTSIDE / eps_scan``, the drift
    past ``anchor``) from the radius histogram: the same queries (``-#outside = #{k_row <= k} - n``, plus the
    drift), threshold and draws."""
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
        got = (upto - before[active][:, None]) - n[active][:, None]
        if ka is not None:
            got = got + drift_term(ks[None, :], ka[active][:, None], drift)
        return got

    ka = None if anchor is None or drift == 0 else drift_start(s0, anchor, True)
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
                rng: Rng, kind: str, parts: list[np.ndarray] | None = None) -> np.ndarray:
    """The list route's code for the groups ``rows`` of one class on their rows, chunk by chunk
    (``core.summary.ROWS_CHUNK`` released rows, read at call time; as :func:`dpsql.core.summary._rows_route`; one
    chunk: the list route's draws).  ``parts``: ``rows``' parts, already announced with the call's other classes'
    (:func:`~dpsql.core.summary.announce_classes`); else cut and announced here."""
    out = np.empty(rows.size)
    params = Params(epsilon=eps)
    at = 0
    for g in announce_rows(src, row_parts(rows, n_hat), n_hat) if parts is None else parts:
        out[at:at + g.size] = mean_sum_route(src.batch(g), n_hat[g], route, sp, eps, rng, params, None, kind)[0]
        at += g.size
    return out


def _route(src: MeanSource, idx: np.ndarray, n: np.ndarray, nh: np.ndarray, route: str, sp: dict[str, float],
           eps: float, rng: Rng, kind: str, checked: bool = False) -> np.ndarray:
    """One route class through the summaries (module docstring): :func:`~dpsql.core.scalefree.mean_sum_route`'s
    steps and draws, the route check's second count first."""
    zone = np.zeros(idx.size, dtype=bool) if checked else confirm_zone(route, nh, eps, kind)
    if zone.any():
        n2 = noisy_count_of(n[idx[zone]], CONFIRM * eps, rng)
        out = np.full(idx.size, np.nan)
        for sel, n_use, r, split in confirm_parts(route, nh, zone, n2, sp, eps, kind):
            if sel.size:
                out[sel] = _route(src, idx[sel], n, n_use, r, split, eps, rng, kind, checked=True)
        return out
    n = n[idx]
    if route == "few":
        rest = sp["median"] * eps
        eps_med = rest if kind == "mean" else SUM_FEW["median"] * rest
        shifts = _shifts(nh, 0.5, eps_med)
        e = code_floor(_floor(src, idx, nh, sp["bound"] * eps, rng, shifts[:, 0]))
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
    ef = code_floor(e)  # the centre's, the scan's and the cap's floor, as scalefree._range
    c = np.clip(decode(_window_em(src, idx, n, ef, 0.5, eps_c, rng, shifts), ef), -DOMAIN, DOMAIN)
    s0 = scan_start(ef, c)
    scan = scan_share(route)
    eps_scan = scan * eps_r
    eps_cap = (1.0 - scan) * eps_r
    cap_shifts = _shifts(nh, 1.0, eps_cap)  # the cap's passes (released counts only): its first may share the scan
    hist = src.radius_histogram(idx, c, s0, cap_shifts[:, 0])  # counts only: the cap's draws come first, as listed
    ec = cap_exponent(ef, c)
    local = np.arange(idx.size, dtype=np.int64)
    k = _window_em(src.derived(idx, c), local, n, ec, 1.0, eps_cap, rng, cap_shifts, NEAR, -cap_shift(nh, eps_cap))
    cap = decode(k, ec, np.zeros(idx.size), NEAR)
    r = _radius(hist, n, s0, eps_scan, rng, anchor=anchor_of(cap, nh, eps_cap), drift=drift_rows(eps_scan))
    r, _ = cut_to_cap(r, cap)
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
    classes = mean_classes(n_hat, epsilon, kind)
    # every class's rows announced at once, in the order asked for (one rows pass when they fit one piece)
    parts = announce_classes(src, [idx[n_hat[idx] < small] for _, idx, _ in classes], n_hat)
    for (route, idx, sp), pc in zip(classes, parts, strict=True):
        few = n_hat[idx] < small
        if few.any():
            out[idx[few]] = _rows_route(src, idx[few], n_hat, route, sp, epsilon, rng, kind, pc)
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
