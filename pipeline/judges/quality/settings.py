"""The generator's and the evaluator's sections of params.yaml: `regen_generate`, `regen_evaluate`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.llm.settings import OutParam, PathParam, Section


class GenerateSettings(Section):
    rows: PathParam = "data/rag-demo/rows.jsonl"
    limit: int | None = Field(None, ge=1)
    # generate: the model answers each question from its passages; given: the row's own answer is
    # the original (no call), so the rows' human labels judge exactly what the evaluator scored.
    answers: Literal["generate", "given"] = "generate"
    num_predict: int = Field(128, ge=1)
    out: OutParam = "outputs/regen/answers.jsonl"


class EvaluateSettings(Section):
    num_predict: int = Field(192, ge=1)
    max_attempts: int = Field(2, ge=1)  # first ask + re-asks with the validation problem
    # judge.samples for the evaluator (pipeline.judges.samples): each answer evaluated N times, sample
    # i with its own seed; its grades combined. 1: asked once, the request exactly as without samples.
    samples: int = Field(1, ge=1, le=100)
    combine: Literal["mean", "majority"] = "mean"
    out: OutParam = "outputs/regen/evaluated.jsonl"
