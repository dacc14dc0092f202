"""Scale-free quantiles: one exponential mechanism over the whole float line (no private range step).

Read ``shared/docs/accuracy-study.md`` (recommendation R1) with this file.  Seed 003's quantile finds a
private range first (an SVT over radii around a private median) and then runs the exponential mechanism
on a fine grid inside it; when the range step fails (n eps <~ 300, or data far from 0) the answer is far
off.  Here there is no range step: the exponential mechanism runs over *every* float of the domain with a
scale-free base measure, so it cannot collapse.

* **Codes.**  A value y maps to an integer code: ``|y| >= 2**e`` is coded by its binary exponent above
  ``e`` and its top ``M_BITS`` mantissa bits, ``|y| < 2**e`` linearly onto one octave's worth of codes
  (so 0 is not an attractor), and the sign mirrors the code around the centre.  A uniform measure over
  codes is a log-uniform (scale-free) measure over values above ``2**e``.  The floor ``2**e`` is seed
  003's private IQR lower bound (a power of two).  The map is fixed given the released floor and
  monotone, and the release is a code mapped back (the midpoint of its cell): the output set does not
  depend on the data.  At most ``2 * (1001 + 1074) * 2**36 < 2**48`` codes, within ``rank_em``'s span.
* **Loss.**  ``l(y) = max(0, t - #{x <= y}, #{x < y} - t)`` with ``t = p n`` (the real n, not clamped).
  Add/remove one row: each count moves by 0 or 1, t by p, so l moves by at most ``s = max(p, 1 - p)``
  (1/2 for the median; a clamp of t would bring the sensitivity back to 1 where it binds).
  ``P(y) ~ exp(-eps l(y) / (2 s))`` is eps-DP; :func:`~dpsql.core.primitives.rank_em` samples it exactly.

Cost (pure): quantile ``SPLIT['bound'] + SPLIT['em']`` = eps; IQR: the bound plus two mechanisms at
sensitivity 3/4 each (sequential composition).  Never NULL.  Public bounds clamp the data and the output
(post-processing).  Limit: at n eps ~ 10 nothing pure and bound-free can locate the data on the float line;
the answer is then far off (the README says so).
"""

from __future__ import annotations

import numpy as np

from ..noise import Rng
from .accounting import Privacy
from .batch import Batch
from .primitives import GridCodes, rank_em
from .registry import Method, Params, register
from .universal import _bounded, iqr_lower_bound

__all__ = ["M_BITS", "FloatCodes", "decode", "run_quantile", "run_iqr", "SPLIT"]

M_BITS = 36  # mantissa bits per octave: relative resolution 2**-36 ~ 1.5e-11
E_TOP = 1001  # frexp exponent of 2**1000, the largest value after the data rules
E_MIN = -1074
SPLIT = {"bound": 0.05, "em": 0.95}


def _mag_max(e: np.ndarray) -> np.ndarray:
    return (E_TOP - e) << M_BITS


def _magnitude(ay: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Code magnitude of ``|y|`` (>= 0) given the floor exponent ``e`` (int64): monotone in ``|y|``."""
    big = ay >= np.ldexp(1.0, e)
    m, ex = np.frexp(ay)
    octave = ex.astype(np.int64) - e  # |y| in [2**(ex - 1), 2**ex): octave >= 1 on the big side
    frac = np.floor((2.0 * m - 1.0) * 2.0**M_BITS).astype(np.int64)
    lin = np.floor(np.ldexp(np.where(big, 0.0, ay), M_BITS - e)).astype(np.int64)  # |y| / 2**e * 2**M
    return np.where(big, (octave << M_BITS) + np.maximum(frac, 0), np.minimum(lin, (1 << M_BITS) - 1))


class FloatCodes(GridCodes):
    """Codes of sorted per-group values (see the module docstring), computed only where ``rank_em`` reads."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray, e: np.ndarray) -> None:
        self.values, self.offsets = values, np.asarray(offsets, dtype=np.int64)
        self.e = np.asarray(e, dtype=np.int64)
        self.centre = _mag_max(self.e)
        self.K = 2 * self.centre
        self.size = values.size

    def take(self, idx: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        g = self.group_of(idx, g)
        y = self.values[idx]
        mag = np.minimum(_magnitude(np.abs(y), self.e[g]), self.centre[g])
        return np.where(y < 0, self.centre[g] - mag, self.centre[g] + mag)


def decode(code: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The value released for a code: the midpoint of its cell (0 for the centre cell)."""
    e = np.asarray(e, dtype=np.int64)
    rel = np.asarray(code, dtype=np.int64) - _mag_max(e)
    mag = np.abs(rel)
    octave = mag >> M_BITS
    frac = (mag & ((1 << M_BITS) - 1)).astype(np.float64)
    with np.errstate(over="ignore"):
        lin = np.ldexp((frac + 0.5) * 2.0**-M_BITS, e)
        up = np.ldexp(1.0 + (frac + 0.5) * 2.0**-M_BITS, e + octave - 1)
    val = np.where(octave >= 1, up, np.where(mag == 0, 0.0, lin))
    return np.where(rel < 0, -val, val)


def _floor_exponent(s: Batch, epsilon: float, rng: Rng) -> np.ndarray:
    """``e`` with ``2**e`` = seed 003's private IQR lower bound (eps-DP), clamped to the float range."""
    b = iqr_lower_bound(s, epsilon, rng)
    return np.clip(np.frexp(b)[1].astype(np.int64) - 1, E_MIN, E_TOP - 1)


def _quantile(s: Batch, e: np.ndarray, p: float, epsilon: float, rng: Rng) -> np.ndarray:
    """One exponential mechanism for the p-quantile over the codes: eps-DP at sensitivity max(p, 1 - p)."""
    codes = FloatCodes(s.values, s.offsets, e)
    target = p * s.sizes.astype(np.float64)
    k = rank_em(codes, s.offsets, codes.K, target, 0, epsilon / max(p, 1.0 - p), rng)
    return decode(k, e)


def _clip_out(y: np.ndarray, params: Params) -> np.ndarray:
    lo = -np.inf if params.lower is None else params.lower
    hi = np.inf if params.upper is None else params.upper
    return np.clip(y, lo, hi)


def run_quantile(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_quantile, scale-free: IQR lower bound (0.05 eps) as the code floor, then one exponential
    mechanism over the whole float line (0.95 eps, loss sensitivity max(p, 1 - p)).  Cost eps (pure)."""
    eps = budget.epsilon
    s = _bounded(batch, params).sorted()
    e = _floor_exponent(s, SPLIT["bound"] * eps, rng)
    return _clip_out(_quantile(s, e, float(params.p), SPLIT["em"] * eps, rng), params)


def run_iqr(batch: Batch, budget: Privacy, params: Params, rng: Rng) -> np.ndarray:
    """dp_iqr, scale-free: the floor (0.05 eps), then Q1 and Q3 at 0.475 eps each (sensitivity 3/4).
    Cost eps (pure).  Clamped >= 0."""
    eps = budget.epsilon
    s = _bounded(batch, params).sorted()
    e = _floor_exponent(s, SPLIT["bound"] * eps, rng)
    q1 = _quantile(s, e, 0.25, SPLIT["em"] * eps / 2.0, rng)
    q3 = _quantile(s, e, 0.75, SPLIT["em"] * eps / 2.0, rng)
    return np.maximum(_clip_out(q3, params) - _clip_out(q1, params), 0.0)


_SRC = "accuracy study R1: seed 003's exponential mechanism on scale-free float codes"
register(Method("quantile", "scalefree", "pure", run_quantile, "one EM over float codes, no range step", source=_SRC))
register(Method("iqr", "scalefree", "pure", run_iqr, "two EMs over float codes, no range step", source=_SRC))
