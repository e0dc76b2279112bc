"""The search behind select.py: an exact one over signature multisets, and a greedy fallback.

A set S of picks is scored by select.py's definitions: coverage(S), relevance(S), diversity(S),
objective(S); `key` orders sets by (coverage, objective, earliest ranks).

Exact. Coverage, diversity and feasibility depend on the picks only through their *signatures*,
the tuple of their categories on the target dimensions; relevance only through their W. So if S
uses c_s candidates of signature s, replacing one of them by an unused candidate of the same
signature that ranks earlier never lowers the key (same coverage and diversity, W no lower, ties
broken towards earlier ranks). Hence an optimal set uses, for each signature, exactly its c_s
best-ranked members, and it suffices to enumerate the multisets of k signatures (combinations with
replacement, c_s no larger than the signature's size): at most C(m + k - 1, k) options for m
distinct signatures, never more valid ones than the C(n, k) k-subsets. n = 40, k = 3: at most
11,480. Every option is checked, so the result is optimal and "no feasible set" is a proof.

Greedy (when the options exceed the cap): on the ranked pool, first add the candidate that raises
coverage most until every target is met, then the one that raises the objective most, then make
single swaps that improve the key until none does. With a single target dimension it meets the
target whenever the pool allows (each step covers a new value while one is left and a slot is
free, so it reaches min(t, distinct values in the pool, k)). With several dimensions no such
guarantee is possible in polynomial time (three dimensions with targets equal to k is
3-dimensional matching, NP-complete), so an unmet target then says the pool may still allow it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


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


class SelectionProblem:
    """The usable candidates best first, their W and rank, k (at most their number), lambda, targets."""

    def __init__(
        self,
        ranked: list[Candidate],
        weighted: dict[str, float],
        rank: dict[str, int],
        k: int,
        lam: float,
        targets: dict[str, int],
    ) -> None:
        self.ranked = ranked
        self.weighted = weighted
        self.rank = rank
        self.k = k
        self.lam = lam
        self.targets = targets
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
