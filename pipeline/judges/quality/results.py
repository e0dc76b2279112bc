"""What the generator and the evaluator produce, per item and attempt, with each call's duration."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipeline.data.jsonl import Result
from pipeline.judges.likert import LikertScore
from pipeline.judges.samples import SampledResult
from pipeline.llm.latency import total_seconds


class EvaluationReply(BaseModel):
    """The evaluator's reply, as the schema asks for it (pipeline.judges.quality.evaluator)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    issues: list[str] = Field(max_length=3, description="what is wrong with the answer; empty if nothing")
    improvement_hint: str = Field(description="one sentence telling the writer how to improve the answer")
    quality_score: LikertScore = Field(description="1 wrong or unsupported ... 5 fully correct and supported")
    confidence_score: LikertScore = Field(description="1 a guess ... 5 certain")


class Calls(Result):
    """The calls one part made, first first: their keys and measured durations (seconds; None for
    a call recorded before durations were kept)."""

    keys: tuple[str, ...] = ()
    seconds: tuple[float | None, ...] = ()

    @property
    def count(self) -> int:
        return len(self.keys)

    @property
    def total_s(self) -> float | None:
        return total_seconds(self.seconds)


class Answer(Result):
    item: str
    attempt: int = 0  # 0: the original; n: the n-th regeneration
    text: str
    truncated: bool = False  # cut by num_predict: kept as written, and evaluated as such
    calls: Calls = Field(default_factory=Calls)
    instruction: str | None = None  # the feedback a regeneration was asked to address


class EvaluatedAnswer(SampledResult):
    item: str
    answer: Answer
    evaluation: EvaluationReply | None  # None: no valid reply after the re-asks (see failure)
    failure: str | None = None  # "kind: error" of the last attempt when evaluation is None
    quality: float | None  # quality_score on 0-1; None when unscored
    confidence: float | None
    calls: Calls = Field(default_factory=Calls)
    # regen_evaluate.samples > 1: each sample's quality (0-1), sample 0 first; quality and confidence
    # combine the samples' grades, the reply shown (issues, hint) is the first usable sample's. Left
    # out of the file while None, so a run with one sample writes what it wrote before.
    samples: tuple[float | None, ...] | None = None

    @property
    def call_count(self) -> int:
        return self.answer.calls.count + self.calls.count

    @property
    def seconds(self) -> float | None:
        return total_seconds([self.answer.calls.total_s, self.calls.total_s])

    @property
    def call_seconds(self) -> tuple[float | None, ...]:
        return self.answer.calls.seconds + self.calls.seconds
