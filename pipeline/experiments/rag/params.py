"""The RAG judge design's params: the engine's `llm` and `cache`, and its own `rag` section."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from pipeline.experiments.rag.settings import RagSettings
from pipeline.llm.settings import EngineSettings, load_settings


class RagParams(EngineSettings):
    rag: RagSettings = Field(default_factory=RagSettings)


def load_rag_params(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> RagParams:
    return load_settings(RagParams, path, environ=environ, only_its_sections=True)
