"""Choose k distinct candidates that meet every diversity target whenever the pool allows it.

Inputs: each candidate's criteria scores in 0-1 and its category on each diversity dimension; the
criteria weights (summing to 1); k; lambda; the targets ("at least t distinct values of dimension
d among the picks"). A candidate's weighted score is W = sum(weight x score). A set S of picks is

    feasible      when every target is met: distinct_d(S) >= t_d for each target dimension d
    coverage(S)   = sum over targets of min(distinct_d(S), t_d)        (all targets met: the maximum)
    relevance(S)  = mean W over S
    diversity(S)  = mean over target dimensions of (distinct_d(S) - 1) / (k - 1)   (0 if k = 1 or no targets)
    objective(S)  = lambda x relevance(S) + (1 - lambda) x diversity(S)

Stage 1 maximises (coverage, objective) lexicographically: a feasible set whenever one exists, the
best objective among those, and when none is feasible the set coming closest to the targets
(largest coverage), then the best objective. Remaining ties go to the set whose picks rank earliest
(W descending, then the tie-break `order`, then id). Diversity beyond the targets is rewarded only
through (1 - lambda) x diversity. search.py states the algorithm and proves it: an exact search
over multisets of signatures (n = 40, k = 3: at most 11,480 options), and above
`max_exact_options` a greedy fallback that is guaranteed only for a single target dimension.

Stage 2 lets the judge's pairwise verdicts settle near ties (ties.py): candidates form a near-tie
run when neighbours in the W ranking differ by at most `tie_margin`. A pick is replaced by an
unpicked candidate of its run that the tie-break `order` puts first, if the two share a signature.
Sharing the signature keeps coverage, feasibility and diversity as they were; relevance can drop,
by at most the run's spread in W per replaced pick. Each replacement is listed in `tie_breaks`.
With tie_margin 0 a run holds equal W only, and stage 2 changes nothing stage 1 had not settled.

Never a duplicate: ids must be unique, and every option is a set. Candidates lacking the score of a
weighted criterion (an unscored judge call) are left out and listed, never given a default score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pipeline.experiments.selection.search import Candidate, SelectionProblem, UnmetTarget

__all__ = ["Candidate", "Selection", "UnmetTarget", "select", "weighted_score"]

DEFAULT_MAX_EXACT_OPTIONS = 200_000


@dataclass(frozen=True)
class Selection:
    picks: tuple[str, ...]  # in ranking order
    relevance: float
    diversity: float
    objective: float
    unmet: tuple[UnmetTarget, ...]
    method: Literal["exact", "greedy"]
    options_checked: int  # signature multisets enumerated by the exact search (0 for greedy)
    top_k_by_score: tuple[str, ...]  # the k best W alone, in ranking order
    top_k_relevance: float
    ranking: tuple[str, ...]  # every usable candidate, best first
    weighted: Mapping[str, float]  # W per usable candidate
    excluded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # id -> criteria without a score
    tie_breaks: tuple[tuple[str, str], ...] = ()  # (replaced, by) in stage 2

    @property
    def targets_met(self) -> bool:
        return not self.unmet

    @property
    def price_of_diversity(self) -> float:
        """Mean W the picks give up against the top k by W alone (stage 2's tie-breaks included)."""
        return self.top_k_relevance - self.relevance

    def record(self) -> dict[str, Any]:
        """As written to outputs (canonical JSON)."""
        return {
            "picks": list(self.picks),
            "relevance": self.relevance,
            "diversity": self.diversity,
            "objective": self.objective,
            "targets_met": self.targets_met,
            "unmet": [vars(u) for u in self.unmet],
            "method": self.method,
            "options_checked": self.options_checked,
            "top_k_by_score": list(self.top_k_by_score),
            "top_k_relevance": self.top_k_relevance,
            "price_of_diversity": self.price_of_diversity,
            "ranking": [{"candidate": cid, "weighted": self.weighted[cid]} for cid in self.ranking],
            "excluded": {cid: list(missing) for cid, missing in self.excluded.items()},
            "tie_breaks": [{"replaced": old, "by": new} for old, new in self.tie_breaks],
        }


def weighted_score(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """W: the sum of weight x score over the criteria with a positive weight."""
    return math.fsum(weights[name] * scores[name] for name in sorted(weights) if weights[name] > 0)


def select(
    candidates: Sequence[Candidate],
    weights: Mapping[str, float],
    k: int,
    lam: float,
    targets: Mapping[str, int],
    *,
    order: Sequence[str] = (),
    tie_margin: float = 0.0,
    max_exact_options: int = DEFAULT_MAX_EXACT_OPTIONS,
) -> Selection:
    """The selection described in the module docstring. `order`: the tie-break order of ids
    (ties.tie_break_order, built with the same margin); ids it does not list come after those it does."""
    _check_arguments(candidates, weights, k, lam, targets)
    if tie_margin < 0:
        raise ValueError(f"the tie margin must not be negative, not {tie_margin}")
    usable, excluded = _usable(candidates, weights)
    weighted = {c.id: weighted_score(c.scores, weights) for c in usable}
    tie_position = {cid: position for position, cid in enumerate(order)}
    ranked = sorted(usable, key=lambda c: (-weighted[c.id], tie_position.get(c.id, len(order)), c.id))
    rank = {c.id: position for position, c in enumerate(ranked)}
    problem = SelectionProblem(
        ranked, weighted, rank, min(k, len(ranked)), lam, dict(sorted(targets.items()))
    )

    total_options = math.comb(len(problem.groups) + problem.k - 1, problem.k) if problem.k else 1
    if total_options <= max_exact_options:
        best, checked = problem.exact(), total_options
        method: Literal["exact", "greedy"] = "exact"
    else:
        best, checked, method = problem.greedy(), 0, "greedy"
    chosen, tie_breaks = _prefer_tie_winners(best, problem, tie_position, tie_margin)
    picks = tuple(sorted(chosen, key=rank.__getitem__))
    top = tuple(c.id for c in ranked[: problem.k])
    return Selection(
        picks=picks,
        relevance=problem.relevance(picks),
        diversity=problem.diversity(picks),
        objective=problem.objective(picks),
        unmet=problem.unmet(picks, k, method),
        method=method,
        options_checked=checked,
        top_k_by_score=top,
        top_k_relevance=problem.relevance(top),
        ranking=tuple(c.id for c in ranked),
        weighted=weighted,
        excluded=excluded,
        tie_breaks=tie_breaks,
    )


def _prefer_tie_winners(
    picks: Sequence[str], problem: SelectionProblem, tie_position: Mapping[str, int], margin: float
) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """Stage 2: swap a pick for a same-signature candidate of its near-tie run that `order` prefers."""
    run: dict[str, int] = {}
    previous: str | None = None
    for c in problem.ranked:
        gap = problem.weighted[previous] - problem.weighted[c.id] if previous is not None else 0.0
        run[c.id] = run[previous] + (gap > margin) if previous is not None else 0
        previous = c.id
    unlisted = len(tie_position)
    chosen = sorted(picks, key=problem.rank.__getitem__)
    swaps = []
    for index, pick in enumerate(chosen):
        rivals = [
            c.id
            for c in problem.ranked
            if c.id not in chosen
            and run[c.id] == run[pick]
            and problem.signature(c.id) == problem.signature(pick)
            and tie_position.get(c.id, unlisted) < tie_position.get(pick, unlisted)
        ]
        if rivals:
            winner = min(rivals, key=lambda cid: tie_position[cid])
            chosen[index] = winner
            swaps.append((pick, winner))
    return chosen, tuple(swaps)


def _check_arguments(
    candidates: Sequence[Candidate],
    weights: Mapping[str, float],
    k: int,
    lam: float,
    targets: Mapping[str, int],
) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must lie in 0-1, not {lam}")
    if abs(math.fsum(weights.values()) - 1.0) > 1e-9 or any(w < 0 for w in weights.values()):
        raise ValueError(f"weights must be non-negative and sum to 1: {dict(weights)}")
    if any(t < 1 for t in targets.values()):
        raise ValueError(f"every diversity target must be at least 1: {dict(targets)}")
    ids = [c.id for c in candidates]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"candidate ids must be unique; repeated: {repeated}")
    for c in candidates:
        missing = [d for d in targets if d not in c.categories]
        if missing:
            raise ValueError(f"candidate {c.id} has no category for target dimension(s) {missing}")
        bad = {name: s for name, s in c.scores.items() if not 0.0 <= s <= 1.0}
        if bad:
            raise ValueError(f"candidate {c.id}: scores must lie in 0-1: {bad}")


def _usable(
    candidates: Sequence[Candidate], weights: Mapping[str, float]
) -> tuple[list[Candidate], dict[str, tuple[str, ...]]]:
    usable, excluded = [], {}
    for c in candidates:
        missing = tuple(name for name in sorted(weights) if weights[name] > 0 and name not in c.scores)
        if missing:
            excluded[c.id] = missing
        else:
            usable.append(c)
    return usable, excluded
