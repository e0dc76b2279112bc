"""Numbers the outputs store from floating-point work, the same bytes on every Python and numpy.

A replay must rewrite every output byte for byte on any supported Python (3.11 to 3.13) with any
numpy. Two things would break that: the library's arithmetic (Python 3.12's built-in sum() of floats
is compensated, 3.11's is not; numpy's vectorised exp, log and sums differ in the last bit between
releases and between the CPU kernels they dispatch to) and the printing of a value computed a hair
differently. So what an output holds is

- computed with the standard library in a fixed order: math.exp, math.log, `fsum` (correctly
  rounded: the same float whatever the order or the Python) rather than sum() or numpy's reductions;
- and written at a stated precision, `stated()`: rounded to SIGNIFICANT significant digits
  (CPython's correctly rounded decimal conversion), so a last-bit difference in a C library's exp or
  a statistics routine changes no byte unless it falls on a rounding boundary, 1 time in about 10**4.

Statistics from numpy/scipy (correlations, alpha, bootstrap intervals) are passed through `stated()`
where they are written (pipeline.stats); their arithmetic is the library's, their bytes are not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["SIGNIFICANT", "fsum", "stated"]

SIGNIFICANT = 12  # digits kept of a derived float: far above any estimate's precision here


def stated(value: float, digits: int = SIGNIFICANT) -> float:
    """`value` rounded to `digits` significant digits (a non-finite value is returned as it is)."""
    number = float(value)
    if not math.isfinite(number) or number == 0.0:
        return number + 0.0  # -0.0 -> 0.0: one way to write zero
    return float(f"{number:.{digits}g}")


def fsum(values: Iterable[float]) -> float:
    """The correctly rounded sum (math.fsum): the same on every Python, whatever the order."""
    return math.fsum(values)
