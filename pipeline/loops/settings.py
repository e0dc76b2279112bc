"""The feedback loop's section of params.yaml: `refine`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.llm.settings import OutParam, Section


class RefineSettings(Section):
    # A score at or below the threshold sends the judge's feedback back (paper: below four -> 3).
    threshold: int = Field(3, ge=0, le=5)
    max_iterations: int = Field(10, ge=0)
    unscored_triggers: bool = True
    previous_assessment: Literal["none", "original", "previous"] = "none"
    rejudge: Literal["low", "all"] = "low"
    keep: Literal["last", "best"] = "last"
    # An iteration whose every judgement comes back unscored ends the item's loop (stop reason
    # all_unscored): more iterations would ask the same judge, which cannot be read, again.
    stop_unscored: bool = True
    # Past this share of the judge stage's judgements unscored, no item is refined (stop reason
    # stage_unscored); 1.0: never (the judge may be answering on another scale; fix that first).
    stop_unscored_share: float = Field(1.0, ge=0, le=1)
    out: OutParam = "outputs/paper/refinement.jsonl"
