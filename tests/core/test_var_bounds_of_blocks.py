"""var_bounds_of's speed work (issue 17) must not change a bit: ``_ref_var_bounds_of`` and ``_ref_deep_windows``
are verbatim copies of :func:`dpsql.core.asymmetric.var_bounds_of` and ``_deep_windows`` as of 2271d10
(renamed, the unchanged helpers taken from the module; do not edit them), and the module's function must give the
same arrays, bit for bit (float64 views compared as integers: NaN, infinities and the sign of zero included; and
the WIDE bounds before their logs), on summaries of many groups of mixed sizes (empty, 1, 2, 3, small,
n <= 2C + 1, large), extreme values (+-1e300, subnormals, one far outlier, ties), several C, with the groups in
size order or not, more groups than one block holds, and many deep-window groups at once.
"""

import sys

import numpy as np
import pytest

from dpsql.core import asymmetric as A
from dpsql.core.batch import Batch
from dpsql.core.primitives import WIDE, pow2_floor

# --------------------------------------------------------------------------- frozen reference (2271d10)


def _ref_var_bounds_of(S: A.VarSummary, C: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log f, log Lbar)`` for the population variance under add/remove: ``Lbar`` is ``[G, C]``; the data enter
    only through the summary ``S`` (:class:`VarSummary`, computed with the same ``C``).

    ``f = (1/n) sum (x - mean)**2`` (0 for n <= 1, and for the empty set).  For ``l < h = min(C + 1, n - 1)``:
    ``Lbar^l = L^l = min_{k <= l} W_k / (n + l - 2k)`` (exact infimum over the add/remove ball: removing k
    rows leaves at best a window of n - k sorted values, and adding ``l - k`` rows at its mean divides its
    SSD by the new size); ``Lbar^l = 0`` for ``l >= h`` (exact for ``l >= n - 1``: one row is left).  As
    ``|h(x) - h(x')| <= 1``, Def. A.1 holds.  Window sums never subtract: for ``k < n/2`` every window holds
    the median, and sums accumulate outward from it; the deeper windows (only when n <= 2C + 1) accumulate
    rightward from their own first row.  Either way the anchor lies in the window, so the relative rounding
    error is at most ~(window size) * 2**-53 even with huge outliers.  Work: O(C^2) per group, plus O(n C) for
    groups of n <= 2C + 1 (and the summary's O(n)).

    Cost: the O(C^2) window and bound minima run over contiguous column slices, on only the groups deep enough
    for each k / l (groups ordered by size); the core's two sums come in the summary.
    """
    n = S.n
    G = n.size
    has = n > 0
    if not has.any():
        return np.full(G, -np.inf), np.full((G, C), -np.inf)
    xm = S.xm
    first = np.where(has, S.lo[0], 0.0)
    lastv = np.where(has, S.hi[0], 0.0)
    spread = np.maximum(xm - first, lastv - xm)
    sc = np.where(spread > 0, pow2_floor(np.maximum(spread, 2.0**-1000)), 1.0)
    kg = A.var_edges(n, C)  # windows for k <= kg contain the median position
    # The core rows [kg, n - kg) (in every window) are summed in float64 at the core's own scale: their
    # squares cannot underflow next to a huge edge row, and the O(n) pass stays fast; the sums are then
    # moved to the group's scale in WIDE (a power-of-two ratio, exact), where the edge rows join them.
    sc_c = A.var_core_scale(n, xm, S.lo, S.hi, kg)
    to_group = sc_c.astype(WIDE) / sc.astype(WIDE)
    s1c = S.s1.astype(WIDE) * to_group
    s2c = S.s2.astype(WIDE) * to_group * to_group
    cw = int(kg.max())
    kf = np.clip(n - 2, 0, C)  # h - 1: deepest removal count used
    cwf = int(kf.max())
    nf = n.astype(np.float64)
    # groups by decreasing size: kg and kf are non-increasing, so the groups that take part at a given
    # depth k (kg >= k, or kf >= k) are a prefix
    order = None if np.all(n[:-1] >= n[1:]) else np.argsort(-n, kind="stable")

    def perm(a: np.ndarray) -> np.ndarray:
        return a if order is None else a[order]

    def unperm(a: np.ndarray) -> np.ndarray:
        if order is None:
            return a
        out = np.empty_like(a)
        out[order] = a
        return out

    def perm_cols(a: np.ndarray, depth: int) -> np.ndarray:  # [depth, G], groups in size order
        a = a[:depth]
        return a if order is None else a[:, order]

    kgp, kfp, nfp = perm(kg), perm(kf), perm(nf)
    # Work arrays are [depth, group] (groups contiguous, in size order), processed in blocks of B groups
    # that stay in cache.  Edges: lo[j] = d[start + j], hi[j] = d[end - 1 - j] for j < kg (0 past kg).
    B = max(512, 65536 // (max(cw, cwf) + 1))
    jj = np.arange(cw)[:, None]
    ok = jj < kgp[None, :]
    xmp, invp = perm(xm)[None, :], perm((1.0 / sc).astype(WIDE))[None, :]  # 1/sc: exact, a power of two
    lo = np.where(ok, (perm_cols(S.lo, cw) - xmp).astype(WIDE) * invp, 0.0)
    hi = np.where(ok, (perm_cols(S.hi, cw) - xmp).astype(WIDE) * invp, 0.0)
    # A1[cw - a] = s1c + sum(lo[a:]), H1[b] = sum(hi[b:]) (and A2, H2 for the squares): the edge sums
    # accumulate inward from the outermost kept row
    A1, A2, H1, H2 = (np.zeros((cw + 1, G), dtype=WIDE) for _ in range(4))
    A._cumsum0(lo[::-1], out=A1[1:])
    A._cumsum0((lo * lo)[::-1], out=A2[1:])
    H1[:cw] = A._cumsum0(hi[::-1])[::-1]
    H2[:cw] = A._cumsum0((hi * hi)[::-1])[::-1]
    A1 += perm(s1c)[None, :]
    A2 += perm(s2c)[None, :]
    # W_k = min_i SSD(window dropping k - i bottom and i top rows)
    mg = A._prefix_counts(kgp, cw)
    WT = np.full((max(cw, cwf) + 1, G), np.inf, dtype=WIDE)
    b1, b2 = np.empty((cw + 1, B), dtype=WIDE), np.empty((cw + 1, B), dtype=WIDE)
    for c0 in range(0, G, B):
        c1 = min(c0 + B, G)
        a1, a2, h1, h2 = (np.ascontiguousarray(X[:, c0:c1]) for X in (A1, A2, H1, H2))
        for k in range(cw + 1):
            m = min(mg[k], c1) - c0  # groups of the block with kg >= k
            if m <= 0:
                break
            g = slice(c0, c0 + m)
            s1 = np.add(a1[cw - k :, :m], h1[: k + 1, :m], out=b1[: k + 1, :m])
            s2 = np.add(a2[cw - k :, :m], h2[: k + 1, :m], out=b2[: k + 1, :m])
            np.multiply(s1, s1, out=s1)
            s1 /= np.maximum(nfp[g] - k, 1.0)
            s2 -= s1
            WT[k, g] = np.maximum(s2.min(axis=0), 0.0)  # min_i max(x_i, 0) == max(min_i x_i, 0)
    W = unperm(WT.T)
    _ref_deep_windows(S, sc, kg, kf, W)
    f = np.where(n >= 2, W[:, 0] / np.maximum(nf, 1.0), 0.0)
    # L^l = min_{k <= l} W_k / (n + l - 2k), for l <= kf; W_k is +inf past kf, so only k <= kf contributes
    lc = min(cwf, C)
    if lc:
        WT = np.ascontiguousarray(perm(W).T)
        LT = np.empty((lc, G), dtype=WIDE)
        mf = A._prefix_counts(kfp, lc)
        js = np.arange(-lc, lc + 1, dtype=np.float64)[:, None]
        buf = np.empty((lc, B), dtype=WIDE)
        for c0 in range(0, G, B):
            c1 = min(c0 + B, G)
            D = np.maximum(nfp[None, c0:c1] + js, 1.0)  # D[lc + j] = max(n + j, 1)
            lt = np.full((lc, c1 - c0), np.inf, dtype=WIDE)
            for k in range(lc + 1):
                m = min(mf[k], c1) - c0  # groups of the block with kf >= k
                if m <= 0:
                    break
                l0 = max(k, 1)
                q = np.divide(
                    WT[k, c0 : c0 + m], D[l0 - 2 * k + lc : 2 * lc - 2 * k + 1, :m], out=buf[: lc - l0 + 1, :m]
                )
                dst = lt[l0 - 1 :, :m]
                np.minimum(dst, q, out=dst)
            LT[:, c0:c1] = lt
    # Lbar: L^l for l <= kf, 0 past it (and past lc), capped by f and made non-increasing in l
    two_log_sc = 2.0 * np.log(sc)
    log_L = np.full((G, C), -np.inf)
    if lc:
        LT = np.where(np.arange(1, lc + 1)[:, None] <= kfp[None, :], LT, 0.0)
        np.minimum(LT, perm(f)[None, :], out=LT)
        for l in range(1, lc):
            np.minimum(LT[l - 1], LT[l], out=LT[l])
        with np.errstate(divide="ignore"):
            LT = np.log(LT).astype(np.float64)
        LT += perm(two_log_sc)[None, :]
        log_L[:, :lc] = unperm(LT.T)
    with np.errstate(divide="ignore"):
        return np.log(f).astype(np.float64) + two_log_sc, log_L


def _ref_deep_windows(S: A.VarSummary, sc: np.ndarray, kg: np.ndarray, kf: np.ndarray, W: np.ndarray) -> None:
    """Fill ``W[g, k]`` for ``kg[g] < k <= kf[g]`` (windows of n - k sorted values that may miss the median).

    Loop over the window start a: sums of ``(x_j - x_a) / sc`` and their squares accumulate rightward from
    a, so the window ``[a, a + n - k)`` of every k >= a is read off one cumsum.  The differences are taken
    from the values themselves (not from deviations from the median, which round away rows that are close
    to each other but far from the median), then squared in WIDE precision.  Only groups of n <= 2C + 1
    take part; their rows are the summary's ``lo[:kg + 1]`` then ``hi`` read backwards (every row).  Work
    O(n) per (group, a).
    """
    n = S.n
    sel = np.flatnonzero(kf > kg)
    if sel.size == 0:
        return
    sel = sel[np.argsort(-n[sel], kind="stable")]  # by decreasing size: the groups with kf >= a are a prefix
    ns = n[sel]
    width = int(ns.max())
    # [row, group] layout (groups contiguous): the cumsums run down columns, each group's sums in the
    # same order as along its row
    jj = np.arange(width)[:, None]
    inside = jj < ns[None, :]
    top = S.lo.shape[0] - 1
    from_lo = jj <= kg[sel][None, :]
    X = np.where(inside, np.where(from_lo, S.lo[np.minimum(jj, top), sel[None, :]],
                                  S.hi[np.clip(ns[None, :] - 1 - jj, 0, top), sel[None, :]]), 0.0)
    inv = (1.0 / sc[sel]).astype(WIDE)
    k_lo, k_hi = int(kg[sel].min()) + 1, int(kf[sel].max())
    ks = np.arange(k_lo, k_hi + 1)[:, None]
    w = ns[None, :] - ks  # window sizes n - k, [k, group]
    valid = (ks > kg[sel][None, :]) & (ks <= kf[sel][None, :]) & (w >= 1)
    best = np.full(w.shape, np.inf, dtype=WIDE)
    nf = ns.astype(np.float64)[None, :]
    deep = A._prefix_counts(kf[sel], k_hi)
    span = int((ns - kg[sel] - 1).max())  # a deep window (k > kg) holds at most n - kg - 1 rows
    for a in range(k_hi + 1):
        m, i0 = deep[a], max(a - k_lo, 0)  # only k >= a, and groups with kf >= a, can take a window at a
        y = (X[a : a + span, :m] - X[a, :m]).astype(WIDE) * inv[None, :m]  # |x_j - x_a| <= 2**1001: finite
        c1 = A._cumsum0(y)
        c2 = A._cumsum0(y * y)
        wa = w[i0:, :m]
        col = np.clip(wa - 1, 0, c1.shape[0] - 1)
        ok = valid[i0:, :m] & (ks[i0:] >= a) & (a + wa <= nf[:, :m])
        s1, s2 = np.take_along_axis(c1, col, axis=0), np.take_along_axis(c2, col, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ssd = np.maximum(s2 - s1 * s1 / np.maximum(wa, 1), 0.0)
        b = best[i0:, :m]
        best[i0:, :m] = np.where(ok, np.minimum(b, ssd), b)
    sub = W[sel]
    sub[:, k_lo : k_hi + 1] = np.where(valid.T, best.T, sub[:, k_lo : k_hi + 1])
    W[sel] = sub


# --------------------------------------------------------------------------- tests


_NUMPY = np  # the module itself (``np`` here is a _LogTap while the reference runs tapped)


class _LogTap:
    """numpy, except that ``log`` keeps a copy of every WIDE argument: the bounds in WIDE before their logs are
    rounded to float64 (which hides most last-bit changes of the WIDE arithmetic)."""

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def __getattr__(self, name: str):  # noqa: ANN204 - numpy's attribute
        return getattr(_NUMPY, name)

    def log(self, x, *args, **kwargs):  # noqa: ANN001, ANN201 - numpy's log
        if isinstance(x, _NUMPY.ndarray) and x.dtype == WIDE:
            self.seen.append(x.copy())
        return _NUMPY.log(x, *args, **kwargs)


def _tapped(fn, module, S: A.VarSummary, C: int) -> tuple[tuple, list]:  # noqa: ANN001 - function, its module
    """``fn(S, C)`` with ``module``'s numpy replaced by a :class:`_LogTap`: (outputs, the WIDE arrays logged)."""
    tap = _LogTap()
    saved, module.np = module.np, tap
    try:
        out = fn(S, C)
    finally:
        module.np = saved
    return out, tap.seen


def _same_wide(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype == WIDE and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
    np.testing.assert_array_equal(a[~np.isnan(a)], b[~np.isnan(b)])  # == on WIDE: every bit of the value


def _check(S: A.VarSummary, C: int) -> None:
    """var_bounds_of against the reference: float64 outputs bit for bit, and the WIDE bounds they are the logs of."""
    got, got_wide = _tapped(A.var_bounds_of, A, S, C)
    want, want_wide = _tapped(_ref_var_bounds_of, sys.modules[__name__], S, C)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == np.float64 and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))
    assert len(got_wide) == len(want_wide)
    for a, b in zip(got_wide, want_wide, strict=True):
        _same_wide(a, b)


def _group(rng: np.random.Generator, C: int, kind: int) -> np.ndarray:
    """One group's rows of one of several kinds (sizes and values)."""
    small = int(rng.integers(3, 2 * C + 2))  # n <= 2C + 1: deep windows
    big = int(rng.integers(2 * C + 2, 6 * C + 40))
    x = rng.normal(size=big)
    match kind:
        case 0:
            return np.empty(0)
        case 1:
            return rng.normal(size=1)
        case 2:
            return rng.normal(size=2)
        case 3:
            return rng.normal(size=3)
        case 4:
            return rng.lognormal(0.0, 2.0, small)
        case 5:
            return rng.lognormal(0.0, 2.0, big)
        case 6:  # +-1e300 at both ends
            return np.concatenate([np.full(int(rng.integers(1, C + 3)), -1e300), x, [1e300] * int(rng.integers(1, 4))])
        case 7:  # subnormals
            return rng.normal(size=int(rng.choice([small, big]))) * 5e-324 * rng.integers(1, 1000)
        case 8:  # one far outlier
            return np.concatenate([x, [float(rng.choice([1e300, -1e300, 1e150]))]])
        case 9:  # ties (at the edges of the core, too)
            return np.round(rng.normal(size=int(rng.choice([small, big]))))
        case 10:
            return np.full(int(rng.choice([small, big])), float(rng.normal()))
        case 11:  # huge and tiny together
            return np.concatenate([rng.normal(size=small) * 1e-300, [1e300, -1e-310]])
        case _:
            return rng.standard_t(1.5, big) * 10.0 ** rng.integers(-200, 200)


def _summary(rng: np.random.Generator, C: int, G: int, order: str) -> A.VarSummary:
    lists = [_group(rng, C, int(rng.integers(0, 13))) for _ in range(G)]
    if order == "size":  # decreasing size: var_bounds_of's fast path without a permutation
        lists.sort(key=len, reverse=True)
    elif order == "deep":  # only groups of n <= 2C + 1
        lists = [a[: 2 * C + 1] for a in lists]
    return A.var_summary(Batch.from_lists(lists).sorted(), C)


@pytest.mark.parametrize("C", [1, 2, 3, 7, 30, 60, 100])
@pytest.mark.parametrize("order", ["random", "size", "deep"])
def test_var_bounds_of_is_the_reference_bit_for_bit(C, order):
    rng = np.random.default_rng(1000 * C + len(order))
    for G in (1, 2, 5, 131):
        S = _summary(rng, C, G, order)
        _check(S, C)


@pytest.mark.parametrize("C", [3, 60, 100])
def test_var_bounds_of_many_groups_many_blocks(C):
    """More groups than one block of either loop, mixed sizes, in random order and in size order."""
    rng = np.random.default_rng(7 + C)
    G = 1500 if C > 3 else 20000
    sizes = rng.choice([0, 1, 2, 3, 2 * C + 1, 2 * C + 2, 500, 1200], G, p=[.02, .05, .05, .05, .05, .03, .5, .25])
    values = rng.lognormal(0.0, 1.0, int(sizes.sum()))
    values[rng.random(values.size) < 1e-4] = 1e300
    values[rng.random(values.size) < 1e-4] = 1e-320
    b = Batch(values, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)).sorted()
    S = A.var_summary(b, C)
    _check(S, C)
    o = np.argsort(-S.n, kind="stable")
    S2 = A.VarSummary(S.n[o], S.xm[o], S.lo[:, o], S.hi[:, o], S.s1[o], S.s2[o])
    _check(S2, C)


@pytest.mark.parametrize("C", [10, 100])
def test_var_bounds_of_many_deep_groups(C):
    """Hundreds of groups of n <= 2C + 1 (the deep windows, wide enough for the row-by-row cumsums)."""
    rng = np.random.default_rng(3 + C)
    sizes = rng.integers(1, 2 * C + 2, 700)
    values = np.round(rng.lognormal(0.0, 2.0, int(sizes.sum())), 2)
    values[rng.random(values.size) < 1e-3] = -1e300
    b = Batch(values, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)).sorted()
    _check(A.var_summary(b, C), C)


def test_var_bounds_of_all_empty_and_no_groups():
    for lists in ([None], [None, None], [[1.0]], [[2.0, 1.0]], [[1.0], None]):
        S = A.var_summary(Batch.from_lists(lists).sorted(), 5)
        _check(S, 5)
