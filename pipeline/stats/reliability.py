"""Krippendorff's alpha over units rated by any number of coders, as the krippendorff package
wants them: a coders x units table, NaN where a unit has no value from that coder. Used for the
agreement of people with each other (pipeline.stats.agreement, ordinal) and of a judge's samples
with each other (pipeline.stats.stability, interval)."""

from __future__ import annotations

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
