"""The regeneration policy's section of params.yaml: `regenerate` (seed 004)."""

from __future__ import annotations

from pydantic import Field

from pipeline.llm.settings import OutParam, Section


class RegenerateSettings(Section):
    enabled: bool = False  # the seed's evaluate_feedback_enabled: off, the stage makes no call
    threshold: float = Field(0.4, ge=0.0, le=1.0)  # quality below it (0-1) regenerates
    max_regenerations: int = Field(1, ge=0)
    # Per item, over everything the user waits for: the original's generation and evaluation, and
    # every regeneration with its evaluation. null: no limit.
    call_budget: int | None = Field(6, ge=0)
    latency_budget_s: float | None = Field(30.0, ge=0.0)  # the seed's WORKFLOW_TIMEOUT
    unscored_triggers: bool = False  # the seed regenerates only on a score below the threshold
    out: OutParam = "outputs/regen/regenerated.jsonl"
