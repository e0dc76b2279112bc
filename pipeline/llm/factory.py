"""Build the backend that params.yaml's `llm` section names."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import LLMSettings
from pipeline.errors import ConfigError
from pipeline.llm.types import Backend


def make_backend(settings: LLMSettings, cache_dir: Path) -> Backend:
    if settings.backend == "embedded":
        from pipeline.llm.embedded import EmbeddedBackend

        return EmbeddedBackend(settings, hash_cache_dir=cache_dir)
    if settings.backend == "ollama":
        from pipeline.llm.ollama import OllamaBackend

        return OllamaBackend(settings)
    if settings.backend == "openai":
        from pipeline.llm.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(settings)
    if settings.backend == "fake":
        from pipeline.llm.fake import FakeBackend

        return FakeBackend(name=settings.model, parallelism=settings.parallelism)
    raise ConfigError(f"llm.backend: unknown backend '{settings.backend}'")
