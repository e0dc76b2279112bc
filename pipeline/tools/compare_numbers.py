"""How `judgeloop compare` shows a headline number and its change, in a column of fixed width.

A row starts at 4 decimals, or at 4 significant digits where its numbers are all below 0.001 (so
that 0.00001 is not shown as 0), and takes one decimal more while its two numbers and their change
disagree: "=" stands exactly where the two numbers are shown alike, and a change is never one that
the rounding made (4.66666 against 4.66674 would be 4.6667 twice with a change of +0.0001: it is
4.66666, 4.66674, +0.00008). The change is computed exactly (decimal.Decimal of each number, so
a huge integer against a float raises no OverflowError). NaN equals NaN (no change), the same
infinity is no change, and a change to or from NaN has no number (""). A number wider than its
column is written in e-notation with as many digits as fit, never past the column.
"""

from __future__ import annotations

import math
from decimal import Decimal

from pipeline.experiments.design import Number

VALUE, DELTA = 12, 10  # column widths: a value's text is one narrower, so columns never touch
MORE_PLACES = 12  # how many decimals a row may take beyond its first, to agree


def _finite(value: Number) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _places(old: Number, new: Number) -> int:
    sizes = [abs(v) for v in (old, new) if _finite(v) and v != 0]
    if not sizes or max(sizes) >= 1e-3:
        return 4
    return 3 - math.floor(math.log10(max(sizes)))


def _short(value: Decimal, width: int) -> str:
    """`value` in e-notation with as many digits as fit `width` (its mantissa's zeros dropped)."""
    for digits in range(4, -1, -1):
        mantissa, _, exponent = f"{value:.{digits}e}".partition("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}e{exponent}"
        if len(text) <= width:
            return text
    return text


def _plain(value: Decimal, places: int) -> str:
    text = f"{value:.{places}f}".rstrip("0").rstrip(".") if places > 0 else f"{value:.0f}"
    return "0" if text in ("-0", "") else text


def _text(value: Decimal, places: int, width: int) -> str:
    """A finite number at `places` decimals, trailing zeros dropped; in e-notation where that is
    wider than `width` or shows as 0 a number that is not."""
    text = _plain(value, places)
    if (text == "0" and value != 0) or len(text) > width:
        return _short(value, width)
    return text


def _shown(value: Number | None, places: int) -> str:
    if value is None:
        return "—"
    if not _finite(value):
        return str(value)  # nan, inf, -inf
    return _text(Decimal(value), places, VALUE - 1)


def _change_not_finite(old: Number, new: Number) -> str:
    if math.isnan(old) or math.isnan(new):
        return "=" if math.isnan(old) and math.isnan(new) else ""
    if old == new:
        return "="
    return "+inf" if new > old else "-inf"


def _change(old: Number, new: Number, places: int) -> str:
    """new - old at `places` decimals; "=" where that is 0."""
    if not (_finite(old) and _finite(new)):
        return _change_not_finite(old, new)
    change = Decimal(new) - Decimal(old)
    if _plain(change, places) == "0":
        return "="
    return ("+" if change > 0 else "") + _text(change, places, DELTA - 1)


def cells(old: Number | None, new: Number | None) -> tuple[str, str, str]:
    """The two numbers and their change as the table shows them (the module's docstring); no
    change ("") where a run has no such number."""
    if old is None or new is None:
        return _shown(old, 4), _shown(new, 4), ""
    first = _places(old, new)
    for places in range(first, first + MORE_PLACES):
        a, b, change = _shown(old, places), _shown(new, places), _change(old, new, places)
        if (a == b) == (change == "="):
            break
    return a, b, change
