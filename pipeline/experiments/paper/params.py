"""The paper experiment's sections of params.yaml, beside the engine's `llm` and `cache`.

A stage of this design validates only these sections: another design's sections, or a change to
their defaults, cannot touch it (pipeline.experiments.params checks the whole file).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from pipeline.data.settings import DataSettings
from pipeline.experiments.paper.settings import AggregateSettings
from pipeline.judges.rubric.settings import AssessSettings, JudgeSettings
from pipeline.llm.settings import EngineSettings, load_settings
from pipeline.loops.settings import RefineSettings


class PaperParams(EngineSettings):
    data: DataSettings = Field(default_factory=DataSettings)
    assess: AssessSettings = Field(default_factory=AssessSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    refine: RefineSettings = Field(default_factory=RefineSettings)
    aggregate: AggregateSettings = Field(default_factory=AggregateSettings)


def load_paper_params(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> PaperParams:
    return load_settings(PaperParams, path, environ=environ, only_its_sections=True)
