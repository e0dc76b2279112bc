"""The selection's pick step: near ties asked of the judge in both orders, then the picks, explained.

Per request, in the order the package docstring gives: a first selection ranks the usable
candidates by weighted score; every adjacent pair within `tie_margin` is compared by the judge
twice (each candidate shown first once); the verdicts are folded (a verdict that flips with the
order is a tie), give the tie-break order, and the final selection uses it. A comparison whose
reply stays unusable after the re-asks is a verdict with no winner ("incomplete"), never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.data.jsonl import write_records
from pipeline.experiments.selection.explain import PickExplanation, explain
from pipeline.experiments.selection.judging import CandidatePair, PairwiseJudge
from pipeline.experiments.selection.params import SelectionParams
from pipeline.experiments.selection.score import SCORED, ScoredRequest
from pipeline.experiments.selection.select import Candidate, Selection, select
from pipeline.experiments.selection.ties import (
    PairOutcome,
    PairwiseVerdict,
    PositionConsistency,
    fold_verdicts,
    near_ties,
    position_consistency,
    tie_break_order,
)
from pipeline.experiments.steps import Done, LLMStep, Output, share
from pipeline.llm.keys import canonical_json
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession


@dataclass(frozen=True)
class Comparison:
    verdict: PairwiseVerdict
    call_keys: tuple[str, ...]  # every call made for it; verdict.call_key is the one read last
    reason: str | None  # the judge's reason; None when no reply validated
    failure: str | None = None  # the problem of the last reply, when none validated


@dataclass(frozen=True)
class PickResult:
    request: str
    selection: Selection
    comparisons: tuple[Comparison, ...]
    outcomes: tuple[PairOutcome, ...]
    consistency: PositionConsistency
    explanations: tuple[PickExplanation, ...]

    def record(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "selection": self.selection.record(),
            "comparisons": [
                {
                    "first": c.verdict.first,
                    "second": c.verdict.second,
                    "winner": c.verdict.winner,
                    "reason": c.reason,
                    "failure": c.failure,
                    "call_keys": list(c.call_keys),
                }
                for c in self.comparisons
            ],
            "outcomes": [
                {"pair": list(o.pair), "status": o.status, "winner": o.winner, "call_keys": list(o.call_keys)}
                for o in self.outcomes
            ],
            "position_consistency": {
                "consistent": self.consistency.consistent,
                "flipped": self.consistency.flipped,
                "incomplete": self.consistency.incomplete,
            },
            "explanations": [e.record() for e in self.explanations],
        }


def candidates_of(scored: ScoredRequest) -> list[Candidate]:
    targets = scored.framework.diversity_targets
    return [
        Candidate(
            c.id,
            {name: s.score for name, s in c.scores.items()},
            {d: c.entry.track.category(d) for d in sorted(targets)},
        )
        for c in scored.pool
    ]


def pick_request(params: SelectionParams, session: LLMSession, scored: ScoredRequest) -> PickResult:
    settings = params.selection
    weights = scored.framework.weights
    targets = scored.framework.diversity_targets
    candidates = candidates_of(scored)

    def choose(order: Sequence[str] = ()) -> Selection:
        return select(
            candidates,
            weights,
            settings.k,
            settings.lambda_,
            targets,
            order=order,
            tie_margin=settings.tie_margin,
            max_exact_options=settings.max_exact_options,
        )

    first = choose()
    ties = near_ties(first.ranking, first.weighted, settings.tie_margin)
    tracks = {c.id: c.entry.track for c in scored.pool}
    compare = PairwiseJudge(session, params.compare_options(), settings.max_attempts)
    comparisons = []
    for tie in ties:
        for shown_first, shown_second in ((tie.higher, tie.lower), (tie.lower, tie.higher)):
            pair = CandidatePair(scored.request, tracks[shown_first], tracks[shown_second])
            judgement = compare(pair, pair.context())
            verdict = PairwiseVerdict(shown_first, shown_second, judgement.value, judgement.call_keys[-1])
            if judgement.scored:
                comparisons.append(Comparison(verdict, judgement.call_keys, judgement.explanation))
            else:
                failure = f"{judgement.reading}: {judgement.error}"
                comparisons.append(Comparison(verdict, judgement.call_keys, None, failure))
    outcomes = fold_verdicts([c.verdict for c in comparisons])
    final = choose(tie_break_order(first.ranking, ties, outcomes))
    scores = {c.id: c.scores for c in scored.pool}
    categories = {c.id: dict(c.categories) for c in candidates}
    explanations = explain(final, weights, scores, categories, targets, outcomes)
    return PickResult(
        scored.request.id,
        final,
        tuple(comparisons),
        tuple(outcomes),
        position_consistency(outcomes),
        tuple(explanations),
    )


def stream_pick(
    params: SelectionParams, session: LLMSession, scored: Sequence[ScoredRequest]
) -> Iterable[PickResult]:
    return iter_items(session, scored, lambda s: pick_request(params, session, s), "select_pick")


run_pick = held(stream_pick)


def _write_picks(path: Path, picks: Iterable[PickResult]) -> None:
    write_records(path, (p.record() for p in picks))


STEP: LLMStep[SelectionParams, list[ScoredRequest], PickResult] = LLMStep(
    inputs=lambda params, upstream: upstream("select_score", SCORED),
    items=lambda scored: [s.request.id for s in scored],
    stream=stream_pick,
    output=Output(lambda p: p.request, lambda p: canonical_json(p.record()), _write_picks),
    done=Done(
        lambda p: (sum(o.status == "incomplete" for o in p.outcomes), len(p.outcomes)),
        lambda ties: share(
            sum(i for i, _ in ties),
            sum(n for _, n in ties),
            "near ties",
            "left undecided (a comparison unreadable)",
        ),
    ),
)
