"""The evaluator (seed 004, section 4): issues, a one-sentence hint, quality and confidence, under
schema-constrained decoding.

The seed asks for quality and confidence as floats 0-1. A small model writes a whole number on a
short scale far more reliably than a calibrated float, and a better one after its reasons, so the
schema (pipeline.judges.quality.results.EvaluationReply) asks for the issues and the hint first, then
two grades 1-5, which we map to 0-1 (pipeline.judges.likert.to_unit): 1 -> 0.0, 2 -> 0.25,
3 -> 0.5, 4 -> 0.75, 5 -> 1.0. The seed's threshold 0.4 then regenerates grades 1 and 2 ("wrong or
unsupported", "mostly wrong"). A reply that does not validate after the re-asks is recorded as
unscored with the problem, never given a default grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.data.rag_rows import RagRow
from pipeline.judges.call_reading import CallReading, of_judgement
from pipeline.judges.judgement import Judgement, from_structured
from pipeline.judges.likert import to_unit
from pipeline.judges.quality.passages import passages_block
from pipeline.judges.quality.results import Answer, Calls, EvaluatedAnswer, EvaluationReply
from pipeline.judges.quality.settings import EvaluateSettings
from pipeline.judges.samples import combine, sample_options
from pipeline.llm.latency import TimedCalls
from pipeline.llm.records import CallRecord
from pipeline.llm.structured import ChatSession, StructuredResult, ask_structured, read_attempt
from pipeline.llm.types import CallContext, Message, Options

EVALUATE_SYSTEM = """\
You are a quality evaluator for answers to questions about a software product's documentation.

Given the user's question, the passages that were retrieved for it, and the assistant's answer,
score the answer and say how to improve it:

1. issues: what is wrong with the answer (at most three short items; an empty list if nothing is).
2. improvement_hint: one sentence telling the writer how to improve the answer.
3. quality_score (1 to 5): how well the answer answers the question using only the passages.
   1 = wrong, or not supported by the passages; 2 = mostly wrong or off the question;
   3 = partly right; 4 = right with small gaps; 5 = fully right and supported by the passages.
4. confidence_score (1 to 5): how confident you are in your assessment.

Reply with only the JSON object."""

EVALUATE_USER = """\
QUESTION:
{question}

PASSAGES:
{passages}

ANSWER:
{answer}"""


@dataclass(frozen=True)
class AnswerToEvaluate:
    row: RagRow  # the question and its retrieved passages
    answer: Answer


class QualityEvaluator:
    """The evaluator, a Judge[AnswerToEvaluate, EvaluationReply]: issues, hint and the two grades
    under the reply's schema, re-asked with the problem named up to evaluate.max_attempts calls."""

    def __init__(self, session: ChatSession, settings: EvaluateSettings, options: Options) -> None:
        self.session, self.settings = session, settings
        self.options = options.model_copy(update={"num_predict": settings.num_predict})

    def __call__(self, subject: AnswerToEvaluate, context: CallContext) -> Judgement[EvaluationReply]:
        row = subject.row
        user = EVALUATE_USER.format(
            question=row.question, passages=passages_block(row), answer=subject.answer.text
        )
        result = ask_structured(
            self.session,
            (Message(role="system", content=EVALUATE_SYSTEM), Message(role="user", content=user)),
            EvaluationReply,
            self.options,
            context.at(role="evaluate"),
            max_attempts=self.settings.max_attempts,
        )
        return reply_judgement(result)


def reply_judgement(result: StructuredResult[EvaluationReply]) -> Judgement[EvaluationReply]:
    """The judgement of the evaluator's reply, by QualityEvaluator and by call_reading alike."""
    return from_structured(result, lambda reply: reply, lambda reply: "; ".join(reply.issues))


def call_reading(record: CallRecord) -> CallReading:
    """One recorded evaluator call as its stage read it: the quality on 0-1 that the policy compares
    with its threshold (EvaluatedAnswer.quality), the two grades as the model wrote them; or no
    score, with the failure."""
    judgement = reply_judgement(read_attempt(record, EvaluationReply))
    reply = judgement.value
    if reply is None:
        return of_judgement(judgement, None)
    grades = {"quality_score": reply.quality_score, "confidence_score": reply.confidence_score}
    return of_judgement(judgement, to_unit(reply.quality_score), grades)


def evaluate(
    session: TimedCalls,
    row: RagRow,
    answer: Answer,
    settings: EvaluateSettings,
    options: Options,
    context: CallContext,
) -> EvaluatedAnswer:
    """The answer evaluated, as the regeneration loop records it, with each call's duration."""
    if settings.samples > 1:
        return _evaluate_sampled(session, row, answer, settings, options, context)
    judgement = QualityEvaluator(session, settings, options)(AnswerToEvaluate(row, answer), context)
    reply = judgement.value
    grades = (None, None) if reply is None else (reply.quality_score, reply.confidence_score)
    return _evaluated(row, answer, [judgement], session.take(), *grades)


def _unit(grade: int | float | None) -> float | None:
    return None if grade is None else to_unit(grade)


def _evaluate_sampled(
    session: TimedCalls,
    row: RagRow,
    answer: Answer,
    settings: EvaluateSettings,
    options: Options,
    context: CallContext,
) -> EvaluatedAnswer:
    """regen_evaluate.samples > 1: the answer evaluated once per sample, sample i with its own seed
    and recorded under its `sample` label; quality and confidence the samples' grades combined
    (pipeline.judges.samples); unscored only where no sample was."""
    subject = AnswerToEvaluate(row, answer)
    judged = [
        QualityEvaluator(session, settings, sample_options(options, i))(subject, context.at(sample=str(i)))
        for i in range(settings.samples)
    ]
    taken = session.take()
    replies = [j.value for j in judged]
    quality = combine([None if r is None else r.quality_score for r in replies], settings.combine)
    confidence = combine([None if r is None else r.confidence_score for r in replies], settings.combine)
    samples = tuple(None if r is None else to_unit(r.quality_score) for r in replies)
    return _evaluated(row, answer, judged, taken, quality, confidence, samples)


def _evaluated(
    row: RagRow,
    answer: Answer,
    judged: Sequence[Judgement[EvaluationReply]],
    taken: tuple[tuple[str, ...], tuple[float | None, ...]],
    quality: int | float | None,
    confidence: int | float | None,
    samples: tuple[float | None, ...] | None = None,
) -> EvaluatedAnswer:
    """The evaluation as written: the first usable reply shown, else the first sample's failure;
    the grades on 0-1; the calls `taken` from the session (their keys and durations)."""
    usable = next((j.value for j in judged if j.value is not None), None)
    first = judged[0]
    keys, seconds = taken
    return EvaluatedAnswer(
        item=row.id,
        answer=answer,
        evaluation=usable,
        failure=None if usable is not None else f"{first.reading}: {first.error}",
        quality=_unit(quality),
        confidence=_unit(confidence),
        calls=Calls(keys=keys, seconds=seconds),
        samples=samples,
    )
