"""How `judgeloop compare` shows a headline number and its change, in a column of fixed width.

A row starts at 4 decimals, or at 4 significant digits where its numbers are all below 0.001 (so
that 0.00001 is not shown as 0), and takes one decimal more while its two numbers and their change
disagree: "=" stands exactly where the two numbers are shown alike, and a change is never one that
the rounding made (4.66666 against 4.66674 would be 4.6667 twice with a change of +0.0001: it is
4.66666, 4.66674, +0.00008). The change is computed exactly (decimal.Decimal of each number, so
a huge integer against a float raises no OverflowError). NaN equals NaN (no change), the same
infinity is no change, and a change to or from NaN has no number (""). A number wider than its
column is written in e-notation, its digits growing with the row's decimals as far as the column
allows (two numbers that differ only past what 11 columns can show keep their true change beside
them). A change's text, its sign included, is one narrower than its column, so that it never
touches the number before it.
"""

from __future__ import annotations

import math
from decimal import Decimal

from pipeline.experiments.design import Number

VALUE, DELTA = 12, 10  # column widths: a value's text is one narrower, so columns never touch
MORE_PLACES = 12  # how many decimals a row may take beyond its first, to agree


def _finite(value: Number) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _nan(value: Number) -> bool:
    """Whether `value` is NaN: never for an int (math.isnan of one past 1e308 raises OverflowError)."""
    return isinstance(value, float) and math.isnan(value)


def _places(old: Number, new: Number) -> int:
    sizes = [abs(v) for v in (old, new) if _finite(v) and v != 0]
    if not sizes or max(sizes) >= 1e-3:
        return 4
    return 3 - math.floor(math.log10(max(sizes)))


def _short(value: Decimal, width: int, most: int = 4) -> str:
    """`value` in e-notation with at most `most` decimals of its mantissa, as many as fit `width`
    (its mantissa's zeros dropped)."""
    text = ""
    for digits in range(most, -1, -1):
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


def _text(value: Decimal, places: int, width: int, more: int = 0) -> str:
    """A finite number at `places` decimals, trailing zeros dropped; at as many of them as fit
    `width` where it is 1 or more (100000.6407 rather than 1.00001e+5); else, and where even its
    whole part is wider or it shows as 0 a number that is not, in e-notation (4 + `more` digits)."""
    text = _plain(value, places)
    while len(text) > width and places > 0 and abs(value) >= 1:
        places -= 1
        text = _plain(value, places)
    if (text == "0" and value != 0) or len(text) > width:
        return _short(value, width, 4 + more)
    return text


def _shown(value: Number | None, places: int, more: int = 0) -> str:
    if value is None:
        return "—"
    if not _finite(value):
        return str(value)  # nan, inf, -inf
    return _text(Decimal(value), places, VALUE - 1, more)


def _change_not_finite(old: Number, new: Number) -> str:
    if _nan(old) or _nan(new):
        return "=" if _nan(old) and _nan(new) else ""
    if old == new:
        return "="
    return "+inf" if new > old else "-inf"


def _change(old: Number, new: Number, places: int) -> str:
    """new - old at `places` decimals, its sign included in DELTA - 1 columns; "=" where that is 0."""
    if not (_finite(old) and _finite(new)):
        return _change_not_finite(old, new)
    change = Decimal(new) - Decimal(old)
    if _plain(change, places) == "0":
        return "="
    if change < 0:
        return _text(change, places, DELTA - 1)
    return "+" + _text(change, places, DELTA - 2)


def cells(old: Number | None, new: Number | None) -> tuple[str, str, str]:
    """The two numbers and their change as the table shows them (the module's docstring); no
    change ("") where a run has no such number."""
    if old is None or new is None:
        return _shown(old, 4), _shown(new, 4), ""
    first = _places(old, new)
    for more in range(MORE_PLACES):
        places = first + more
        a, b, change = _shown(old, places, more), _shown(new, places, more), _change(old, new, places)
        if (a == b) == (change == "="):
            break
    return a, b, change
