"""A session over a real HTTP backend talking to the fake servers, and what a failed call must leave
behind: nothing stored, nothing recorded (shared by the tests of faulty servers and replies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tenacity import wait_none

from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.backends.openai_compat import OpenAICompatBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.session import LLMSession
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import Backend
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.fake_openai import FakeOpenAI
from pipeline.testing.sessions import folder_session

# The backends over real loopback HTTP: Ollama's own API, the OpenAI API, and Ollama's /v1 (the OpenAI API).
KINDS = ["ollama", "openai", "ollama /v1"]
CHAT_PATHS = ("/api/chat", "/v1/chat/completions")


def settings(url: str, **overrides: Any) -> LLMSettings:
    return LLMSettings(**({"base_url": url, "model": "test-model", "read_timeout_s": 5.0} | overrides))


def backend_of(kind: str, ollama: FakeOllama, openai: FakeOpenAI, **overrides: Any) -> Backend:
    """One of KINDS, retrying without waiting."""
    if kind == "ollama":
        return OllamaBackend(settings(ollama.url, **overrides), wait=wait_none())
    url = openai.url if kind == "openai" else ollama.url
    return OpenAICompatBackend(settings(url, backend="openai", **overrides), wait=wait_none())


def session(root: Path, backend: Backend) -> LLMSession:
    return folder_session(root, backend, runs=True)


def stored(root: Path) -> list[str]:
    """The last message of every request the cache under root holds, sorted."""
    store = CallStore(root / "cache")
    try:
        records = [store.get(key) for key in list(store.keys())]
        return sorted(r.request.messages[-1].content for r in records if r is not None)
    finally:
        store.close()


def assert_tried_and_kept_nowhere(
    run: LLMSession,
    root: Path,
    kind: str,
    ollama: FakeOllama,
    openai: FakeOpenAI,
    attempts: int,
    counted_as: str = "empty_replies",
) -> None:
    """The failed call was sent `attempts` times, counted once under `counted_as` (and under no other
    failed reply's count), and neither stored nor recorded."""
    chats = ollama.received if kind != "openai" else openai.received
    assert len([r for r in chats if r.path in CHAT_PATHS]) == attempts
    failed = {name: getattr(run.stats, name) for name in ("empty_replies", "unreadable_replies")}
    assert run.calls == [] and failed == {name: int(name == counted_as) for name in failed}
    run.close(write_recording=True)
    summary = json.loads((root / "runs" / "judge.json").read_text())
    said = {name: summary.get(name) for name in failed}
    assert said == {name: 1 if name == counted_as else None for name in failed}
    assert stored(root) == []
    assert list(read_stage(root / "recordings" / "judge")) == []
