"""Pairwise tie-breaks: which candidates to compare, and what the judge's verdicts add up to.

1. `near_ties`: in the ranking by weighted score, every adjacent pair whose scores differ by at most
   the margin. Each is asked of the judge twice, once in each order (A then B, B then A).
2. `fold_verdicts`: a pair's two verdicts agree ("consistent": the same candidate won whichever was
   shown first), disagree ("flipped": the judge preferred whichever stood in the same position, so
   the pair is a tie), or one is missing or unreadable ("incomplete": a tie too, and not counted in
   the consistency rate, since it says nothing about position).
3. `position_consistency`: consistent / (consistent + flipped), the share of verdicts that held when
   the order was swapped; None when no pair has both verdicts.
4. `tie_break_order`: the ranking with each run of near-tied neighbours reordered by net consistent
   wins (wins minus losses), stable otherwise. Only consistent verdicts move anything.

select.py uses this order twice: to break ties between equal weighted scores, and to swap a pick
for a candidate of its near-tie run that the verdicts put first, when the two share every target
category (so no target or diversity is lost; select.py bounds what relevance can lose).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class NearTie:
    higher: str  # ranks first by weighted score
    lower: str
    gap: float  # higher's weighted score minus lower's, <= margin


@dataclass(frozen=True)
class PairwiseVerdict:
    first: str  # shown in position A
    second: str  # shown in position B
    winner: str | None  # the id the judge preferred; None when its reply gave no readable verdict
    call_key: str  # the cached call this verdict came from


@dataclass(frozen=True)
class PairOutcome:
    pair: tuple[str, str]  # the two ids, sorted
    status: Literal["consistent", "flipped", "incomplete"]
    winner: str | None  # set only when consistent
    call_keys: tuple[str, ...]  # the calls behind it: pair[0] shown first, then pair[1] shown first


@dataclass(frozen=True)
class PositionConsistency:
    consistent: int
    flipped: int
    incomplete: int

    @property
    def rate(self) -> float | None:
        decided = self.consistent + self.flipped
        return self.consistent / decided if decided else None


def near_ties(ranking: Sequence[str], weighted: Mapping[str, float], margin: float) -> list[NearTie]:
    """Adjacent pairs of `ranking` (best first) whose weighted scores differ by at most `margin`."""
    if margin < 0:
        raise ValueError(f"the tie margin must not be negative, not {margin}")
    pairs = []
    for higher, lower in itertools.pairwise(ranking):
        gap = weighted[higher] - weighted[lower]
        if gap < 0:
            raise ValueError(f"ranking is not by weighted score: {higher} before {lower}")
        if gap <= margin:
            pairs.append(NearTie(higher, lower, gap))
    return pairs


def fold_verdicts(verdicts: Sequence[PairwiseVerdict]) -> list[PairOutcome]:
    """One outcome per compared pair, sorted by pair; at most one verdict per order is allowed."""
    by_pair: dict[tuple[str, str], dict[str, PairwiseVerdict]] = {}
    for verdict in verdicts:
        if verdict.first == verdict.second:
            raise ValueError(f"a candidate cannot be compared with itself: {verdict.first}")
        if verdict.winner not in (None, verdict.first, verdict.second):
            raise ValueError(
                f"verdict winner {verdict.winner} is neither {verdict.first} nor {verdict.second}"
            )
        pair = (min(verdict.first, verdict.second), max(verdict.first, verdict.second))
        orders = by_pair.setdefault(pair, {})
        if verdict.first in orders:
            raise ValueError(f"two verdicts for {verdict.first} shown before {verdict.second}")
        orders[verdict.first] = verdict
    outcomes = []
    for pair, orders in sorted(by_pair.items()):
        given = [orders[cid] for cid in pair if cid in orders]
        keys = tuple(v.call_key for v in given)
        winners = [v.winner for v in given]
        if len(given) < 2 or None in winners:
            outcomes.append(PairOutcome(pair, "incomplete", None, keys))
        elif winners[0] == winners[1]:
            outcomes.append(PairOutcome(pair, "consistent", winners[0], keys))
        else:
            outcomes.append(PairOutcome(pair, "flipped", None, keys))
    return outcomes


def position_consistency(outcomes: Sequence[PairOutcome]) -> PositionConsistency:
    def count(status: str) -> int:
        return sum(1 for o in outcomes if o.status == status)

    return PositionConsistency(count("consistent"), count("flipped"), count("incomplete"))


def tie_break_order(
    ranking: Sequence[str], ties: Sequence[NearTie], outcomes: Sequence[PairOutcome]
) -> list[str]:
    """`ranking` with each run of near-tied neighbours sorted by net consistent wins, stably."""
    net = dict.fromkeys(ranking, 0)
    for outcome in outcomes:
        if outcome.status == "consistent" and outcome.winner is not None:
            loser = outcome.pair[0] if outcome.winner == outcome.pair[1] else outcome.pair[1]
            net[outcome.winner] += 1
            net[loser] -= 1
    tied_with_next = {(t.higher, t.lower) for t in ties}
    order: list[str] = []
    run: list[str] = []
    for position, cid in enumerate(ranking):
        run.append(cid)
        following = ranking[position + 1] if position + 1 < len(ranking) else None
        if following is None or (cid, following) not in tied_with_next:
            order.extend(sorted(run, key=lambda member: -net[member]))  # sorted() is stable
            run = []
    return order


def pairwise_wins(candidate: str, outcomes: Sequence[PairOutcome]) -> list[PairOutcome]:
    """The consistent verdicts `candidate` won."""
    return [o for o in outcomes if o.status == "consistent" and o.winner == candidate]
