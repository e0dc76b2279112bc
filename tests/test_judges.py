"""One judge vocabulary (pipeline.judges.judgement): the judge of each design is a Judge, and what
it says comes back as a Judgement, read the same way whichever judge it was: a value, or no value
with the reason, the reply as written and every call; never a default."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline.data.catalog import load_catalog
from pipeline.data.listening_requests import Criterion, ListeningRequest
from pipeline.data.rag_rows import RagRow
from pipeline.data.summeval import Summary
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.selection.judging import (
    CandidateOnCriterion,
    CandidatePair,
    CriterionJudge,
    PairwiseJudge,
)
from pipeline.experiments.summeval.judge import SummaryOnDimension, SummEvalJudge
from pipeline.experiments.summeval.params import SummEvalSettings
from pipeline.judges.judgement import Judge, Judgement
from pipeline.judges.quality.evaluator import AnswerToEvaluate, QualityEvaluator
from pipeline.judges.quality.results import Answer, EvaluationReply
from pipeline.judges.quality.settings import EvaluateSettings
from pipeline.judges.rubric.judge import RubricJudge, RubricSubject
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.judges.structured.dimensions import Dimension, Dimensions, DimensionsReply
from pipeline.judges.structured.judge import DimensionsJudge
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, Options
from tests.conftest import ROOT
from tests.helpers import make_session

CONTEXT = CallContext(stage="judge", item="x", step=0)
PARAMS = PaperParams.model_validate({"data": {"transcripts": str(ROOT / "data/demo")}})
TRANSCRIPT = load_transcripts(PARAMS.data)[0]
TRACKS = load_catalog(ROOT / "data/selection/catalog_fictional.csv")[:2]
REQUEST = ListeningRequest(id="r1", text="calm music for reading")
DIMENSIONS = Dimensions((Dimension(name="accuracy", description="supported by the passages"),))
ROW = RagRow(id="q1", question="Which port?", answer="7070.", contexts=("It listens on 7070.",))
SUMMARY = Summary(document="d1", system="M1", text="A short summary.", expert=(), crowd=())


@dataclass(frozen=True)
class Case:
    """A judge, what it is asked, a reply it can read and the value read from it."""

    make: Callable[[LLMSession], Judge[Any, Any]]
    subject: Any
    readable: str
    value: Any
    unreadable_reading: str = "invalid"  # a structured reply that does not validate


def _typed_judges(session: LLMSession) -> list[object]:
    """Each judge, typed as the Judge it is: mypy checks that every one satisfies the protocol."""
    rubric: Judge[RubricSubject, int | float] = RubricJudge(session, JudgeSettings(), Options())
    dimensions: Judge[Sequence[Message], DimensionsReply] = DimensionsJudge(session, DIMENSIONS, Options())
    quality: Judge[AnswerToEvaluate, EvaluationReply] = QualityEvaluator(
        session, EvaluateSettings(), Options()
    )
    rating: Judge[CandidateOnCriterion, int] = CriterionJudge(session, Options(), 2)
    pairwise: Judge[CandidatePair, str] = PairwiseJudge(session, Options(), 2)
    summeval: Judge[SummaryOnDimension, int] = SummEvalJudge(session, SummEvalSettings(), Options())
    return [rubric, dimensions, quality, rating, pairwise, summeval]


CASES = {
    "rubric, the paper's text protocol": Case(
        lambda s: RubricJudge(s, JudgeSettings(max_attempts=2), Options()),
        RubricSubject(TRANSCRIPT, "<assessment>...</assessment>", "coherence"),
        "Explanation: consistent.\nScore: 4",
        4,
        unreadable_reading="no_score",
    ),
    "rubric, schema-constrained": Case(
        lambda s: RubricJudge(s, JudgeSettings(output="json", max_attempts=2), Options()),
        RubricSubject(TRANSCRIPT, "<assessment>...</assessment>", "coherence"),
        json.dumps({"explanation": "consistent", "score": 4}),
        4,
    ),
    "structured dimensions (RAG)": Case(
        lambda s: DimensionsJudge(s, DIMENSIONS, Options()),
        (Message(role="user", content="Judge the answer."),),
        json.dumps({"reasoning": "consistent", "accuracy": 4, "confidence": 3}),
        {"reasoning": "consistent", "accuracy": 4, "confidence": 3},
    ),
    "answer quality (regeneration)": Case(
        lambda s: QualityEvaluator(s, EvaluateSettings(), Options()),
        AnswerToEvaluate(ROW, Answer(item="q1", text="7070.")),
        json.dumps({"issues": [], "improvement_hint": "cite it", "quality_score": 4, "confidence_score": 3}),
        {"issues": [], "improvement_hint": "cite it", "quality_score": 4, "confidence_score": 3},
    ),
    "criterion rating (selection)": Case(
        lambda s: CriterionJudge(s, Options(), 2),
        CandidateOnCriterion(REQUEST, "calm", Criterion(description="is calm", weight=1.0), TRACKS[0]),
        json.dumps({"reason": "quiet", "rating": 4}),
        4,
    ),
    "pairwise (selection)": Case(
        lambda s: PairwiseJudge(s, Options(), 2),
        CandidatePair(REQUEST, TRACKS[0], TRACKS[1]),
        json.dumps({"reason": "quieter", "better": "B"}),
        TRACKS[1].track_id,  # B was shown second: the value is the track, not the letter
    ),
    "calibration (SummEval)": Case(
        lambda s: SummEvalJudge(s, SummEvalSettings(top_logprobs=1), Options()),
        SummaryOnDimension(SUMMARY, "An article.", "coherence"),
        json.dumps({"score": 4}),
        4,
    ),
}


def _as_written(text: str) -> Callable[[ChatRequest], ChatReply]:
    # A ChatReply is taken as is by the fake backend, not constrained to the request's schema.
    return lambda request: ChatReply(text=text, done_reason="stop")


def _plain(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_readable_reply_is_a_judgement_with_its_value(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    session, fake = make_session(tmp_path, responder=_as_written(case.readable))
    judgement = case.make(session)(case.subject, CONTEXT)
    assert isinstance(judgement, Judgement) and judgement.scored
    assert _plain(judgement.value) == case.value
    assert judgement.text == case.readable and judgement.problems == () and judgement.error is None
    assert judgement.attempts == 1 == len(fake.calls)
    assert judgement.call_keys == tuple(call.record.key for call in session.calls)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_unreadable_reply_is_unscored_never_a_default(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    session, fake = make_session(tmp_path, responder=_as_written("I think it is fine."))
    judgement = case.make(session)(case.subject, CONTEXT)
    assert isinstance(judgement, Judgement) and not judgement.scored and judgement.value is None
    assert judgement.reading == case.unreadable_reading
    assert judgement.text == judgement.explanation == "I think it is fine."
    assert judgement.attempts == 2 == len(fake.calls)  # asked, then re-asked once with the problem
    assert judgement.problems == (case.unreadable_reading,) * 2
    assert judgement.distributions == {}


def test_every_judge_satisfies_the_protocol(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    assert all(callable(judge) for judge in _typed_judges(session))
