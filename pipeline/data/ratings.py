"""Scores and ratings to compare: a judge's score of an item, and people's ratings of the same item.

Rows from anywhere (an experiment's judgements, `judgeloop calibrate`'s JSONL files, SummEval's
annotations) become these, and pipeline.stats.calibration measures how far they agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JudgedItem:
    item: str
    group: str  # the source the judged text came from (SummEval: the article)
    system: str  # what produced the judged text
    metric: str
    score: float | None  # None: the judge gave no readable score
    weighted_score: float | None = None  # probability-weighted expected score, where logprobs exist


@dataclass(frozen=True)
class HumanRatings:
    item: str
    metric: str
    ratings: tuple[float | None, ...]  # one per rater; None where that rater gave none

    def __post_init__(self) -> None:
        if all(r is None for r in self.ratings):
            raise ValueError(f"item {self.item!r} ({self.metric}) has no rating")

    @property
    def mean(self) -> float:
        given = [r for r in self.ratings if r is not None]
        return sum(given) / len(given)
