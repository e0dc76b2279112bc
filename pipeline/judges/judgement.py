"""The judges' one vocabulary: a Judge, and the Judgement it returns.

    Judge[S, V]      a protocol, `judge(subject, context) -> Judgement[V]`: one question about
                     one subject (an S), asked with the judge's bounded re-asks. The judge holds
                     its session, settings and options; the caller says only what to judge and
                     where in the experiment the calls belong.
    Judgement[V]     what the judge said: the value it gave (a LikertScore, a reply model, the
                     candidate it preferred), or None when no readable value came after every
                     re-ask, never a default; how the value was read; the judge's reasons; its
                     last reply as written; every call's key; and, where the backend gave
                     log-probabilities, G-Eval's distribution of each score it wrote.

The judges: the paper's rubric judge (pipeline.judges.rubric.judge.RubricJudge), the structured
judge of any dimensions (structured.judge.DimensionsJudge), the answer-quality evaluator
(quality.evaluator.QualityEvaluator), and in their designs' folders the selection's criterion and
pairwise judges and the SummEval (calibration) judge. Each design writes a judgement in a record of
its own shape (MetricJudgement, RagJudgement, SummEvalJudgement, ...), built from the Judgement: a
new design starts from a Judge, and handles an unscored reply once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from pipeline.judges.geval import ScoreDistribution, field_distribution
from pipeline.llm.structured import Structured, StructuredFailure
from pipeline.llm.types import CallContext

V = TypeVar("V")
Subject = TypeVar("Subject", contravariant=True)
R = TypeVar("R", bound=BaseModel)

JSON_READING = "json"  # a reply validated against its schema (pipeline.llm.structured)


@dataclass(frozen=True)
class Judgement(Generic[V]):
    value: V | None  # None: unscored after every re-ask; `reading` says why
    # How the value was read: "json" for a schema-validated reply, an extractor reason for a free
    # reply (pipeline.judges.scores: "labelled", "no_score", ...), or a structured failure's kind.
    reading: str
    explanation: str  # the judge's reasons; unscored, its last reply as written
    text: str  # the last reply, as the model wrote it
    call_keys: tuple[str, ...]  # every call made, first ask first
    error: str | None = None  # unscored: what was wrong with the last reply, where known
    problems: tuple[str, ...] = ()  # the failure kind of every attempt that gave no value
    # Score field -> G-Eval's distribution at its token; empty without log-probabilities.
    distributions: Mapping[str, ScoreDistribution] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        return self.value is not None

    @property
    def attempts(self) -> int:
        return len(self.call_keys)


class Judge(Protocol[Subject, V]):
    # Positional: each judge names its subject for what it is (an assessment, the messages, a pair).
    def __call__(self, subject: Subject, context: CallContext, /) -> Judgement[V]: ...


def from_structured(
    result: Structured[R] | StructuredFailure,
    value: Callable[[R], V],
    explanation: Callable[[R], str],
    score_fields: Sequence[str] = (),
) -> Judgement[V]:
    """The judgement of a schema-constrained reply: validated, the value and reasons the judge's
    reply model holds, with the G-Eval distribution of each of `score_fields` where the reply has
    log-probabilities; not validated, unscored with the failure's kind, error and text."""
    problems = tuple(problem.kind for problem in result.problems)
    if isinstance(result, StructuredFailure):
        return Judgement(
            value=None,
            reading=result.kind,
            explanation=result.text,
            text=result.text,
            call_keys=result.keys,
            error=result.error,
            problems=problems,
        )
    distributions = {}
    for name in score_fields:
        distribution = field_distribution(result.text, result.reply.logprobs, name)
        if distribution is not None:
            distributions[name] = distribution
    return Judgement(
        value=value(result.value),
        reading=JSON_READING,
        explanation=explanation(result.value),
        text=result.text,
        call_keys=result.keys,
        problems=problems,
        distributions=distributions,
    )
