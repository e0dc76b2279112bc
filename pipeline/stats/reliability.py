"""Krippendorff's alpha over units rated by any number of coders, as the krippendorff package
wants them: a coders x units table, NaN where a unit has no value from that coder. Used for the
agreement of people with each other and with a judge (here, at the ordinal level: its rank-based
distance over the values observed) and of a judge's samples with each other (pipeline.stats.stability,
interval)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal


def krippendorff_alpha(
    units: Sequence[Sequence[float | None]], level: Literal["ordinal", "interval"]
) -> float:
    """`units`: each unit's values, coder by coder (None: missing). NaN where alpha is undefined."""
    # Imported here: a report whose judge took one sample never computes this (numpy and the
    # krippendorff package are a tenth of its start-up).
    import krippendorff
    import numpy as np

    width = max(len(unit) for unit in units)
    table = np.full((width, len(units)), np.nan)
    for column, unit in enumerate(units):
        for coder, value in enumerate(unit):
            if value is not None:
                table[coder, column] = value
    return float(krippendorff.alpha(reliability_data=table, level_of_measurement=level))


def alpha_undefined(ratings_per_unit: Sequence[Sequence[float | None]]) -> str | None:
    """Why Krippendorff's alpha is undefined over these units, or None where it is defined.

    Alpha compares the values given to one unit by different raters, so only units with two or
    more ratings count; with one rater per item (the most common annotation design) there is no
    such unit, and agreement between raters is not low but unmeasured."""
    pairable = [[v for v in unit if v is not None] for unit in ratings_per_unit]
    pairable = [unit for unit in pairable if len(unit) >= 2]
    if not pairable:
        return (
            "no item has two or more ratings (one rating per item), so agreement between raters is undefined"
        )
    if len({v for unit in pairable for v in unit}) < 2:
        return (
            "every item rated twice or more got one and the same value, so there is no variation to measure"
        )
    return None


def ordinal_alpha(ratings_per_unit: Sequence[Sequence[float | None]]) -> float:
    """Krippendorff's alpha (ordinal) over units each rated by any number of raters (None: missing).

    Which rater gave which value does not enter alpha, only the values within each unit, so raters
    need not be the same people across units. NaN where it is undefined (`alpha_undefined` says why)."""
    if alpha_undefined(ratings_per_unit) is not None:
        return math.nan
    return krippendorff_alpha(ratings_per_unit, "ordinal")


def judge_human_alpha(judge: Sequence[float], human: Sequence[float]) -> float:
    """Alpha (ordinal) between the judge and the mean human rating, as two raters of each item."""
    if len(judge) != len(human):
        raise ValueError("judge and human ratings differ in length")
    return ordinal_alpha([(j, h) for j, h in zip(judge, human, strict=True)])
