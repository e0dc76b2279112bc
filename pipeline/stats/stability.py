"""How stable a judge is across samples of the same judgement (judge.samples > 1): per metric, the
within-item standard deviation of the samples' scores (the mean over judgements of each one's
sample SD), the share of judgements whose samples fall on both sides of the pass threshold, and
Krippendorff's alpha at the interval level with the samples as coders and the judgements as units
(the krippendorff package: 1 = the samples always agree, 0 = no better than chance)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.stats.reliability import krippendorff_alpha


@dataclass(frozen=True)
class Stability:
    judgements: int  # with at least two scored samples
    within_sd: float | None
    straddle_share: float | None  # samples on both sides of the threshold
    alpha_interval: float | None


def stability(samples: Sequence[Sequence[float | None]], threshold: float | None) -> Stability:
    """`samples`: each judgement's sample scores (None: unscored); a score <= threshold fails
    (None: no threshold, no share straddling it)."""
    scored = [[s for s in row if s is not None] for row in samples]
    usable = [row for row in scored if len(row) >= 2]
    if not usable:
        return Stability(0, None, None, None)
    within = statistics.fmean(statistics.stdev(row) for row in usable)
    straddle = (
        None if threshold is None else sum(min(row) <= threshold < max(row) for row in usable) / len(usable)
    )
    values = {s for row in usable for s in row}
    alpha: float | None = None
    if len(values) > 1:
        found = krippendorff_alpha(samples, "interval")
        alpha = None if math.isnan(found) else found
    # One value everywhere: alpha is 0/0, undefined (None), not a perfect 1.
    return Stability(len(usable), within, straddle, alpha)
