"""How an answer with its error bar reads: ``12.3 ± 2.13`` or ``12.3 [10.1, 14.8]`` (issue 14).

The ``dp_*_ci`` functions return ``STRUCT(value, lo, hi)``; :func:`format_estimate` turns one into text for
people (the shell's boxes, ``dpsql query``, the demo).  The half-width is shown to 3 significant digits and
the value to the same decimal place, so the text never suggests more accuracy than the interval has; plain
numbers show 6 significant digits (integers in full), and magnitudes below ``DISPLAY_ZERO`` (1e-290: grid
floors such as dp_var's 2**-1000 on a constant group) read as 0.  Display only: csv, json and the wire keep
every digit.  No duckdb import (a text helper).

It is the one home for rendering results as text: boxed tables, csv and json (:func:`render_box`,
:func:`render_csv`, :func:`render_json`) and the cost line, used by ``dpsql shell``, ``dpsql query``, the
admin commands and the demo.

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

import csv
import datetime as dt
import io
import json
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

__all__ = ["format_estimate", "is_estimate", "ESTIMATE_KEYS", "cell_text", "render_box", "render_csv", "render_json",
           "arrow_type_name", "cost_line"]

#: the fields of a dp_*_ci result, in order
ESTIMATE_KEYS = ("value", "lo", "hi")
SIGNIFICANT = 3  # digits of the half-width shown
_MAX_FIXED = 1e15  # from this magnitude on, or below 10**-_MAX_DECIMALS, numbers are written like 1.23e+20
_MAX_DECIMALS = 6
#: magnitudes below this read as 0: dpsql's scale-free grids start at 2**-1000 (~9.3e-302), so a release there
#: (dp_var of a constant or empty group: 9.33e-302; a sum of nothing on a fine grid: -2.8e-301) is an artefact
#: of the grid, not a measurement (issue 14); display only
DISPLAY_ZERO = 1e-290


def is_estimate(v: object) -> bool:
    """Whether ``v`` is a dp_*_ci result as Python sees it: a dict with exactly the keys value, lo, hi."""
    return isinstance(v, dict) and len(v) == len(ESTIMATE_KEYS) and set(v) == set(ESTIMATE_KEYS)


def _num(x: Any) -> float | None:
    """``x`` as a float; None for NULL and NaN."""
    if x is None:
        return None
    f = float(x)
    return None if math.isnan(f) else (0.0 if abs(f) < DISPLAY_ZERO else f)


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


_BOX = "┌┬┐├┼┤└┴┘─│"
_ASCII = "+++++++++-|"


def cell_text(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):  # for reading, not for machines (csv and json keep every digit): a DP answer's
        # last digits are noise and float artefacts (issue 14: 328510.0, -5.000000000931323): 6 significant digits
        if v != v or v in (float("inf"), float("-inf")):
            return repr(v)
        if abs(v) < DISPLAY_ZERO:  # a grid floor or float artefact (-2.8e-301), not a measurement
            return "0"
        if 1e6 <= abs(v) < 1e15:
            return f"{v:.0f}"
        text = f"{v:.6g}"
        return "0" if text == "-0" else text
    if isinstance(v, Decimal):
        return format(v.normalize(), "f")
    if isinstance(v, (dt.date, dt.datetime, dt.time)):
        return v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()
    return str(v)


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def render_box(columns: Sequence[str], rows: Sequence[Sequence[Any]], types: Sequence[str] | None = None,
               *, unicode: bool = True, max_rows: int = 40) -> str:
    """A DuckDB-style boxed table (names, optional types, right-aligned numbers, row count if cut)."""
    ch = _BOX if unicode else _ASCII
    tl, tm, tr, ml, mm, mr, bl, bm, br, h, v = ch
    shown = list(rows)
    cut = len(shown) > max_rows
    if cut:  # the first ceil(N/2) and the last floor(N/2) rows: exactly max_rows shown
        head, tail = (max_rows + 1) // 2, max_rows // 2
        shown = shown[:head] + [None] + shown[len(shown) - tail:]  # type: ignore[list-item]
    header = [str(c) for c in columns]
    tline = [str(x).lower() for x in types] if types else None
    body = [None if r is None else [format_estimate(*(x[k] for k in ESTIMATE_KEYS), unicode=unicode)  # 12.3 ± 2.1
                                    if is_estimate(x) else cell_text(x) for x in r] for r in shown]
    widths = [max([len(header[i])] + ([len(tline[i])] if tline else []) +
                  [len(r[i]) for r in body if r is not None] + [1]) for i in range(len(header))]
    numeric = [any(_numeric(r[i]) for r in rows[:50]) for i in range(len(header))]

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join(h * (w + 2) for w in widths) + right

    def row(cells: Sequence[str], align: Sequence[bool] | None = None) -> str:
        parts = []
        for i, c in enumerate(cells):
            if align is None:
                parts.append(" " + c.center(widths[i]) + " ")
            else:
                parts.append(" " + (c.rjust(widths[i]) if align[i] else c.ljust(widths[i])) + " ")
        return v + v.join(parts) + v

    if not header:
        return "(no columns)"
    out = [line(tl, tm, tr), row(header)]
    if tline:
        out.append(row(tline))
    out.append(line(ml, mm, mr))
    for r in body:
        out.append(row(["·" if unicode else "."] * len(header)) if r is None else row(r, numeric))
    out.append(line(bl, bm, br))
    if cut or len(rows) != 1:
        out.append(f"{len(rows)} rows" + (f" ({max_rows} shown)" if cut else ""))
    return "\n".join(out)


def arrow_type_name(t: Any) -> str:
    """DuckDB's name for an Arrow result type, for the type line of a boxed table."""
    name = str(t)
    if name == "struct<value: double, lo: double, hi: double>":
        return "estimate [lo, hi]"  # a dp_*_ci release, printed through format_estimate
    return {"string": "varchar", "large_string": "varchar", "bool": "boolean", "date32[day]": "date",
            "binary": "blob"}.get(name, name.replace("[us]", "").replace("decimal128", "decimal"))


def render_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if x is None else cell_text(x) for x in r])
    return buf.getvalue().rstrip("\n")


def render_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def conv(x: Any) -> Any:
        if isinstance(x, Decimal):
            return float(x)
        if isinstance(x, (dt.date, dt.datetime, dt.time)):
            return x.isoformat()
        return x

    return json.dumps([{c: conv(x) for c, x in zip(columns, r, strict=True)} for r in rows], default=str)


def cost_line(charged: Any, remaining: Any, accounting: str, *, unicode: bool = True,
              replayed_from: int | None = None) -> str:
    """``ε charged 0.5 · remaining 4.5`` (ρ for zCDP budgets); a replay of the stored release of charge
    #12 reads ``replayed release #12 · ε charged 0 · remaining 4.5``."""
    unit = ("ρ" if unicode else "rho") if str(accounting).lower() == "zcdp" else ("ε" if unicode else "epsilon")
    dot = "·" if unicode else "-"
    replay = "" if replayed_from is None else f"replayed release #{replayed_from} {dot} "
    return f"{replay}{unit} charged {cell_text(charged)} {dot} remaining {cell_text(remaining)}"
