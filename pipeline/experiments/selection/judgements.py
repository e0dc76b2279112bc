"""The selection's judgement unit for `judgeloop diff`. An item is one candidate of one request,
`request/track_id`; its metrics:

    <criterion>  each judged criterion's 1-5 rating of the candidate (one call and its re-asks;
                 None where it stayed unusable, the candidate then left out). No verdict: a rating
                 passes or fails nothing by itself. The input judged is what the prompt shows of
                 the request and the track, so a catalog or request edit is the input's change.
    selected     the candidate's weighted score W (None where it was left out), and the verdict the
                 design reaches: picked into the top-k (pass) or not (fail). "pass→fail" is a
                 candidate dropped from the picks, "fail→pass" one newly picked. Its input is
                 every rating of the request's pool: a top-k is relative, so a candidate can drop
                 because another's rating moved. With the same pool of ratings, a change of picks
                 is the selection's params' (k, lambda, ties), reported as the same score with
                 another verdict; its calls are the candidate's criterion calls (`--item`).

Attribute criteria (read from the catalog, no call) are no judgement and are not listed; nor are
the pick stage's pairwise tie-break calls, which judge pairs whose membership depends on the scores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.data.jsonl import read_records
from pipeline.errors import InputError
from pipeline.experiments.judgements import Judgement, RunFiles, text_id
from pipeline.experiments.selection.files import PICKS, SCORES
from pipeline.experiments.selection.params import SelectionParams
from pipeline.experiments.selection.score import ScoredCandidate, ScoredRequest
from pipeline.llm.keys import canonical_json
from pipeline.llm.project_files import validation_problem

DESIGN = "selection"
SELECTED = "selected"


class _Ranked(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    candidate: str
    weighted: float


class _Selection(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    picks: list[str]
    ranking: list[_Ranked]


class _Picked(BaseModel):
    """What the diff reads of a picks line: the request, its picks and its weighted scores."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    request: str
    selection: _Selection


def _picks(run: RunFiles) -> dict[str, _Picked]:
    path = run.path(PICKS)
    if not path.is_file():
        return {}
    found: dict[str, _Picked] = {}
    for number, record in enumerate(read_records(path), start=1):
        try:
            picked = _Picked.model_validate(record)
        except ValidationError as exc:
            raise InputError(
                str(path), number, f"not a picks record ({exc.errors()[0]['msg']})", "re-run select_pick"
            ) from None
        found[picked.request] = picked
    return found


def _criteria(scored: ScoredRequest, candidate: ScoredCandidate, item: str) -> Iterator[Judgement]:
    shown = text_id(
        canonical_json({"request": scored.request.model_dump(mode="json"), **candidate.entry.record()})
    )
    for name, criterion in sorted(scored.framework.criteria.items()):
        if criterion.source != "judge":
            continue
        score, failed = candidate.scores.get(name), candidate.failed.get(name)
        keys = score.call_keys if score is not None else failed.call_keys if failed is not None else ()
        rating = None if score is None else score.rating
        samples = () if score is None else score.samples
        yield Judgement(DESIGN, item, 0, name, rating, None, keys, shown, samples=samples)


def _selected(scored: ScoredRequest, candidate: ScoredCandidate, item: str, picked: _Picked) -> Judgement:
    weighted = {r.candidate: r.weighted for r in picked.selection.ranking}
    keys = tuple(key for name in sorted(candidate.scores) for key in candidate.scores[name].call_keys)
    return Judgement(
        DESIGN,
        item,
        0,
        SELECTED,
        weighted.get(candidate.id),
        candidate.id in picked.selection.picks,
        keys,
        _pool_id(scored),
    )


def _pool_id(scored: ScoredRequest) -> str:
    """An id of the ratings the request's picks were made from (not of their calls' keys, which
    name the model: the same ratings from another model are the same input to the selection)."""
    ratings = [
        {"id": c.id, "scores": {n: s.score for n, s in c.scores.items()}, "failed": sorted(c.failed)}
        for c in scored.pool
    ]
    return text_id(canonical_json(ratings))


def _scored(path: Path) -> Iterator[ScoredRequest]:
    for number, record in enumerate(read_records(path), start=1):
        try:
            yield ScoredRequest.from_record(record)
        except (KeyError, TypeError, ValidationError) as exc:
            raise InputError(
                str(path), number, f"not a scores record ({_why(path, exc)})", "re-run select_score"
            ) from None


def judgements(params: SelectionParams, run: RunFiles) -> Iterator[Judgement]:
    path = run.path(SCORES)
    if not path.is_file():
        return
    picks = _picks(run)
    for scored in _scored(path):
        picked = picks.get(scored.request.id)
        for candidate in scored.pool:
            item = f"{scored.request.id}/{candidate.id}"
            yield from _criteria(scored, candidate, item)
            if picked is not None:
                yield _selected(scored, candidate, item, picked)


def _why(path: Path, exc: Exception) -> str:
    """What is wrong with a scores record, quoting its values only from a file inside the project."""
    return validation_problem(path, exc) if isinstance(exc, ValidationError) else repr(exc)
