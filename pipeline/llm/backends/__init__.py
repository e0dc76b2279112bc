"""The backends, by name: params.yaml's `llm.backend` picks one from this registry.

    embedded   SmolLM2-135M in-process through llama-cpp-python (the zero-setup default)
    ollama     Ollama's native /api/chat over HTTP
    openai     any OpenAI-compatible /v1/chat/completions server (vLLM, llama-server, LM Studio)
    fake       deterministic replies, for tests

With llm.servers, the backend of llm.backend's kind is built once per server, and the pool
(pipeline.llm.backends.pool) dispatches over them.

Another package adds a backend without touching this file by declaring an entry point in the
group `judgeloop.backends` whose object is a `BackendFactory`; in-process code may call
`register_backend` (tests do). A backend module is imported only when it is built: the embedded
one pulls in llama.cpp.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import Backend

# settings, the local cache folder (where a backend may keep what it derives, e.g. a file's hash)
BackendFactory = Callable[[LLMSettings, Path], Backend]
ENTRY_POINT_GROUP = "judgeloop.backends"

_BUILT_IN: dict[str, str] = {
    "embedded": "pipeline.llm.backends.embedded:build",
    "ollama": "pipeline.llm.backends.ollama:build",
    "openai": "pipeline.llm.backends.openai_compat:build",
    "fake": "pipeline.llm.backends.fake:build",
}
_registered: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    _registered[name] = factory


def _resolve(target: str) -> BackendFactory:
    module, _, attr = target.partition(":")
    factory: BackendFactory = getattr(import_module(module), attr)
    return factory


def backend_names() -> list[str]:
    return sorted({*_BUILT_IN, *_registered, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def make_backend(settings: LLMSettings, cache_dir: Path) -> Backend:
    factory = backend_factory(settings.backend)
    if settings.servers:
        from pipeline.llm.backends.pool import build_pool

        return build_pool(settings, cache_dir, factory)
    return factory(settings, cache_dir)


def backend_factory(name: str) -> BackendFactory:
    if name in _registered:
        return _registered[name]
    if name in _BUILT_IN:
        return _resolve(_BUILT_IN[name])
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        factory: BackendFactory = entry.load()
        return factory
    near = difflib.get_close_matches(name, backend_names(), n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    raise ConfigError(
        f"llm.backend: unknown backend '{name}'{hint}. Fix: use one of {', '.join(backend_names())} in "
        "params.yaml, or install the package that provides it."
    )
