"""What the SummEval judge step writes: one row per summary and dimension, scored or not."""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.judges.likert import LikertScore
from pipeline.judges.samples import SampledResult
from pipeline.llm.structured import FailureKind


class SummEvalReply(BaseModel):
    """The reply the judge must give: the score alone. A reason field would let a small model
    loop to num_predict under the grammar (see pipeline.llm.structured), and G-Eval's weighting
    needs only the score token."""

    score: LikertScore


class SummEvalJudgement(SampledResult):
    item: str  # "<article id>/<system>"
    document: str
    system: str
    dimension: str
    score: int | float | None  # what the judge wrote; None: no valid reply after every attempt
    # G-Eval's weighted score: sum of s * p(s) over 1-5 at the score token, renormalised.
    weighted_score: float | None
    probabilities: dict[str, float] | None  # "1".."5" -> p, renormalised over the scale
    mass: float | None  # the probability on 1-5 before renormalising
    failure: FailureKind | None  # why the row is unscored
    error: str | None
    attempts: int
    text: str  # the last reply as the model wrote it
    # summeval.samples > 1: each sample's score, sample 0 first; `score` combines them (summeval.combine,
    # a float under mean) and `weighted_score` is the samples' mean. Left out of the file while None.
    samples: tuple[int | None, ...] | None = None
