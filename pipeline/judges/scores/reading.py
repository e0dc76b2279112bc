"""What a reading is: the scale a judge was asked for, and what the extractor found, with why."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal, get_args

ReadReason = Literal[
    "labelled",
    "json",
    "bracketed",
    "phrase",
    "verdict_verb",
    "verdict_clause",
    "verdict_named",
    "fraction_verb",
    "fraction_noun",
    "fraction_closing",
    "verdict_closing",
    "bare_number",
    # a decimal on an integer scale, scored only when the experiment's policy says so (decimals.py)
    "decimal_rounded",
    "decimal_kept",
]
UnreadReason = Literal[
    "empty",
    "no_score",
    "template_echo",
    "ambiguous",
    "out_of_range",
    "scale_mismatch",
    "non_integer",
]
Reason = Literal[ReadReason, UnreadReason]  # one flat Literal: get_args lists every reason
READ_REASONS: Final[frozenset[str]] = frozenset(get_args(ReadReason))


@dataclass(frozen=True, slots=True)
class Scale:
    """The score range a judge was asked for; ``integer=False`` allows e.g. MT-Bench's 8.5."""

    min: float
    max: float
    integer: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min) and math.isfinite(self.max) and self.min < self.max):
            raise ValueError(f"a scale needs finite min < max, got {self.min}..{self.max}")
        if self.integer and not (float(self.min).is_integer() and float(self.max).is_integer()):
            raise ValueError(f"an integer scale needs integral bounds, got {self.min}..{self.max}")


@dataclass(frozen=True, slots=True)
class ScoreReading:
    """``score`` is None unless ``reason`` is one of READ_REASONS; ``matched`` is the span read.

    ``stated`` is the number the verdict states, whatever became of it: 3.5 for "Score: 3.5/5" read
    as ``non_integer`` (no score) as well as for the same reply rounded to 4 by the decimal policy, 7
    for an ``out_of_range`` "Score: 7". None when no single verdict was found (no score, a range).
    """

    score: int | float | None
    reason: Reason
    matched: str | None
    stated: int | float | None = None


DEFAULT_SCALE: Final = Scale(1, 5)


def as_number(value: float) -> int | float:
    """Integral values as ``int`` (4.0 -> 4), others as written."""
    return int(value) if float(value).is_integer() else value
