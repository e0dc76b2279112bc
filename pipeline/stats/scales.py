"""Which rating scale a set of scores is on, read from the values, and what differs between two.

A judge asked for 1-5 and people who rated 1-10 (or 0-1) still correlate, since correlations are
unchanged by a linear rescaling; but Krippendorff's alpha measures absolute agreement, so a judge
on another scale than the people's scores badly there whatever it ranks, and a mean difference
means nothing. Nothing in two JSONL files says which scale each was on, so it is read from the
values: the smallest usual scale that holds them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The usual rating scales, smallest first: the first that holds every value is the one named. No
# 1-3 or 1-7: a judge that used only 2 to 4 of a 1-5 scale would be read as on another scale.
USUAL_SCALES: tuple[tuple[int, int], ...] = ((0, 1), (1, 5), (1, 10), (0, 10), (0, 100))


@dataclass(frozen=True)
class Scale:
    low: float  # the smallest value seen
    high: float  # the largest
    integers: bool  # every value a whole number
    usual: tuple[int, int] | None  # the smallest usual scale holding them all; None: none does

    @property
    def name(self) -> str:
        return f"{self.usual[0]}-{self.usual[1]}" if self.usual else "no usual scale"

    def describe(self) -> str:
        kind = "whole numbers" if self.integers else "values"
        return f"{kind} from {self.low:g} to {self.high:g} ({self.name})"


def scale_of(values: Iterable[float]) -> Scale | None:
    """The scale of `values`; None when there are none."""
    seen = list(values)
    if not seen:
        return None
    low, high = min(seen), max(seen)
    integers = all(float(v).is_integer() for v in seen)
    usual = None
    for first, last in USUAL_SCALES:
        # Whole numbers from 1 up are a 1-N scale's; 0-1 is then only for 0/1 labels or fractions.
        if (first, last) == (0, 1) and integers and low >= 1:
            continue
        if first <= low and high <= last:
            usual = (first, last)
            break
    return Scale(low, high, integers, usual)


def scale_difference(judge: Scale | None, human: Scale | None) -> str | None:
    """What differs between the judge's scale and the people's, in words; None when they agree (or
    one side has no value to tell from)."""
    if judge is None or human is None:
        return None
    if judge.usual == human.usual and (
        judge.usual is not None or (judge.low, judge.high) == (human.low, human.high)
    ):
        return None
    return (
        f"the judge's scores are {judge.describe()} but the human ratings are {human.describe()}: "
        "the correlations still hold (they ignore a linear rescaling), but alpha measures absolute "
        "agreement and is not comparable across scales. Fix: rescale one side to the other's scale "
        "before calibrating (or check that these are the files you meant)"
    )
