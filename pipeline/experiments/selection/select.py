"""Choose k distinct candidates that meet every diversity target whenever the pool allows it.

Inputs: each candidate's criteria scores in 0-1 and its category on each diversity dimension; the
criteria weights (summing to 1); k; lambda; the targets ("at least t distinct values of dimension
d among the picks"). A candidate's weighted score is W = sum(weight x score). A set S of picks is

    feasible      when every target is met: distinct_d(S) >= t_d for each target dimension d
    coverage(S)   = sum over targets of min(distinct_d(S), t_d)        (all targets met: the maximum)
    relevance(S)  = mean W over S
    diversity(S)  = mean over target dimensions of (distinct_d(S) - 1) / (k - 1)   (0 if k = 1 or no targets)
    objective(S)  = lambda x relevance(S) + (1 - lambda) x diversity(S)

The selection maximises (coverage, objective) lexicographically: a feasible set whenever one exists,
the best objective among those, and when none is feasible the set coming closest to the targets
(largest coverage), then the best objective. Remaining ties go to the set whose picks rank earliest
in the ranking (W descending, then the tie-break order from pairwise verdicts, ties.py, then id).
Diversity beyond the targets is rewarded only through (1 - lambda) x diversity.

Algorithm (exact). Coverage, diversity and feasibility depend on the picks only through their
*signatures*, the tuple of their categories on the target dimensions; relevance only through their
W. So if S uses c_s candidates of signature s, replacing one of them by an unused candidate of the
same signature that ranks earlier never lowers the key (same coverage and diversity, W no lower,
ties broken towards earlier ranks). Hence an optimal set uses, for each signature, exactly its c_s
best-ranked members, and it suffices to enumerate the multisets of k signatures (combinations with
replacement, c_s no larger than the signature's size): at most C(m + k - 1, k) options for m
distinct signatures, never more valid ones than the C(n, k) k-subsets. n = 40, k = 3: at most 11,480.
Every option is checked exactly, so the result is optimal and "no feasible set" is a proof.

Fallback (when the options exceed `max_exact_options`): greedy on the ranked pool, first adding the
candidate that raises coverage most until every target is met, then the one that raises the
objective most, then single swaps that improve (coverage, objective) until none does. With a single
target dimension it meets the target whenever the pool allows (each step covers a new value while
one is left and a slot is free, so it reaches min(t, distinct values in the pool, k)). With several
dimensions no such guarantee is possible in polynomial time (three dimensions with targets equal to
k is 3-dimensional matching, NP-complete), so an unmet target then says the pool may still allow it.

Never a duplicate: ids must be unique, and every option is a set. Candidates lacking the score of a
weighted criterion (an unscored judge call) are left out and listed, never given a default score.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

DEFAULT_MAX_EXACT_OPTIONS = 200_000


@dataclass(frozen=True)
class Candidate:
    id: str
    scores: Mapping[str, float]  # criterion -> score in 0-1; a criterion never scored is absent
    categories: Mapping[str, str]  # diversity dimension -> this candidate's value


@dataclass(frozen=True)
class UnmetTarget:
    dimension: str
    target: int
    achieved: int
    reason: str


@dataclass(frozen=True)
class Selection:
    picks: tuple[str, ...]  # in ranking order
    relevance: float
    diversity: float
    objective: float
    unmet: tuple[UnmetTarget, ...]
    method: Literal["exact", "greedy"]
    options_checked: int
    top_k_by_score: tuple[str, ...]  # the k best W alone, in ranking order
    top_k_relevance: float
    ranking: tuple[str, ...]  # every usable candidate, best first
    weighted: Mapping[str, float]  # W per usable candidate
    excluded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # id -> criteria without a score

    @property
    def targets_met(self) -> bool:
        return not self.unmet

    @property
    def price_of_diversity(self) -> float:
        """How much mean weighted score the selection gives up against the top k by score alone."""
        return self.top_k_relevance - self.relevance


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
    max_exact_options: int = DEFAULT_MAX_EXACT_OPTIONS,
) -> Selection:
    """The selection described in the module docstring. `order`: a tie-break ranking of ids (ties.py)."""
    _check_arguments(candidates, weights, k, lam, targets)
    usable, excluded = _usable(candidates, weights)
    weighted = {c.id: weighted_score(c.scores, weights) for c in usable}
    tie_position = {cid: position for position, cid in enumerate(order)}
    ranked = sorted(usable, key=lambda c: (-weighted[c.id], tie_position.get(c.id, len(order)), c.id))
    rank = {c.id: position for position, c in enumerate(ranked)}
    problem = _Problem(ranked, weighted, rank, min(k, len(ranked)), lam, dict(sorted(targets.items())))

    total_options = math.comb(len(problem.groups) + problem.k - 1, problem.k) if problem.k else 1
    if total_options <= max_exact_options:
        best, checked = problem.exact(), total_options
        method: Literal["exact", "greedy"] = "exact"
    else:
        best, checked, method = problem.greedy(), 0, "greedy"
    picks = tuple(sorted(best, key=rank.__getitem__))
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
    )


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


class _Problem:
    def __init__(
        self,
        ranked: list[Candidate],
        weighted: dict[str, float],
        rank: dict[str, int],
        k: int,
        lam: float,
        targets: dict[str, int],
    ) -> None:
        self.ranked, self.weighted, self.rank, self.k, self.lam, self.targets = (
            ranked,
            weighted,
            rank,
            k,
            lam,
            targets,
        )
        self.category = {c.id: c.categories for c in ranked}
        groups: dict[tuple[str, ...], list[str]] = {}
        for c in ranked:  # ranking order, so each group is best-first and groups sort by their best
            members = groups.setdefault(self.signature(c.id), [])
            if len(members) < k:  # a set of k never uses more than k of one signature
                members.append(c.id)
        self.groups = list(groups.values())

    def signature(self, cid: str) -> tuple[str, ...]:
        return tuple(self.category[cid][d] for d in self.targets)

    def distinct(self, picks: Sequence[str], dimension: str) -> int:
        return len({self.category[p][dimension] for p in picks})

    def coverage(self, picks: Sequence[str]) -> int:
        return sum(min(self.distinct(picks, d), t) for d, t in self.targets.items())

    def relevance(self, picks: Sequence[str]) -> float:
        if not picks:
            return 0.0
        return math.fsum(self.weighted[p] for p in sorted(picks, key=self.rank.__getitem__)) / len(picks)

    def diversity(self, picks: Sequence[str]) -> float:
        if self.k < 2 or not self.targets:
            return 0.0
        shares = [(self.distinct(picks, d) - 1) / (self.k - 1) for d in self.targets]
        return math.fsum(shares) / len(shares)

    def objective(self, picks: Sequence[str]) -> float:
        return self.lam * self.relevance(picks) + (1.0 - self.lam) * self.diversity(picks)

    def key(self, picks: Sequence[str]) -> tuple[int, float, tuple[int, ...]]:
        """Larger is better; the last part prefers picks that rank earlier."""
        earliest_first = tuple(-position for position in sorted(self.rank[p] for p in picks))
        return self.coverage(picks), self.objective(picks), earliest_first

    def exact(self) -> list[str]:
        best: list[str] = []
        best_key: tuple[int, float, tuple[int, ...]] | None = None
        for combo in itertools.combinations_with_replacement(range(len(self.groups)), self.k):
            picks: list[str] = []
            for group_index, count in _counts(combo):
                group = self.groups[group_index]
                if count > len(group):
                    break
                picks.extend(group[:count])
            else:
                candidate_key = self.key(picks)
                if best_key is None or candidate_key > best_key:
                    best, best_key = picks, candidate_key
        return best

    def greedy(self) -> list[str]:
        picks: list[str] = []
        pool = [c.id for c in self.ranked]
        full = sum(self.targets.values())
        while len(picks) < self.k:
            rest = [cid for cid in pool if cid not in picks]
            if self.coverage(picks) < full:
                chosen = max(rest, key=lambda cid: (self.coverage([*picks, cid]), -self.rank[cid]))
            else:
                chosen = max(rest, key=lambda cid: (self.objective([*picks, cid]), -self.rank[cid]))
            picks.append(chosen)
        improved = True
        while improved:
            improved = False
            for out_id, in_id in itertools.product(list(picks), pool):
                if in_id in picks:
                    continue
                swapped = [in_id if p == out_id else p for p in picks]
                if self.key(swapped) > self.key(picks):
                    picks, improved = swapped, True
                    break
        return picks

    def unmet(self, picks: Sequence[str], k: int, method: str) -> tuple[UnmetTarget, ...]:
        missed = []
        for dimension, target in self.targets.items():
            achieved = self.distinct(picks, dimension)
            if achieved >= target:
                continue
            values = sorted({self.category[c.id][dimension] for c in self.ranked})
            if len(values) < target:
                shown = ", ".join(values) if values else "none"
                reason = f"the pool has only {len(values)} distinct {dimension} value(s) ({shown})"
            elif self.k < target:
                reason = f"{self.k} pick(s) cannot hold {target} distinct {dimension} values"
                if self.k < k:
                    reason += f" (the pool has only {self.k} scored candidate(s))"
            elif method == "exact":
                others = [f"{d} >= {t}" for d, t in self.targets.items() if d != dimension]
                reason = (
                    f"the pool has {len(values)} distinct {dimension} values, but no {self.k} picks "
                    f"reach {dimension} >= {target} together with {' and '.join(others)}"
                )
            else:
                reason = (
                    "not met by the greedy fallback (too many options for the exact search); "
                    "the pool may still allow it"
                )
            missed.append(UnmetTarget(dimension, target, achieved, reason))
        return tuple(missed)


def _counts(combo: tuple[int, ...]) -> list[tuple[int, int]]:
    return [(index, len(list(run))) for index, run in itertools.groupby(combo)]
