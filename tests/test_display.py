"""format_estimate: an answer with its error bar, for people (issue 14)."""

import doctest
import math
import subprocess
import sys

import pytest

import dpsql.display
from dpsql.display import format_estimate, is_estimate

INF = math.inf


def test_docstring_examples() -> None:
    assert doctest.testmod(dpsql.display).failed == 0


@pytest.mark.parametrize(("value", "lo", "hi", "text"), [
    # symmetric within one unit of the last digit: value ± half-width (3 significant digits)
    (12.3456, 10.2123, 14.4789, "12.35 ± 2.13"),
    (12.3456, 10.2113, 14.4789, "12.35 ± 2.13"),
    (0.5, 0.25, 0.75, "0.500 ± 0.250"),
    (1234.5678, 1200.0, 1269.1356, "1234.6 ± 34.6"),
    (1e6, 1e6 - 30, 1e6 + 30, "1000000 ± 30"),
    (-0.0001, -1.5, 1.5, "0.00 ± 1.50"),  # never "-0.00"
    # integer-valued (counts): no decimals
    (328510.0, 328507.0, 328513.0, "328510 ± 3"),
    (2.0, 0.0, 5.0, "2 [0, 5]"),  # floored at 0: not symmetric
    # asymmetric: value [lo, hi] at the same precision
    (12.3456, 10.1, 14.8, "12.35 [10.10, 14.80]"),
    (5.0, 6.0, 7.0, "5 [6, 7]"),  # the value need not lie inside
    (12345678.9, 12300000.0, 12390000.0, "12345700 [12300000, 12390000]"),
    # ends without a finite bound
    (12.3, -INF, INF, "12.3 ± ∞"),
    (-3.6, -INF, 4.9, "-3.60 [−∞, 4.90]"),
    (0.1234, 0.1, INF, "0.1234 [0.1000, ∞]"),
    # degenerate intervals, NULLs
    (5.0, 5.0, 5.0, "5 ± 0"),
    (None, 1.0, 2.0, "NULL"),
    (float("nan"), 1.0, 2.0, "NULL"),
    (3.25, None, 4.0, "3.25"),
    # grid floors and float artefacts below DISPLAY_ZERO (1e-290) read as 0 (issue 14)
    (9.332636185032827e-302, 0.0, 1.2e-301, "0 ± 0"),
    (-2.8e-301, -INF, INF, "0 ± ∞"),
    (0.0, -2.8e-301, 5.0, "0 [0, 5]"),
    # very large and very small magnitudes: scientific, same last digit
    (1.234e20, 1.23e20, 1.24e20, "1.23400e+20 [1.23000e+20, 1.24000e+20]"),
    (1.234e-7, 1.0e-7, 1.4e-7, "1.234e-07 [1.000e-07, 1.400e-07]"),
])
def test_format_estimate(value, lo, hi, text) -> None:
    assert format_estimate(value, lo, hi) == text


def test_ascii() -> None:
    assert format_estimate(12.3, -INF, INF, unicode=False) == "12.3 +- inf"
    assert format_estimate(-3.6, -INF, 4.9, unicode=False) == "-3.60 [-inf, 4.90]"
    assert format_estimate(12.3456, 10.2123, 14.4789, unicode=False) == "12.35 +- 2.13"


def test_is_estimate() -> None:
    assert is_estimate({"value": 1.0, "lo": 0.0, "hi": 2.0})
    assert not is_estimate({"value": 1.0, "lo": 0.0})
    assert not is_estimate({"value": 1.0, "lo": 0.0, "hi": 2.0, "n": 3})
    assert not is_estimate((1.0, 0.0, 2.0)) and not is_estimate(None)


def test_display_imports_no_duckdb() -> None:
    code = "import sys, dpsql.display; sys.exit(1 if 'duckdb' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_shell_box_prints_an_estimate() -> None:
    from dpsql.display import render_box

    rows = [("AA", {"value": 12.3456, "lo": 10.2123, "hi": 14.4789}), ("HA", {"value": -3.4, "lo": -INF, "hi": INF}),
            ("OO", None), ("XX", {"value": 1.0, "lo": 0.0, "hi": 2.0, "n": 3})]
    box = render_box(["carrier", "m"], rows)
    assert "│ 12.35 ± 2.13 " in box and "│ -3.4 ± ∞ " in box
    assert "│ NULL " in box and "'n': 3" in box  # only a struct with exactly value, lo, hi is an estimate
    assert "12.35 +- 2.13" in render_box(["carrier", "m"], rows, unicode=False)


@pytest.mark.parametrize(("value", "text"), [
    (328510.0, "328510"), (-5.000000000931323, "-5"), (12.092345678912345, "12.0923"), (-2.8e-301, "0"),
    (9.332636185032827e-302, "0"), (1.5e-200, "1.5e-200"), (-0.0, "0"), (float("inf"), "inf"), (None, "NULL"),
])
def test_plain_numbers_read_well(value, text) -> None:
    """Issue 14, item 5: integer-valued releases as integers, 6 significant digits, no grid-floor artefacts."""
    from dpsql.display import cell_text

    assert cell_text(value) == text
