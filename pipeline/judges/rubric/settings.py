"""The paper's assessor and judge sections of params.yaml: `assess` and `judge`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from pipeline.llm.params_errors import check_names
from pipeline.llm.settings import OutParam, Section

METRICS = ("coherence", "completeness", "specificity", "accuracy")


class AssessSettings(Section):
    num_predict: int = Field(700, ge=1)
    max_attempts: int = Field(3, ge=1)
    verify_quotes: bool = False
    delimit_transcript: bool = False
    # text: the paper's XML sections in a free reply; json: the same sections as a JSON object the
    # backend constrains, written back as the XML sections the judge reads. section_chars bounds
    # each section in the schema (null: unbounded), so that a small model cannot run to
    # num_predict inside one string.
    output: Literal["text", "json"] = "text"
    section_chars: int | None = Field(None, ge=20)
    out: OutParam = "outputs/paper/assessments.jsonl"


class JudgeSettings(Section):
    metrics: tuple[str, ...] = Field(METRICS, min_length=1)
    num_predict: int = Field(256, ge=1)
    max_attempts: int = Field(3, ge=1)
    # A decimal on the 1-5 scale ("Score: 3.5/5"), read as what the reply states: unscored and re-asked
    # (the default), rounded halves up (`decimal_rounded`), or kept as written (`decimal_kept`, 3.5).
    # The metrics count each reading either way. pipeline.judges.scores.decimals.DecimalPolicy, spelled
    # out so that the assess stage, which reads this module, does not depend on the extractor (a test
    # checks that the two agree).
    decimal_scores: Literal["unscored", "round", "keep"] = "unscored"
    # text: the paper's protocol (a free reply, the score read by pipeline.judges.scores);
    # json: the same rubric, the reply constrained to {explanation, score} by the backend.
    output: Literal["text", "json"] = "text"
    explanation_chars: int | None = Field(None, ge=20)  # json: the explanation's bound, as section_chars
    # json: ask for this many alternatives per generated token, to record the probability of each
    # score and the probability-weighted score (G-Eval); 0 asks for none.
    top_logprobs: int = Field(0, ge=0, le=20)
    # Each judgement asked this many times, sample i with its own seed (pipeline.judges.samples);
    # 1: asked once, the request exactly as without samples. combine: the judgement used downstream.
    samples: int = Field(1, ge=1, le=100)
    combine: Literal["mean", "majority"] = "mean"
    out: OutParam = "outputs/paper/judgements.jsonl"

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_names(value, METRICS, "metric")  # the rubric has a prompt for these four only
        return value
