"""The 1-5 scale every judge here answers on, and its one mapping onto 0-1.

A small model picks among five labelled whole numbers far more reliably than it writes a calibrated
float, and better after its reasons than before them, so every judge asks for a LikertScore (a
schema allows exactly these five values) and we map it ourselves where a design reports on 0-1:
to_unit(1) = 0.0, to_unit(3) = 0.5, to_unit(5) = 1.0, exact in binary floating point. A judge that
writes its score in prose is read on the same bounds (pipeline.judges.scores.Scale(LIKERT_MIN,
LIKERT_MAX)).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

LikertScore = Literal[1, 2, 3, 4, 5]
LIKERT_VALUES: Final[tuple[int, ...]] = get_args(LikertScore)
LIKERT_MIN: Final = LIKERT_VALUES[0]
LIKERT_MAX: Final = LIKERT_VALUES[-1]


def to_unit(score: float) -> float:
    """A score on 1..5 (a whole one, or an expected value) onto 0..1."""
    return (score - LIKERT_MIN) / (LIKERT_MAX - LIKERT_MIN)
