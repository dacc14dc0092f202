"""dp_var's default (issue 12): the asymmetric sensitivity mechanism where the released count is small, moments
where it is large.

Why two routes.  The asymmetric sensitivity mechanism (:mod:`~dpsql.core.asymmetric`, seed 002) stops a few
``Lbar`` levels below the variance: about ``ln(#candidates per band) / eps2`` removals of the largest rows,
whatever n.  That bias does not shrink with the data, so at large ``n eps`` the mechanism trails a clipped
estimator: 5-10x the best exact-bounded peer on the panel's n eps = 10**5 cells, where the noise of a clipped
second moment is a few 1e-4 of the variance.  Composed from the scale-free mechanisms (their ranges adapt to the
data: no bounds), moments cut those errors x0.51 (geomean; worst x1.49, a bimodal mixture) at n eps = 4e4 and
x0.42 (worst x0.87) at 10**5 over 11 datasets; below they still win in geomean (x0.77 at 10**4) but lose cells where the
asymmetric mechanism's bias is small: distance x1.6-1.7 and a bimodal mixture x1.3-1.4 at 10**4, the mixture
x2-7.7 at 3,000.  Measured: ``benchmarks/var_moments.py`` (``results/var_moments.md``; the cells below 3e4 with
the prototype through SQL, 15 runs a cell).

The route (:func:`run_var`), per group, decided by a released count (post-processing, as every class):

1. a noisy count at ``SPLIT['count'] eps`` (the asymmetric mechanism's own first draw: its grid ratio);
2. ``n_hat eps < VAR_TOP``: the asymmetric mechanism at the rest (``asymmetric._var`` minus its count: the
   same draws, so below VAR_TOP the release is ``asymmetric``'s);
3. ``n_hat eps >= VAR_TOP``: :func:`moments` at the rest: ``c`` = the scale-free mean of x, then ``var`` = the
   scale-free mean of ``min((x - c)**2, DOMAIN)``, clipped to ``[0, DOMAIN]``.  It estimates
   ``var + (mean - c)**2``: a bias of the mean's squared error, ~1e-4 of the variance or less at this n eps.
   (A median centre with ``var = m2 - (m1 - c)**2`` was measured x1.2-2 worse: the cross term's noise and the
   wider range of the squares; ``benchmarks/var_moments.py``.)

Cost eps per group (pure).  Proof sketch (add/remove): the count is eps_count-DP; routing is post-processing of
it; the ASM is its own proof (:mod:`~dpsql.core.asymmetric`); on the top route c is eps_1-DP
(:func:`~dpsql.core.scalefree.run_mean`, with its own count), then ``x -> min((x - c)**2, DOMAIN)`` is a fixed
per-row map given the released c, so neighbouring groups map to neighbouring groups (one row added or removed)
and the mean of the squares is eps_2-DP (run_mean again); sequential composition gives ``eps_count + eps_1 +
eps_2 = eps``, and the clip is post-processing.  Each component keeps its own float-safety argument (rows within
DOMAIN, ``(x - c)**2`` clamped to DOMAIN where it overflows).  NULL components (a released count below a
component's NULL rule, unreachable in practice at ``n_hat eps >= VAR_TOP``) are replaced by public defaults
(c -> 0, the release -> 0): post-processing.  dp_var stays never NULL.

The summary route (:func:`dpsql.plans._variance`) runs the same steps on its sources through the same
:func:`moments` (the means are the summary route's draw for draw).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .asymmetric import SPLIT_VAR, asm_var, interval_var
from .batch import DOMAIN, Batch, take_groups
from .helpers import bounded
from .primitives import need_wide, noisy_count
from .registry import Method, Params
from .scalefree import run_mean

__all__ = ["SPLIT", "VAR_TOP", "classes", "combine", "moments", "run_var", "squares"]

#: the top route's split of eps (the count is the asymmetric mechanism's, SPLIT_VAR['count']): the mean 0.10 (its
#: error enters squared), the squares the rest (0.20 / 0.75 measured x1.1 worse in geomean; benchmarks/var_moments.py)
SPLIT = {"count": SPLIT_VAR["count"], "mean": 0.10, "squares": 0.85}
#: the top route from this released ``n_hat eps`` (results/var_moments.md: every cell better from 10**5, mixed at
#: 10**4)
VAR_TOP = 30_000.0


def classes(n_hat: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(asymmetric groups, moments groups) from the released count: post-processing."""
    top = np.asarray(n_hat, dtype=np.float64) * epsilon >= VAR_TOP
    return np.flatnonzero(~top), np.flatnonzero(top)


def squares(s: Batch, c: np.ndarray) -> Batch:
    """``min((x - c_g)**2, DOMAIN)`` per row (a fixed per-row map given the released c; the order of rows kept)."""
    d = s.values - np.repeat(np.asarray(c, dtype=np.float64), s.sizes)
    with np.errstate(over="ignore"):
        return Batch(np.minimum(d * d, DOMAIN), s.offsets)


def combine(m2: np.ndarray) -> np.ndarray:
    """The release from the mean of the squares: clipped to ``[0, DOMAIN]``, NULL -> 0 (post-processing)."""
    return np.clip(np.nan_to_num(np.asarray(m2, dtype=np.float64), nan=0.0), 0.0, DOMAIN)


def moments(mean: Callable[[float], np.ndarray], mean_of_squares: Callable[[np.ndarray, float], np.ndarray],
            epsilon: float) -> np.ndarray:
    """The top route on some groups, from two releases in this order (the draws' order): ``c = mean(eps_1)``, then
    ``mean_of_squares(c, eps_2)`` (the scale-free mean of :func:`squares`); the list and the summary route pass
    their own."""
    c = mean(SPLIT["mean"] * epsilon)
    c = np.where(np.isnan(c), 0.0, c)
    return combine(mean_of_squares(c, SPLIT["squares"] * epsilon))


def run_var(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_var, the default: the asymmetric sensitivity mechanism below ``n_hat eps = VAR_TOP``, moments of the
    scale-free mechanisms above (module docstring: routes, cost eps, proof sketch).  With ``lower`` and ``upper``
    the data are clamped and the release capped at ``((upper - lower) / 2)**2`` (post-processing); never NULL."""
    need_wide("dp_var")
    eps = budget.epsilon
    s = bounded(batch, params).sorted()
    n_hat = noisy_count(s, SPLIT["count"] * eps, rng)
    low, top = classes(n_hat, eps)
    out = np.zeros(s.groups)
    if low.size:
        out[low] = asm_var(take_groups(s, low), n_hat[low], SPLIT_VAR["asm"] * eps, params, rng)
    if top.size:
        sub = take_groups(s, top)
        none = Params()
        out[top] = moments(lambda e: run_mean(sub, Privacy("pure", e), none, rng),
                           lambda c, e: run_mean(squares(sub, c), Privacy("pure", e), none, rng), eps)
        if params.lower is not None and params.upper is not None:
            with np.errstate(over="ignore"):
                out[top] = np.minimum(out[top], np.square(np.float64(params.upper / 2.0 - params.lower / 2.0)))
    return out


METHODS = (
    Method("var", "scalefree", "pure", run_var, "asymmetric mechanism below n eps = 30,000, scale-free moments above",
           source="seed 002 + accuracy study R2", interval=interval_var),
)
