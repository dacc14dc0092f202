"""dp_var's summary route, core side (issue 17): ``var_bounds`` split into ``var_summary`` (what it reads of the
rows) and ``var_bounds_of`` (the bounds from the summary) must give the bounds of the code before the split bit for
bit, and :func:`dpsql.core.summary_var.variance` must release run_var's values draw for draw, whatever the hybrid
split.  ``_ref_var_bounds`` and ``_ref_deep_windows`` are verbatim copies of the code before the split (renamed,
the unchanged helpers taken from the module); do not edit them.
"""

import numpy as np
import pytest

from dpsql.core import asymmetric as A
from dpsql.core import summary_var as SV
from dpsql.core.accounting import pure
from dpsql.core.batch import Batch
from dpsql.core.primitives import WIDE, pow2_floor
from dpsql.core.registry import Params
from dpsql.noise import Rng

# --------------------------------------------------------------------------- frozen reference (before the split)


def _ref_var_bounds(s: Batch, C: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log f, log Lbar)`` for the population variance under add/remove: ``Lbar`` is ``[G, C]``.

    ``f = (1/n) sum (x - mean)**2`` (0 for n <= 1, and for the empty set).  For ``l < h = min(C + 1, n - 1)``:
    ``Lbar^l = L^l = min_{k <= l} W_k / (n + l - 2k)`` (exact infimum over the add/remove ball: removing k
    rows leaves at best a window of n - k sorted values, and adding ``l - k`` rows at its mean divides its
    SSD by the new size); ``Lbar^l = 0`` for ``l >= h`` (exact for ``l >= n - 1``: one row is left).  As
    ``|h(x) - h(x')| <= 1``, Def. A.1 holds.  Window sums never subtract: for ``k < n/2`` every window holds
    the median, and sums accumulate outward from it; the deeper windows (only when n <= 2C + 1) accumulate
    rightward from their own first row.  Either way the anchor lies in the window, so the relative rounding
    error is at most ~(window size) * 2**-53 even with huge outliers.  Work: O(n + C^2) per group, plus
    O(n C) for groups of n <= 2C + 1.

    Cost: two passes over the rows (the scaled deviations ``d`` and their squares) and one segmented sum
    (``np.add.reduceat``, pairwise) for the core of every group; the O(C^2) window and bound minima run
    over contiguous column slices, on only the groups deep enough for each k / l (groups ordered by size).
    """
    G = s.groups
    n = s.sizes
    off = s.offsets
    has = n > 0
    v = s.values
    last = max(v.size - 1, 0)
    if v.size == 0:
        return np.full(G, -np.inf), np.full((G, C), -np.inf)
    xm = np.where(has, v[np.minimum(off[:-1] + n // 2, last)], 0.0)
    first = np.where(has, v[np.minimum(off[:-1], last)], 0.0)
    lastv = np.where(has, v[np.maximum(off[1:] - 1, 0)], 0.0)
    spread = np.maximum(xm - first, lastv - xm)
    sc = np.where(spread > 0, pow2_floor(np.maximum(spread, 2.0**-1000)), 1.0)
    kg = np.clip((n + 1) // 2 - 1, 0, C)  # windows for k <= kg contain the median position
    # The core rows [kg, n - kg) (in every window) are summed in float64 at the core's own scale: their
    # squares cannot underflow next to a huge edge row, and the O(n) pass stays fast; the sums are then
    # moved to the group's scale in WIDE (a power-of-two ratio, exact), where the edge rows join them.
    clo, chi = off[:-1] + kg, off[1:] - kg
    inner = chi > clo
    cspread = np.maximum(xm - np.where(inner, v[np.minimum(clo, last)], xm),
                         np.where(inner, v[np.maximum(chi - 1, 0)], xm) - xm)
    sc_c = np.where(cspread > 0, pow2_floor(np.maximum(cspread, 2.0**-1000)), 1.0)
    _, s1c, s2c = A._deviations(v, off, xm, sc_c, clo, chi)
    to_group = sc_c.astype(WIDE) / sc.astype(WIDE)
    s1c = s1c.astype(WIDE) * to_group
    s2c = s2c.astype(WIDE) * to_group * to_group
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

    kgp, kfp, nfp = perm(kg), perm(kf), perm(nf)
    # Work arrays are [depth, group] (groups contiguous, in size order), processed in blocks of B groups
    # that stay in cache.  Edges: lo[j] = d[start + j], hi[j] = d[end - 1 - j] for j < kg (0 past kg).
    B = max(512, 65536 // (max(cw, cwf) + 1))
    jj = np.arange(cw)[:, None]
    ok = jj < kgp[None, :]
    xmp, invp = perm(xm)[None, :], perm((1.0 / sc).astype(WIDE))[None, :]  # 1/sc: exact, a power of two
    lo = np.where(ok, (v[np.clip(perm(off[:-1])[None, :] + jj, 0, last)] - xmp).astype(WIDE) * invp, 0.0)
    hi = np.where(ok, (v[np.clip(perm(off[1:])[None, :] - 1 - jj, 0, last)] - xmp).astype(WIDE) * invp, 0.0)
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
    _ref_deep_windows(v, sc, off, n, kg, kf, W)
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


def _ref_deep_windows(
    v: np.ndarray, sc: np.ndarray, off: np.ndarray, n: np.ndarray, kg: np.ndarray, kf: np.ndarray, W: np.ndarray
) -> None:
    """Fill ``W[g, k]`` for ``kg[g] < k <= kf[g]`` (windows of n - k sorted values that may miss the median).

    Loop over the window start a: sums of ``(x_j - x_a) / sc`` and their squares accumulate rightward from
    a, so the window ``[a, a + n - k)`` of every k >= a is read off one cumsum.  The differences are taken
    from the values themselves (not from deviations from the median, which round away rows that are close
    to each other but far from the median), then squared in WIDE precision.  Only groups of n <= 2C + 1
    take part.  Work O(n) per (group, a).
    """
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
    X = np.where(inside, v[np.clip(off[sel][None, :] + jj, 0, v.size - 1)], 0.0)
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


def _lists(rng: np.random.Generator, C: int) -> list:
    """Varied groups: empty, 1, 2, 2C+1, 2C+2 rows, ties, +-1e300 outliers, huge and tiny scales, one large group."""
    n = rng.normal
    return [
        None, [3.0], [1.0, 2.0], [-1e300, 1e300], [-1e300, 0.0, 1e300], [0.0] * 7, [5.0] * 2,
        n(size=2 * C + 1), n(size=2 * C + 2), n(size=2 * C), n(size=2 * C + 3),
        np.concatenate([n(size=50), [1e300]]), np.concatenate([[-1e300], n(size=3 * C)]),
        np.round(n(size=4 * C + 7)), np.repeat([1.0, 2.0, 3.0], 2 * C),  # ties at the edges of the core
        np.concatenate([np.full(C + 3, -1e300), n(size=10), np.full(C + 2, 1e300)]),
        n(size=500) * 1e-300, rng.lognormal(0.0, 3.0, 20000), np.full(3 * C, 7.0),
        np.concatenate([np.full(C, 2.0), [2.0, 3.0], np.full(C, 3.0)]),
    ]


@pytest.mark.parametrize("C", [1, 2, 3, 10, 100, 1000])
def test_var_bounds_equal_the_code_before_the_split(C):
    rng = np.random.default_rng(C)
    lists = _lists(rng, C)
    s = Batch.from_lists(lists).sorted()
    f, L = A.var_bounds(s, C)
    rf, rL = _ref_var_bounds(s, C)
    np.testing.assert_array_equal(f, rf)
    np.testing.assert_array_equal(L, rL)
    # the summary of any subset of the groups gives the same bounds (a group's summary is its own)
    for g in range(len(lists)):
        S = A.var_summary(Batch.from_lists([lists[g]]).sorted(), C)
        f1, L1 = A.var_bounds_of(S, C)
        np.testing.assert_array_equal(f1, rf[g : g + 1])
        np.testing.assert_array_equal(L1, rL[g : g + 1])
    for lists in ([None], [None, None], [[1.0]], [[2.0, 1.0]]):
        s = Batch.from_lists(lists).sorted()
        for a, b in zip(A.var_bounds(s, C), _ref_var_bounds(s, C), strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(6))
def test_var_bounds_random_panels(seed):
    rng = np.random.default_rng(100 + seed)
    C = int(rng.choice([3, 25, 100, 300]))
    sizes = rng.integers(0, 4 * C + 10, 40)
    values = rng.standard_t(2.0, int(sizes.sum())) * 10.0 ** rng.integers(-5, 5)
    values[rng.random(values.size) < 0.01] = 1e300
    values = np.round(values, int(rng.integers(0, 3)))  # ties
    s = Batch(values, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)).sorted()
    for a, b in zip(A.var_bounds(s, C), _ref_var_bounds(s, C), strict=True):
        np.testing.assert_array_equal(a, b)


def test_summary_holds_the_edges_and_the_median():
    C = 4
    x = np.arange(20.0)
    S = A.var_summary(Batch.from_lists([x, x[:5], None]).sorted(), C)
    assert S.n.tolist() == [20, 5, 0]
    assert S.xm.tolist() == [10.0, 2.0, 0.0]
    np.testing.assert_array_equal(S.lo[:, 0], [0, 1, 2, 3, 4])  # kg = 4: the edges and the core's first row
    np.testing.assert_array_equal(S.hi[:, 0], [19, 18, 17, 16, 15])
    np.testing.assert_array_equal(S.lo[:3, 1], [0, 1, 2])  # kg = 2: every row from lo[:3] and hi[:2]
    np.testing.assert_array_equal(S.hi[:2, 1], [4, 3])
    core = (x[4:16] - 10.0) / 4.0  # sc_c = pow2_floor(6)
    assert S.s1[0] == np.add.reduce(core) and S.s2[0] == np.add.reduce(core * core)


def _groups(seed: int, big: int = 3000) -> Batch:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, big, 25)
    sizes[:6] = [0, 1, 2, 201, 202, 5]
    values = rng.lognormal(0.0, 1.5, int(sizes.sum()))
    values[rng.random(values.size) < 0.002] = -1e300
    values[:40] = 3.0
    return Batch(values, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("eps", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("small", [0.0, 150.0, 1500.0, np.inf])
def test_variance_is_run_var_draw_for_draw(seed, eps, small):
    b = _groups(seed)
    want = A.run_var(b, pure(eps), Params(), Rng.seeded(seed))
    got = SV.variance(SV.VarBatchSource(b), eps, Rng.seeded(seed), small=small)
    np.testing.assert_array_equal(got, want)
    r = Rng.seeded(seed)
    n_hat = SV.released_count(SV.VarBatchSource(b), eps, r)
    np.testing.assert_array_equal(SV.variance(SV.VarBatchSource(b), eps, r, n_hat=n_hat, small=small), want)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_in_chunks_on_threads_are_the_same_bounds(threads, monkeypatch):
    """The rows route's bounds in chunks of consecutive groups (cut on released counts) on several threads: the
    same arrays bit for bit, and the same releases."""
    monkeypatch.setattr(SV, "ROWS_CHUNK", 3000.0)
    monkeypatch.setattr(SV, "THREADS", threads)
    b = _groups(11, big=6000)
    s = b.sorted()
    n_hat = s.sizes.astype(float) + 0.5
    for C in (10, 100):
        got = SV._rows_bounds(s, n_hat, C)
        for a, w in zip(got, A.var_bounds(s, C), strict=True):
            np.testing.assert_array_equal(a, w)
    want = A.run_var(b, pure(1.0), Params(), Rng.seeded(3))
    np.testing.assert_array_equal(SV.variance(SV.VarBatchSource(b), 1.0, Rng.seeded(3), small=np.inf), want)


@pytest.mark.parametrize("cells", [1, 50, 10**6])
def test_summary_bounds_in_chunks_are_the_same(cells, monkeypatch):
    """The summary route's bounds in chunks of consecutive groups on threads: bit for bit var_bounds_of whole."""
    monkeypatch.setattr(SV, "SUMMARY_CELLS", cells)
    monkeypatch.setattr(SV, "THREADS", 2)
    s = _groups(12).sorted()
    for C in (3, 100):
        S = A.var_summary(s, C)
        for a, w in zip(SV._summary_bounds(S, C), A.var_bounds_of(S, C), strict=True):
            np.testing.assert_array_equal(a, w)


def test_truncation_of_is_run_vars():
    for eps in (1e-3, 0.1, 1.0, 10.0):
        assert SV.truncation_of(eps) == A.truncation(eps * A.SPLIT_VAR["asm"] / (A.RATIO + 2.0))
