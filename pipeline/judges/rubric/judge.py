"""The judge: one verbatim prompt per metric; an unreadable score is re-asked with a format
reminder (bounded), then recorded unscored. A score is only ever what the judge wrote.

judge.output picks the protocol: `text`, the paper's (a free reply, the score read by
pipeline.judges.scores), or `json`, the same rubric with the reply constrained by the backend to
{explanation, score} (pipeline.llm.structured), which a small model can follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, StringConstraints, create_model

from pipeline.judges.call_reading import CallReading, of_judgement, of_score
from pipeline.judges.judgement import Judgement, from_structured
from pipeline.judges.likert import LIKERT_MAX, LIKERT_MIN, LikertScore
from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.judges.rubric.prompts import JSON_JUDGE_FORMAT, SCORE_REMINDER
from pipeline.judges.rubric.results import MetricJudgement
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.judges.samples import combine, sample_options
from pipeline.judges.scores import DecimalPolicy, Scale, ScoreReading, extract_score
from pipeline.llm.records import CallRecord
from pipeline.llm.structured import StructuredResult, ask_structured, read_attempt
from pipeline.llm.types import CallContext, ChatRequest, Message, Options

if TYPE_CHECKING:  # named only: the report reads replies (reply_reader) without a session or the data
    from pipeline.data.transcripts import Transcript
    from pipeline.llm.session import LLMSession

SCALE = Scale(LIKERT_MIN, LIKERT_MAX)


def read_score(text: str, metric: str, decimals: DecimalPolicy = "unscored") -> ScoreReading:
    """The judge's score for one metric; "Completeness: 2" counts, as a verdict labelled by the metric,
    and a reply that rates several metrics is read for this one only."""
    return extract_score(text, SCALE, labels=(metric,), decimals=decimals, metric=metric)


ReplyReader = Callable[[CallRecord, str], CallReading]


def reply_reader(settings: JudgeSettings) -> ReplyReader:
    """(a judge call's record, its metric) -> the reading the judge stage made of its reply under these
    settings: the one way a judge reply is read, by the report and the audit alike, so that neither
    can read a reply otherwise than the numbers were made from. A free reply is read by the extractor
    (the metric's label and line, the decimal policy), one asked under a schema (judge.output: json,
    the request carries its `format`) is parsed and validated as the stage did (rubric_judgement of
    pipeline.llm.structured.read_attempt); a prompt refused as too long is `too_long` either way."""
    # Read the protocol from the request, not judge.output: a call asked before the setting changed
    # was read in the protocol it was asked in.
    return lambda record, metric: _reading(record, metric, settings)


def _reading(record: CallRecord, metric: str, settings: JudgeSettings) -> CallReading:
    if record.request.format is not None:
        judgement = rubric_judgement(read_attempt(record, rubric_reply_model(settings.explanation_chars)))
        distribution = judgement.distributions.get("score")
        weighted = {} if distribution is None else {"score": distribution.expected}
        return of_judgement(judgement, judgement.value, weighted=weighted)
    if (refused := record.reply.too_long) is not None:
        return CallReading(None, "too_long", error=refused)  # as RubricJudge._free_text: not read
    # read_score looked up at each call, not bound now: a bench swaps it to compare extractors.
    return of_score(read_score(record.reply.text, metric, settings.decimal_scores))


def judge_call_reading(
    context: CallContext, record: CallRecord, settings: JudgeSettings
) -> CallReading | None:
    """The reading of one recorded call's reply, if it is a rubric judge call (its context has the
    judge role and the metric it asked for), as reply_reader makes it; None for any other call."""
    metric = context.label("metric")
    if context.label("role") != "judge" or metric is None:
        return None
    return reply_reader(settings)(record, metric)


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


@dataclass(frozen=True)
class RubricSubject:
    """What the paper's judge is asked about: one assessment of one transcript, on one metric."""

    transcript: Transcript
    assessment_text: str
    metric: str
    # The transcript's text as the prompt shows it, when the caller rendered it once for all of an
    # item's metrics (about 30 us a 20 kB transcript each time: issue 33); None: rendered when asked.
    rendered: str | None = field(default=None, compare=False, repr=False)

    @property
    def transcript_text(self) -> str:
        return self.transcript.text if self.rendered is None else self.rendered


def rubric_judgement(result: StructuredResult[RubricReply]) -> Judgement[int | float]:
    """judge.output = json: the judgement of a schema-constrained reply, by the stage and by
    reply_reader alike."""
    return from_structured(result, lambda r: r.score, lambda r: r.explanation, score_fields=("score",))


class RubricJudge:
    """The paper's judge, a Judge[RubricSubject, int | float]: the metric's verbatim rubric, asked in the
    protocol judge.output names, its score read on the 1-5 scale or left unscored."""

    def __init__(self, session: LLMSession, settings: JudgeSettings, options: Options) -> None:
        self.session, self.settings = session, settings
        self.options = options.model_copy(update={"num_predict": settings.num_predict})

    def __call__(self, subject: RubricSubject, context: CallContext) -> Judgement[int | float]:
        if self.settings.output == "json":
            return self._structured(subject, context)
        return self._free_text(subject, context)

    def _structured(self, subject: RubricSubject, context: CallContext) -> Judgement[int | float]:
        """The same rubric, the reply constrained to {explanation, score}; a reply that fails after
        the bounded re-asks is unscored, with its text and the failure's kind."""
        prompt = judge_prompt(subject.metric, subject.transcript_text, subject.assessment_text)
        result = ask_structured(
            self.session,
            (Message(role="user", content=prompt + JSON_JUDGE_FORMAT),),
            rubric_reply_model(self.settings.explanation_chars),
            self.options,
            context.at(metric=subject.metric, role="judge"),
            max_attempts=self.settings.max_attempts,
            logprobs=self.settings.top_logprobs or None,
        )
        return rubric_judgement(result)

    def _free_text(self, subject: RubricSubject, context: CallContext) -> Judgement[int | float]:
        """The paper's protocol: a free reply, its score read by the extractor; an unreadable one
        is re-asked with a format reminder, up to judge.max_attempts calls."""
        prompt = judge_prompt(subject.metric, subject.transcript_text, subject.assessment_text)
        messages: tuple[Message, ...] = (Message(role="user", content=prompt),)
        keys: list[str] = []
        problems: list[str] = []
        for attempt in range(self.settings.max_attempts):
            call = self.session.chat(
                ChatRequest(messages=messages, options=self.options),
                context.at(attempt=attempt, metric=subject.metric, role="judge"),
            )
            keys.append(call.record.key)
            text = call.record.reply.text
            if (refused := call.record.reply.too_long) is not None:
                # Not re-asked: the reminder would make the prompt longer still.
                return Judgement(
                    None, "too_long", text, text, tuple(keys), error=refused, problems=(*problems, "too_long")
                )
            reading = read_score(text, subject.metric, self.settings.decimal_scores)
            if reading.score is not None:
                break
            problems.append(reading.reason)
            reminder = SCORE_REMINDER.format(problem=reading.reason.replace("_", " "))
            messages = (
                *messages,
                Message(role="assistant", content=text),
                Message(role="user", content=reminder),
            )
        return Judgement(reading.score, reading.reason, text, text, tuple(keys), problems=tuple(problems))


def judge_metric(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metric: str,
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> MetricJudgement:
    """One metric judged, as the judge stage records it."""
    judgement = RubricJudge(session, settings, options)(
        RubricSubject(transcript, assessment_text, metric), context
    )
    return MetricJudgement.of(metric, judgement)


def judge_all(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metrics: tuple[str, ...],
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> dict[str, MetricJudgement]:
    """Every metric judged, side by side: they do not depend on each other, so the item does not
    wait for one metric's reply (or re-ask) before asking the next (a replay, with no server to
    wait for, serves them in turn: LLMSession.calls_at_once); a replay miss in one does not stop
    the others, so replay names every missing call."""
    if settings.samples > 1:
        return _judge_all_sampled(session, transcript, assessment_text, metrics, settings, options, context)
    from pipeline.llm.scheduling import side_by_side  # (a judge stage, which depends on pipeline/llm whole)

    judge = RubricJudge(session, settings, options)
    text = transcript.text

    def one(metric: str) -> Callable[[], MetricJudgement]:
        subject = RubricSubject(transcript, assessment_text, metric, text)
        return lambda: MetricJudgement.of(metric, judge(subject, context))

    judged = side_by_side([one(m) for m in metrics], at_once=session.calls_at_once)
    return dict(zip(metrics, judged, strict=True))


def _judge_all_sampled(
    session: LLMSession,
    transcript: Transcript,
    assessment_text: str,
    metrics: tuple[str, ...],
    settings: JudgeSettings,
    options: Options,
    context: CallContext,
) -> dict[str, MetricJudgement]:
    """judge.samples > 1: every metric asked once per sample, each sample with its own seed and
    recorded under its own `sample` label; the samples' scores combined (pipeline.judges.samples)."""
    from pipeline.llm.scheduling import side_by_side

    judges = [RubricJudge(session, settings, sample_options(options, i)) for i in range(settings.samples)]
    text = transcript.text
    asks = [
        (metric, i, RubricSubject(transcript, assessment_text, metric, text))
        for metric in metrics
        for i in range(settings.samples)
    ]

    def one(metric: str, i: int, subject: RubricSubject) -> Callable[[], MetricJudgement]:
        return lambda: MetricJudgement.of(metric, judges[i](subject, context.at(sample=str(i))))

    judged = side_by_side([one(*ask) for ask in asks], at_once=session.calls_at_once)
    out: dict[str, MetricJudgement] = {}
    for index, metric in enumerate(metrics):
        samples = judged[index * settings.samples : (index + 1) * settings.samples]
        scores = tuple(s.score for s in samples)
        first = samples[0]
        out[metric] = first.model_copy(
            update={
                "score": combine(scores, settings.combine),
                "samples": scores,
                "call_keys": tuple(key for s in samples for key in s.call_keys),
            }
        )
    return out
