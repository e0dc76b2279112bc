"""An explanation for every pick, as data built only from the records the selection used.

For each pick, in the selection's order:

    criteria        each weighted criterion's score, weight and contribution (score x weight), with
                    what the score rests on: the judge's rating and call keys, or the catalog
                    attribute and its value (criteria.CriterionScore)
    total           the pick's weighted score: the sum of the contributions, equal to the W the
                    selection ranked it by
    categories      its value on each target dimension
    newly_covers    the target categories it is the first pick to cover ("genre=rock"), counting
                    picks in order; diversity_gain: how much it raised the diversity term
    pairwise_won    the tie-break comparisons it won consistently (both orders), with their calls

Nothing is computed that the inputs do not hold: scores and keys are copied, a contribution is one
product, the total one sum, and diversity is counted from the categories.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.experiments.selection.criteria import CriterionScore
from pipeline.experiments.selection.select import Selection
from pipeline.experiments.selection.ties import PairOutcome, pairwise_wins


@dataclass(frozen=True)
class Contribution:
    score: CriterionScore
    weight: float

    @property
    def value(self) -> float:
        return self.score.score * self.weight


@dataclass(frozen=True)
class PickExplanation:
    candidate: str
    position: int  # 1-based, in the selection's order
    criteria: tuple[Contribution, ...]  # by criterion name
    total: float
    categories: Mapping[str, str]
    newly_covers: tuple[str, ...]
    diversity_gain: float
    pairwise_won: tuple[PairOutcome, ...]

    def record(self) -> dict[str, Any]:
        """As written to outputs (canonical JSON)."""
        return {
            "candidate": self.candidate,
            "position": self.position,
            "criteria": [
                {**c.score.record(), "weight": c.weight, "contribution": c.value} for c in self.criteria
            ],
            "total": self.total,
            "categories": dict(self.categories),
            "newly_covers": list(self.newly_covers),
            "diversity_gain": self.diversity_gain,
            "pairwise_won": [
                {"opponent": next(i for i in o.pair if i != self.candidate), "call_keys": list(o.call_keys)}
                for o in self.pairwise_won
            ],
        }


def explain(
    selection: Selection,
    weights: Mapping[str, float],
    scores: Mapping[str, Mapping[str, CriterionScore]],
    categories: Mapping[str, Mapping[str, str]],
    targets: Mapping[str, int],
    outcomes: Sequence[PairOutcome] = (),
) -> list[PickExplanation]:
    """One explanation per pick. `scores` and `categories` are keyed by candidate id."""
    k = len(selection.picks)
    dimensions = sorted(targets)
    covered: dict[str, set[str]] = {d: set() for d in dimensions}
    explanations = []
    for position, cid in enumerate(selection.picks, start=1):
        contributions = tuple(
            Contribution(scores[cid][name], weights[name]) for name in sorted(weights) if weights[name] > 0
        )
        total = math.fsum(c.value for c in contributions)
        if total != selection.weighted[cid]:
            raise AssertionError(
                f"{cid}: contributions sum to {total}, the selection ranked it by {selection.weighted[cid]}"
            )
        before = _diversity(covered, k)
        new = []
        for d in dimensions:
            value = categories[cid][d]
            if value not in covered[d]:
                covered[d].add(value)
                new.append(f"{d}={value}")
        explanations.append(
            PickExplanation(
                candidate=cid,
                position=position,
                criteria=contributions,
                total=total,
                categories={d: categories[cid][d] for d in dimensions},
                newly_covers=tuple(new),
                diversity_gain=_diversity(covered, k) - before,
                pairwise_won=tuple(pairwise_wins(cid, outcomes)),
            )
        )
    return explanations


def _diversity(covered: Mapping[str, set[str]], k: int) -> float:
    """select.py's diversity term for the picks so far (an empty dimension counts as 0)."""
    if k < 2 or not covered:
        return 0.0
    shares = [max(len(values) - 1, 0) / (k - 1) for values in covered.values()]
    return math.fsum(shares) / len(shares)
