"""The judge: one verbatim prompt per metric; an unreadable score is re-asked with a format
reminder (bounded), then recorded unscored. A score is only ever what the judge wrote."""

from __future__ import annotations

from pipeline.data.transcripts import Transcript
from pipeline.errors import ReplayMissError
from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.judges.rubric.prompts import SCORE_REMINDER
from pipeline.judges.rubric.results import MetricJudgement
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.judges.scores import DecimalPolicy, Scale, ScoreReading, extract_score
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext, ChatRequest, Message, Options

SCALE = Scale(1, 5)


def read_score(text: str, metric: str, decimals: DecimalPolicy = "unscored") -> ScoreReading:
    """The judge's score for one metric; "Completeness: 2" counts, as a verdict labelled by the metric."""
    return extract_score(text, SCALE, labels=(metric,), decimals=decimals)


def judge_prompt(metric: str, transcript_text: str, assessment_text: str) -> str:
    # str.replace, not format: a transcript or an assessment may contain braces.
    template = JUDGE_PROMPTS[metric]
    return template.replace("{transcript}", transcript_text).replace("{qualitative_output}", assessment_text)


def judge_metric(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metric: str,
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> MetricJudgement:
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
