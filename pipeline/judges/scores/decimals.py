"""What a decimal on an integer scale becomes: the experiment's policy, kept apart from the reading.

The extractor reports what the reply says: "Score: 3.5/5" on a 1-5 integer scale is read as
``non_integer`` with ``stated=3.5`` and no score. The policy, a parameter of every design that reads
scores from text (the paper's judge: ``judge.decimal_scores``), decides what is recorded:

    unscored   no score (the default, and what was recorded before the policy existed)
    round      the nearest integer, halves up (3.5 -> 4), flagged ``decimal_rounded``
    keep       the value as written (3.5), flagged ``decimal_kept``

Either way the reason says so, and the aggregate counts it. The range is checked before the policy
applies (a 5.5 on 1-5 is ``out_of_range``, never rounded or clamped to 5), so a policy can only act
on a value inside the scale, and rounding an in-range value to the nearest integer stays inside an
integral scale.
"""

from __future__ import annotations

import math
from typing import Final, Literal, get_args

from pipeline.judges.scores.reading import ScoreReading

DecimalPolicy = Literal["unscored", "round", "keep"]
DECIMAL_POLICIES: Final[tuple[str, ...]] = get_args(DecimalPolicy)


def check_policy(decimals: str) -> DecimalPolicy:
    if decimals not in DECIMAL_POLICIES:
        raise ValueError(f"decimals must be one of {', '.join(DECIMAL_POLICIES)}, got {decimals!r}")
    return decimals  # type: ignore[return-value]  # checked just above


def apply_decimal_policy(reading: ScoreReading, decimals: DecimalPolicy) -> ScoreReading:
    """The reading as the policy records it: only a ``non_integer`` reading changes."""
    check_policy(decimals)
    if reading.reason != "non_integer" or reading.stated is None or decimals == "unscored":
        return reading
    if decimals == "round":
        # Halves up (3.5 -> 4), not Python's round-half-even.
        rounded = math.floor(reading.stated + 0.5)
        return ScoreReading(rounded, "decimal_rounded", reading.matched, reading.stated)
    return ScoreReading(reading.stated, "decimal_kept", reading.matched, reading.stated)
