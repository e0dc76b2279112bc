"""The judge: one verbatim prompt per metric; an unreadable score is re-asked with a format
reminder (bounded), then recorded unscored. A score is only ever what the judge wrote.

judge.output picks the protocol: `text`, the paper's (a free reply, the score read by
pipeline.judges.scores), or `json`, the same rubric with the reply constrained by the backend to
{explanation, score} (pipeline.llm.structured), which a small model can follow.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, StringConstraints, create_model

from pipeline.data.transcripts import Transcript
from pipeline.errors import ReplayMissError
from pipeline.judges.geval import field_distribution
from pipeline.judges.likert import LIKERT_MAX, LIKERT_MIN, LikertScore
from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.judges.rubric.prompts import JSON_JUDGE_FORMAT, SCORE_REMINDER
from pipeline.judges.rubric.results import MetricJudgement
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.judges.scores import DecimalPolicy, Scale, ScoreReading, extract_score
from pipeline.llm.session import LLMSession
from pipeline.llm.structured import StructuredFailure, ask_structured
from pipeline.llm.types import CallContext, ChatRequest, Message, Options

SCALE = Scale(LIKERT_MIN, LIKERT_MAX)


def read_score(text: str, metric: str, decimals: DecimalPolicy = "unscored") -> ScoreReading:
    """The judge's score for one metric; "Completeness: 2" counts, as a verdict labelled by the metric."""
    return extract_score(text, SCALE, labels=(metric,), decimals=decimals)


def judge_prompt(metric: str, transcript_text: str, assessment_text: str) -> str:
    # str.replace, not format: a transcript or an assessment may contain braces.
    template = JUDGE_PROMPTS[metric]
    return template.replace("{transcript}", transcript_text).replace("{qualitative_output}", assessment_text)


class RubricReply(BaseModel):
    """judge.output = json: the paper's two parts, explanation first so the score follows it."""

    explanation: str
    score: LikertScore


@lru_cache(maxsize=8)
def rubric_reply_model(max_chars: int | None) -> type[RubricReply]:
    explanation = Annotated[str, StringConstraints(min_length=1, max_length=max_chars)]
    return create_model("RubricReply", __base__=RubricReply, explanation=(explanation, ...))


def judge_metric_json(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metric: str,
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> MetricJudgement:
    """The same rubric, the reply constrained to {explanation, score}; a reply that fails after the
    bounded re-asks is recorded unscored, with its text and the failure's kind."""
    prompt = judge_prompt(metric, transcript.text, assessment_text) + JSON_JUDGE_FORMAT
    result = ask_structured(
        session,
        (Message(role="user", content=prompt),),
        rubric_reply_model(settings.explanation_chars),
        options.model_copy(update={"num_predict": settings.num_predict}),
        context.at(metric=metric, role="judge"),
        max_attempts=settings.max_attempts,
        logprobs=settings.top_logprobs or None,
    )
    if isinstance(result, StructuredFailure):
        return MetricJudgement(
            metric=metric, score=None, reading=result.kind, explanation=result.text, call_keys=result.keys
        )
    distribution = field_distribution(result.text, result.reply.logprobs, "score")
    return MetricJudgement(
        metric=metric,
        score=result.value.score,
        reading="json",
        explanation=result.value.explanation,
        call_keys=result.keys,
        score_probabilities=None
        if distribution is None
        else {str(value): p for value, p in distribution.probabilities.items()},
        weighted_score=None if distribution is None else distribution.expected,
    )


def judge_metric(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metric: str,
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> MetricJudgement:
    if settings.output == "json":
        return judge_metric_json(session, transcript, assessment_text, metric, settings, options, context)
    options = options.model_copy(update={"num_predict": settings.num_predict})
    messages: tuple[Message, ...] = (
        Message(role="user", content=judge_prompt(metric, transcript.text, assessment_text)),
    )
    keys: list[str] = []
    text, reading = "", None
    for attempt in range(settings.max_attempts):
        call = session.chat(
            ChatRequest(messages=messages, options=options),
            context.at(attempt=attempt, metric=metric, role="judge"),
        )
        keys.append(call.record.key)
        text = call.record.reply.text
        reading = read_score(text, metric, settings.decimal_scores)
        if reading.score is not None:
            break
        messages = (
            *messages,
            Message(role="assistant", content=text),
            Message(role="user", content=SCORE_REMINDER.format(problem=reading.reason.replace("_", " "))),
        )
    assert reading is not None
    score = None if reading.score is None else int(reading.score)
    return MetricJudgement(
        metric=metric, score=score, reading=reading.reason, explanation=text, call_keys=tuple(keys)
    )


def judge_all(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metrics: tuple[str, ...],
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> dict[str, MetricJudgement]:
    results: dict[str, MetricJudgement] = {}
    misses: list[ReplayMissError] = []
    for metric in metrics:
        try:
            results[metric] = judge_metric(
                session, transcript, assessment_text, metric, settings, options, context
            )
        except ReplayMissError as miss:
            # The metrics do not depend on each other: go on, so replay names every missing call.
            misses.append(miss)
    if misses:
        raise misses[0]
    return results
