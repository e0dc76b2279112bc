"""The paper's assessor and judge sections of params.yaml: `assess` and `judge`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.llm.settings import Section

METRICS = ("coherence", "completeness", "specificity", "accuracy")


class AssessSettings(Section):
    num_predict: int = 700
    max_attempts: int = Field(3, ge=1)
    verify_quotes: bool = False
    delimit_transcript: bool = False
    out: str = "outputs/assessments.jsonl"


class JudgeSettings(Section):
    metrics: tuple[str, ...] = METRICS
    num_predict: int = 256
    max_attempts: int = Field(3, ge=1)
    # A decimal on the 1-5 scale ("Score: 3.5/5"): unscored and re-asked (the default), or rounded
    # halves up and flagged `decimal_rounded`. Judgements hold integers, so the value itself is not kept.
    decimal_scores: Literal["unscored", "round"] = "unscored"
    # text: the paper's protocol (a free reply, the score read by pipeline.judges.scores);
    # json: the same rubric, the reply constrained to {explanation, score} by the backend.
    output: Literal["text", "json"] = "text"
    out: str = "outputs/judgements.jsonl"
