"""One structured judgement: ask for the reply model, map its 1-5 scores to 0-1, weight them, and
read how sure the model was from its token log-probabilities where the backend gave them.

A reply that never validates (after the bounded re-asks of pipeline.llm.structured) is
UnscoredDimensions, carrying the model's text and the kind of failure; nothing is filled in for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.judges.call_reading import CallReading, of_judgement
from pipeline.judges.geval import ScoreDistribution
from pipeline.judges.judgement import Judgement, from_structured
from pipeline.judges.likert import to_unit
from pipeline.judges.samples import combine
from pipeline.judges.structured.dimensions import (
    CONFIDENCE_FIELD,
    REASONING_FIELD,
    Dimensions,
    DimensionsReply,
    reply_model,
)
from pipeline.llm.records import CallRecord
from pipeline.llm.structured import ChatSession, StructuredResult, ask_structured, read_attempt
from pipeline.llm.types import CallContext, Message, Options
from pipeline.numbers import fsum

DIGITS = 6  # outputs are rounded so that they read well; a replay computes the same floats anyway


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LogprobScore(_Out):
    """What the token log-probabilities say about one score (G-Eval's weighting)."""

    chosen_probability: float  # probability of the score written, among the allowed scores
    expected: float  # sum of score * probability over 1..5
    expected_unit: float  # the same on 0..1
    mass: float  # probability on allowed scores before renormalising (1.0 under a grammar)
    probabilities: dict[str, float]  # "1".."5" -> probability


class DimensionScore(_Out):
    score: int  # 1..5 as the model wrote it
    value: float  # on 0..1
    logprob: LogprobScore | None = None


class ScoredDimensions(_Out):
    status: Literal["scored"] = "scored"
    reasoning: str
    dimensions: dict[str, DimensionScore]
    overall: float  # our weighted mean of the 0..1 values, weights from params
    overall_simple: float  # the unweighted mean, kept to compare the two
    confidence: int  # self-reported, 1..5
    confidence_value: float  # the same on 0..1
    # Mean over dimensions of the chosen score's probability; None without log-probabilities.
    logprob_confidence: float | None = None
    overall_expected: float | None = None  # weighted mean of the expected values on 0..1
    attempts: int
    problems: tuple[str, ...] = ()  # the failure kinds of attempts before the one that validated
    call_keys: tuple[str, ...]

    @classmethod
    def of(
        cls,
        reasoning: str,
        scores: dict[str, DimensionScore],
        confidence: int,
        dimensions: Dimensions,
        *,
        attempts: int,
        problems: tuple[str, ...],
        call_keys: tuple[str, ...],
        logprob_confidence: float | None = None,
        overall_expected: float | None = None,
    ) -> ScoredDimensions:
        """The scores with what we derive from them: the overall (the weighted and the unweighted
        mean of the 0..1 values) and the confidence on 0..1."""
        values = {name: s.value for name, s in scores.items()}
        return cls(
            reasoning=reasoning,
            dimensions=scores,
            overall=round(dimensions.weighted_mean(values), DIGITS),
            overall_simple=round(dimensions.simple_mean(values), DIGITS),
            confidence=confidence,
            confidence_value=to_unit(confidence),
            logprob_confidence=logprob_confidence,
            overall_expected=overall_expected,
            attempts=attempts,
            problems=problems,
            call_keys=call_keys,
        )


class UnscoredDimensions(_Out):
    status: Literal["failed"] = "failed"
    kind: str  # invalid | truncated | runaway_whitespace (the last attempt's)
    error: str
    text: str  # the last reply, as the model wrote it
    attempts: int
    problems: tuple[str, ...]
    call_keys: tuple[str, ...]


DimensionsJudgement = Annotated[ScoredDimensions | UnscoredDimensions, Field(discriminator="status")]


def instructions(dimensions: Dimensions, subject: str) -> str:
    """The system message: the scale, each dimension described, and the reply's field order."""
    lines = [
        f"You are a strict, careful evaluator of {subject}.",
        "Score each dimension below with an integer from 1 to 5: "
        "1 = very poor, 2 = poor, 3 = acceptable, 4 = good, 5 = excellent.",
        "",
    ]
    lines += [f"- {d.name}: {d.description}" for d in dimensions.items]
    fields = ", ".join(f'"{name}"' for name in (REASONING_FIELD, *dimensions.names, CONFIDENCE_FIELD))
    lines += [
        "",
        f"Reply with one JSON object with the fields {fields}, in that order: first brief reasoning "
        "(two or three sentences), then the scores, then your confidence in them from 1 (unsure) to 5 "
        "(certain).",
    ]
    return "\n".join(lines)


class DimensionsJudge:
    """The structured judge, a Judge[Sequence[Message], DimensionsReply]: the messages (the
    instructions and the material to judge) scored on each dimension under the reply model's
    schema, with each score's G-Eval distribution where log-probabilities are asked for."""

    def __init__(
        self,
        session: ChatSession,
        dimensions: Dimensions,
        options: Options,
        *,
        max_attempts: int = 2,
        logprobs: int | None = None,
    ) -> None:
        self.session, self.dimensions, self.options = session, dimensions, options
        self.max_attempts, self.logprobs = max_attempts, logprobs

    def __call__(self, messages: Sequence[Message], context: CallContext) -> Judgement[DimensionsReply]:
        result = ask_structured(
            self.session,
            messages,
            reply_model(self.dimensions),
            self.options,
            context,
            max_attempts=self.max_attempts,
            logprobs=self.logprobs,
        )
        return reply_judgement(result, self.dimensions)


def reply_judgement(
    result: StructuredResult[DimensionsReply], dimensions: Dimensions
) -> Judgement[DimensionsReply]:
    """The judgement of a reply, by DimensionsJudge and by call_reading alike."""
    return from_structured(
        result, lambda reply: reply, lambda reply: str(getattr(reply, REASONING_FIELD)), dimensions.names
    )


def call_reading(record: CallRecord, dimensions: Dimensions) -> CallReading:
    """One recorded call's reply as the structured judge's stage read it, through the stage's own
    code (reply_judgement, dimensions_judgement): the overall score it wrote, each dimension's score
    and the confidence as the model wrote them, G-Eval's expected score of each dimension where the
    reply had log-probabilities; or no score, with the failure."""
    judgement = reply_judgement(read_attempt(record, reply_model(dimensions)), dimensions)
    recorded = dimensions_judgement(judgement, dimensions)
    if isinstance(recorded, UnscoredDimensions):
        return of_judgement(judgement, None)
    fields: dict[str, int] = {name: s.score for name, s in recorded.dimensions.items()}
    fields[CONFIDENCE_FIELD] = recorded.confidence
    weighted = {name: s.logprob.expected for name, s in recorded.dimensions.items() if s.logprob is not None}
    return of_judgement(judgement, recorded.overall, fields, weighted)


def _logprob_score(distribution: ScoreDistribution | None, score: int) -> LogprobScore | None:
    if distribution is None:
        return None
    return LogprobScore(
        chosen_probability=round(distribution.probabilities.get(score, 0.0), DIGITS),
        expected=round(distribution.expected, DIGITS),
        expected_unit=round(to_unit(distribution.expected), DIGITS),
        mass=round(distribution.mass, DIGITS),
        probabilities={str(v): round(p, DIGITS) for v, p in distribution.probabilities.items()},
    )


def _logprob_summary(
    scores: dict[str, DimensionScore], dimensions: Dimensions
) -> tuple[float | None, float | None]:
    """The mean probability of the scores written, and the weighted mean of the expected scores on
    0..1: only when every dimension has log-probabilities."""
    logprobs = {name: s.logprob for name, s in scores.items() if s.logprob is not None}
    if len(logprobs) != len(scores):
        return None, None
    confidence = fsum(lp.chosen_probability for lp in logprobs.values()) / len(scores)
    expected = dimensions.weighted_mean({name: lp.expected_unit for name, lp in logprobs.items()})
    return round(confidence, DIGITS), round(expected, DIGITS)


def scored_dimensions(
    reply: DimensionsReply, judgement: Judgement[DimensionsReply], dimensions: Dimensions
) -> ScoredDimensions:
    scores: dict[str, DimensionScore] = {}
    for name in dimensions.names:
        score = int(getattr(reply, name))
        logprob = _logprob_score(judgement.distributions.get(name), score)
        scores[name] = DimensionScore(score=score, value=to_unit(score), logprob=logprob)
    logprob_confidence, overall_expected = _logprob_summary(scores, dimensions)
    return ScoredDimensions.of(
        judgement.explanation,
        scores,
        int(getattr(reply, CONFIDENCE_FIELD)),
        dimensions,
        logprob_confidence=logprob_confidence,
        overall_expected=overall_expected,
        attempts=judgement.attempts,
        problems=judgement.problems,
        call_keys=judgement.call_keys,
    )


def dimensions_judgement(
    judgement: Judgement[DimensionsReply], dimensions: Dimensions
) -> DimensionsJudgement:
    """The judgement as the RAG design records it: every number ours, or the failure as it came."""
    if judgement.value is not None:
        return scored_dimensions(judgement.value, judgement, dimensions)
    return UnscoredDimensions(
        kind=judgement.reading,
        error=judgement.error or "",
        text=judgement.text,
        attempts=judgement.attempts,
        problems=judgement.problems,
        call_keys=judgement.call_keys,
    )


def judge(
    session: ChatSession,
    messages: Sequence[Message],
    dimensions: Dimensions,
    options: Options,
    context: CallContext,
    *,
    max_attempts: int = 2,
    logprobs: int | None = None,
) -> DimensionsJudgement:
    """Score `messages` (the system instructions and the material to judge) on `dimensions`."""
    judge = DimensionsJudge(session, dimensions, options, max_attempts=max_attempts, logprobs=logprobs)
    return dimensions_judgement(judge(messages, context), dimensions)


def combined_dimensions(judged: Sequence[DimensionsJudgement], dimensions: Dimensions) -> DimensionsJudgement:
    """rag.samples > 1: the samples' judgements as one, each dimension's score and the confidence
    their majority (pipeline.judges.samples; a whole grade, as one reply writes it), the overall
    recomputed from them, the reasoning the first scored sample's. Unscored samples are left out;
    none scored, sample 0's failure. It rests on every sample's calls; `attempts` is the most any
    sample took (above 1: some sample was asked again). The samples' log-probabilities are not
    combined (each sample's distribution is another draw's), so none are given."""
    keys = tuple(key for j in judged for key in j.call_keys)
    attempts = max(j.attempts for j in judged)
    problems = tuple(p for j in judged for p in j.problems)
    scored = [j for j in judged if isinstance(j, ScoredDimensions)]
    if not scored:
        return judged[0].model_copy(update={"call_keys": keys, "attempts": attempts, "problems": problems})
    scores: dict[str, DimensionScore] = {}
    for name in dimensions.names:
        score = int(combine([j.dimensions[name].score for j in scored], "majority") or 0)
        scores[name] = DimensionScore(score=score, value=to_unit(score))
    return ScoredDimensions.of(
        scored[0].reasoning,
        scores,
        int(combine([j.confidence for j in scored], "majority") or 0),
        dimensions,
        attempts=attempts,
        problems=problems,
        call_keys=keys,
    )


def dimension_samples(
    judged: Sequence[DimensionsJudgement], dimensions: Dimensions
) -> dict[str, tuple[int | None, ...]]:
    """Each dimension's score in each sample, sample 0 first (None: that sample unscored)."""
    return {
        name: tuple(j.dimensions[name].score if isinstance(j, ScoredDimensions) else None for j in judged)
        for name in dimensions.names
    }
