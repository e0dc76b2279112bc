"""The selection's score step: every candidate of every request, on each criterion of its framework.

A judged criterion is one structured call (a 1-5 rating with a reason, pipeline.experiments.selection.
judging), mapped to 0-1 by criteria.judged_score; an attribute criterion is read from the catalog
row (criteria.attribute_score) with no call. A judgement that stays unusable after the re-asks is
recorded under `failed` with its kind, its error and its call keys, and the criterion is left
unscored: select.py then excludes the candidate and lists it. No rating is ever defaulted.

One record per request (outputs/selection/scores.jsonl) holds everything the next steps need: the
request, its resolved framework, and its pool with each candidate's track, scores, reasons and
failures, so the pick step reads no catalog.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.data.catalog import Track
from pipeline.data.jsonl import read_records, write_records
from pipeline.data.listening_requests import Framework, ListeningRequest
from pipeline.experiments.selection.criteria import CriterionScore, attribute_score, judged_score
from pipeline.experiments.selection.judging import CandidateOnCriterion, CriterionJudge
from pipeline.experiments.selection.params import SelectionParams
from pipeline.experiments.selection.pools import RequestPool, request_pools
from pipeline.experiments.selection.retrieve import PoolEntry
from pipeline.experiments.steps import Done, LLMStep, Output, share
from pipeline.judges.samples import Combine, combine, only_seeds_differ, sample_options
from pipeline.llm.keys import canonical_json
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession


@dataclass(frozen=True)
class FailedJudgement:
    kind: str
    error: str
    text: str  # the last reply as the model wrote it
    call_keys: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, "error": self.error, "text": self.text, "call_keys": list(self.call_keys)}


@dataclass(frozen=True)
class ScoredCandidate:
    entry: PoolEntry
    scores: dict[str, CriterionScore]  # criterion -> score; a failed judgement is absent
    reasons: dict[str, str] = field(default_factory=dict)  # criterion -> the judge's reason
    failed: dict[str, FailedJudgement] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.entry.track.track_id

    def record(self) -> dict[str, Any]:
        return {
            **self.entry.record(),
            "scores": {name: s.record() for name, s in sorted(self.scores.items())},
            "reasons": dict(sorted(self.reasons.items())),
            "failed": {name: f.record() for name, f in sorted(self.failed.items())},
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ScoredCandidate:
        entry = PoolEntry(Track.model_validate(record["track"]), record["advocate"], dict(record["ranks"]))
        return cls(
            entry,
            {name: CriterionScore.from_record(s) for name, s in record["scores"].items()},
            dict(record["reasons"]),
            {
                name: FailedJudgement(f["kind"], f["error"], f["text"], tuple(f["call_keys"]))
                for name, f in record["failed"].items()
            },
        )


@dataclass(frozen=True)
class ScoredRequest:
    request: ListeningRequest
    framework: Framework
    pool: list[ScoredCandidate]

    def record(self) -> dict[str, Any]:
        return {
            "request": self.request.model_dump(mode="json"),
            "framework": self.framework.model_dump(mode="json"),
            "pool": [c.record() for c in self.pool],
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ScoredRequest:
        return cls(
            ListeningRequest.model_validate(record["request"]),
            Framework.model_validate(record["framework"]),
            [ScoredCandidate.from_record(c) for c in record["pool"]],
        )


Rated = tuple[CriterionScore | FailedJudgement, str]  # the rating or its failure, and the judge's reason


def _rated(rate: CriterionJudge, subject: CandidateOnCriterion, name: str) -> Rated:
    judgement = rate(subject, subject.context())
    if judgement.value is None:
        failure = FailedJudgement(
            judgement.reading, judgement.error or "", judgement.text, judgement.call_keys
        )
        return failure, ""
    return judged_score(name, judgement.value, judgement.call_keys), judgement.explanation


def _rated_sampled(
    rates: Sequence[CriterionJudge], subject: CandidateOnCriterion, name: str, how: Combine
) -> Rated:
    """selection.samples > 1: the rating asked once per sample (each its own seed, recorded under
    its `sample` label), the samples' ratings combined; failed only where no sample was usable (then
    sample 0's failure, with every sample's calls). The reason is the first usable sample's."""
    judged = [rate(subject, subject.context().at(sample=str(i))) for i, rate in enumerate(rates)]
    keys = tuple(key for j in judged for key in j.call_keys)
    ratings = tuple(j.value for j in judged)
    rating = combine(ratings, how)
    if rating is None:
        first = judged[0]
        return FailedJudgement(first.reading, first.error or "", first.text, keys), ""
    reason = next(j.explanation for j in judged if j.value is not None)
    return judged_score(name, rating, keys, ratings), reason


def score_candidate(
    params: SelectionParams, session: LLMSession, request_pool: RequestPool, entry: PoolEntry
) -> ScoredCandidate:
    scores: dict[str, CriterionScore] = {}
    reasons: dict[str, str] = {}
    failed: dict[str, FailedJudgement] = {}
    settings, options = params.selection, params.judge_options()
    rates = [
        CriterionJudge(session, sample_options(options, i), settings.max_attempts)
        for i in range(settings.samples)
    ]
    for name, criterion in sorted(request_pool.framework.criteria.items()):
        if criterion.source == "attribute":
            scores[name] = attribute_score(name, criterion, entry.track)
            continue
        subject = CandidateOnCriterion(request_pool.request, name, criterion, entry.track)
        if settings.samples > 1:
            rated, reason = _rated_sampled(rates, subject, name, settings.combine)
        else:
            rated, reason = _rated(rates[0], subject, name)
        if isinstance(rated, FailedJudgement):
            failed[name] = rated
        else:
            scores[name], reasons[name] = rated, reason
    return ScoredCandidate(entry, scores, reasons, failed)


def stream_score(
    params: SelectionParams, session: LLMSession, pools: Sequence[RequestPool]
) -> Iterable[ScoredRequest]:
    said = only_seeds_differ(params.selection.samples, params.judge_options())
    if said is not None:
        print(f"select_score: {said.replace('judge.samples', 'selection.samples')}", file=sys.stderr)

    def score_request(request_pool: RequestPool) -> ScoredRequest:
        pool = [score_candidate(params, session, request_pool, entry) for entry in request_pool.pool]
        return ScoredRequest(request_pool.request, request_pool.framework, pool)

    return iter_items(session, pools, score_request, "select_score")


run_score = held(stream_score)


def _write_scored(path: Path, scored: Iterable[ScoredRequest]) -> None:
    write_records(path, (s.record() for s in scored))


# One plain record per request, in the requests' order (pipeline.experiments.selection.files).
SCORED: Output[ScoredRequest] = Output(
    item_of=lambda s: s.request.id,
    text_of=lambda s: canonical_json(s.record()),
    write=_write_scored,
    read=lambda path: [ScoredRequest.from_record(r) for r in read_records(path)],
)


def _ratings_of(r: ScoredRequest) -> tuple[int, int]:
    """One request's ratings by the judge, and those that failed."""
    judged = sum(s.source == "judge" for c in r.pool for s in c.scores.values())
    return judged, sum(len(c.failed) for c in r.pool)


def _outcome(rated: list[tuple[int, int]]) -> str:
    judged, failed = sum(j for j, _ in rated), sum(f for _, f in rated)
    return share(failed, judged + failed, "ratings", "unscored (their candidates left out)")


STEP: LLMStep[SelectionParams, list[RequestPool], ScoredRequest] = LLMStep(
    inputs=lambda params, _: request_pools(params.selection),
    items=lambda pools: [p.request.id for p in pools],
    stream=stream_score,
    output=SCORED,
    done=Done(_ratings_of, _outcome),
)
