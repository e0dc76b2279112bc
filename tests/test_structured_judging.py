"""The paper's judge and assessor in structured mode (judge.output / assess.output = json): the same
rubric, the reply constrained to a schema; a reply that still fails is recorded, never defaulted."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.judges.rubric.assessor import REQUIRED_SECTIONS, assess
from pipeline.judges.rubric.judge import judge_metric
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, TokenLogprob, TopLogprob
from tests.conftest import ROOT
from tests.helpers import make_session

PARAMS = PaperParams.model_validate(
    {
        "data": {"transcripts": str(ROOT / "data" / "demo"), "limit": 1},
        "assess": {"output": "json", "max_attempts": 2},
        "judge": {"output": "json", "max_attempts": 2, "top_logprobs": 5},
    }
)
TRANSCRIPT = load_transcripts(PARAMS.data)[0]
CONTEXT = CallContext(stage="judge", item=TRANSCRIPT.item_id, step=0)


def _verdict_reply(request: ChatRequest) -> ChatReply:
    assert isinstance(request.format, dict) and request.format["required"] == ["explanation", "score"]
    assert request.logprobs == 5
    text = '{"explanation": "Consistent throughout.", "score": 4}'
    at = text.index("4")
    tokens = (
        TokenLogprob(token=text[:at], logprob=0.0),
        TokenLogprob(
            token="4",
            logprob=-0.36,
            top=(TopLogprob(token="4", logprob=-0.36), TopLogprob(token="3", logprob=-1.2)),
        ),
        TokenLogprob(token=text[at + 1 :], logprob=0.0),
    )
    return ChatReply(text=text, done_reason="stop", logprobs=tokens)


def test_a_structured_verdict_is_scored_with_its_probabilities(tmp_path: Path) -> None:
    session, fake = make_session(tmp_path, responder=_verdict_reply)
    judged = judge_metric(
        session,
        TRANSCRIPT,
        "<assessment>x</assessment>",
        "coherence",
        PARAMS.judge,
        PARAMS.llm.options,
        CONTEXT,
    )
    assert (judged.score, judged.reading, judged.explanation) == (4, "json", "Consistent throughout.")
    assert judged.score_probabilities is not None and judged.weighted_score is not None
    assert set(judged.score_probabilities) == {"1", "2", "3", "4", "5"}
    assert 3.0 < judged.weighted_score < 4.0  # 4 and 3 only, 4 the likelier
    # The same rubric the text protocol sends, then the shape asked for.
    prompt = fake.calls[0].messages[0].content
    assert "Score from 1-5 solely based on the following criteria" in prompt and prompt.endswith(
        "from 1 to 5>}"
    )


def test_a_verdict_that_never_validates_is_unscored_with_its_text(tmp_path: Path) -> None:
    session, fake = make_session(
        tmp_path, responder=lambda request: ChatReply(text='{"explanation": "', done_reason="length")
    )
    judged = judge_metric(session, TRANSCRIPT, "x", "accuracy", PARAMS.judge, PARAMS.llm.options, CONTEXT)
    assert judged.score is None and judged.reading == "truncated"
    assert judged.explanation == '{"explanation": "' and len(judged.call_keys) == 2 == len(fake.calls)


def _sections(request: ChatRequest, body: str) -> str:
    assert isinstance(request.format, dict)
    assert request.format["required"] == list(REQUIRED_SECTIONS)
    return json.dumps({tag: body for tag in REQUIRED_SECTIONS})


def test_a_structured_assessment_reads_back_as_the_papers_sections(tmp_path: Path) -> None:
    session, _ = make_session(
        tmp_path, stage="assess", responder=lambda r: _sections(r, 'She said "I sleep badly".')
    )
    assessment = assess(session, TRANSCRIPT, PARAMS.assess, PARAMS.llm.options)
    assert assessment.valid and assessment.sections is not None
    assert assessment.text.startswith("<assessment>\nShe said") and "</risk_factors>" in assessment.text


def test_a_structured_assessment_of_punctuation_is_not_valid(tmp_path: Path) -> None:
    # A grammar forces a string, not a meaning: "..." in every section is recorded invalid.
    session, _ = make_session(tmp_path, stage="assess", responder=lambda r: _sections(r, "..."))
    assessment = assess(session, TRANSCRIPT, PARAMS.assess, PARAMS.llm.options)
    assert not assessment.valid and assessment.problem is not None and "empty section" in assessment.problem
