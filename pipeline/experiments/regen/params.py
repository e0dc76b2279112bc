"""The regeneration experiment's sections of params.yaml, beside the engine's `llm` and `cache`:
`regen_generate`, `regen_evaluate` (the generator and the evaluator), `regenerate` (the policy)
and `regen_aggregate`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from pipeline.data.rag_rows import RagRow, load_rag_rows
from pipeline.experiments.regen.settings import RegenAggregateSettings
from pipeline.judges.quality.settings import EvaluateSettings, GenerateSettings
from pipeline.llm.settings import EngineSettings, load_settings
from pipeline.loops.regenerate_settings import RegenerateSettings


class RegenParams(EngineSettings):
    regen_generate: GenerateSettings = Field(default_factory=GenerateSettings)
    regen_evaluate: EvaluateSettings = Field(default_factory=EvaluateSettings)
    regenerate: RegenerateSettings = Field(default_factory=RegenerateSettings)
    regen_aggregate: RegenAggregateSettings = Field(default_factory=RegenAggregateSettings)


def load_regen_params(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> RegenParams:
    return load_settings(RegenParams, path, environ=environ, only_its_sections=True)


def load_rows(params: RegenParams, root: Path = Path(".")) -> list[RagRow]:
    settings = params.regen_generate
    return load_rag_rows(root / settings.rows, limit=settings.limit)
