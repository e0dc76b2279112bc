"""Small builders shared by the tests."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import CacheMode
from pipeline.llm.fake import FakeBackend, Responder, echo_responder
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.store import CallStore
from pipeline.llm.types import ChatRequest, Message, Options


def make_session(
    root: Path,
    mode: CacheMode = "auto",
    *,
    stage: str = "judge",
    backend: FakeBackend | None = None,
    responder: Responder = echo_responder,
) -> tuple[LLMSession, FakeBackend]:
    fake = backend or FakeBackend(responder)
    index = RecordingIndex(root / "recordings")
    session = LLMSession(
        stage=stage,
        mode=mode,
        store=None if mode == "off" else CallStore(root / "cache"),
        index=index,
        recordings_dir=root / "recordings",
        identity=fake.identity,
        backend=lambda: fake,
        runs_dir=root / "runs",
    )
    return session, fake


def request(text: str, **options: object) -> ChatRequest:
    return ChatRequest(
        messages=(Message(role="user", content=text),), options=Options.model_validate(options)
    )
