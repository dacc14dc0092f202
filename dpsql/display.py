"""How an answer with its error bar reads: ``12.3 ± 2.13`` or ``12.3 [10.1, 14.8]`` (issue 14).

The ``dp_*_ci`` functions return ``STRUCT(value, lo, hi)``; :func:`format_estimate` turns one into text for
people (the shell's boxes, ``dpsql query``, the demo).  The half-width is shown to 3 significant digits and
the value to the same decimal place, so the text never suggests more accuracy than the interval has.  Display
only: csv, json and the wire keep every digit.  No duckdb import (a text helper).

>>> format_estimate(12.3456, 10.2123, 14.4789)
'12.35 ± 2.13'
>>> format_estimate(12.3456, 10.1, 14.8)
'12.35 [10.10, 14.80]'
>>> format_estimate(2.0, 0.0, 5.0)
'2 [0, 5]'
>>> format_estimate(328510.0, 328507.0, 328513.0)
'328510 ± 3'
>>> format_estimate(12.3, float("-inf"), float("inf"))
'12.3 ± ∞'
>>> format_estimate(-3.6, float("-inf"), 4.9)
'-3.60 [−∞, 4.90]'
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["format_estimate", "is_estimate", "ESTIMATE_KEYS"]

#: the fields of a dp_*_ci result, in order
ESTIMATE_KEYS = ("value", "lo", "hi")
SIGNIFICANT = 3  # digits of the half-width shown
_MAX_FIXED = 1e15  # from this magnitude on, or below 10**-_MAX_DECIMALS, numbers are written like 1.23e+20
_MAX_DECIMALS = 6


def is_estimate(v: object) -> bool:
    """Whether ``v`` is a dp_*_ci result as Python sees it: a dict with exactly the keys value, lo, hi."""
    return isinstance(v, dict) and len(v) == len(ESTIMATE_KEYS) and set(v) == set(ESTIMATE_KEYS)


def _num(x: Any) -> float | None:
    """``x`` as a float; None for NULL and NaN."""
    if x is None:
        return None
    f = float(x)
    return None if math.isnan(f) else f


def _decimals(width: float) -> int:
    """Decimal places that show ``width`` (> 0, finite) to SIGNIFICANT digits (negative: round to tens...)."""
    return SIGNIFICANT - 1 - math.floor(math.log10(width))


def _fixed(x: float, decimals: int, integral: bool) -> str:
    """``x`` rounded at 10**-decimals (integer-valued answers: never below the units); very large or very
    small magnitudes in scientific notation with the same last digit."""
    if integral:
        decimals = min(decimals, 0)
    if abs(x) >= _MAX_FIXED or decimals > _MAX_DECIMALS:
        digits = max(math.floor(math.log10(abs(x))) + decimals + 1, 1) if x else 1
        return f"{x:.{digits - 1}e}"
    text = f"{round(x, decimals):.{max(decimals, 0)}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0"


def _short(x: float) -> str:
    text = f"{x:.{SIGNIFICANT}g}"
    return "0" if text == "-0" else text


def format_estimate(value: Any, lo: Any, hi: Any, *, unicode: bool = True) -> str:
    """``value ± half-width`` when the interval is symmetric around the value (within one unit of the last
    digit shown), else ``value [lo, hi]``; ``∞`` / ``−∞`` for an end without a finite bound.  NULL ends show
    the value alone; a NULL value is ``NULL``.  ``unicode=False`` writes ``+-`` and ``inf``."""
    pm, inf = ("±", "∞") if unicode else ("+-", "inf")
    neg_inf = ("−" if unicode else "-") + inf
    v, a, b = _num(value), _num(lo), _num(hi)
    if v is None:
        return "NULL"
    if not math.isfinite(v) or a is None or b is None:
        return _short(v)
    if a == -math.inf and b == math.inf:
        return f"{_short(v)} {pm} {inf}"
    finite = [abs(e - v) for e in (a, b) if math.isfinite(e)]
    spread = (b - a) / 2.0 if len(finite) == 2 else max(finite, default=0.0)
    if not (0 < spread < math.inf):  # a point interval (exact), or ends on one side at infinity
        ends = [_short(e) if math.isfinite(e) else (inf if e > 0 else neg_inf) for e in (a, b)]
        return f"{_short(v)} {pm} 0" if a == v == b else f"{_short(v)} [{ends[0]}, {ends[1]}]"
    integral = all(float(x).is_integer() for x in (v, a, b) if math.isfinite(x))
    d = _decimals(spread)
    unit = 10.0 ** -(min(d, 0) if integral else d)
    if len(finite) == 2 and a <= v <= b and abs((v - a) - (b - v)) < unit:
        return f"{_fixed(v, d, integral)} {pm} {_fixed(spread, d, integral)}"
    ends = [_fixed(e, d, integral) if math.isfinite(e) else (inf if e > 0 else neg_inf) for e in (a, b)]
    return f"{_fixed(v, d, integral)} [{ends[0]}, {ends[1]}]"
