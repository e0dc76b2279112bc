"""What every LLM stage shares: a session whose calls are recorded when the stage succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.llm.session import LLMSession, open_session
from pipeline.llm.settings import EngineSettings


@contextmanager
def recorded_session(params: EngineSettings, stage: str) -> Iterator[LLMSession]:
    """The stage's calls are written to recordings/<stage>/ only when the stage succeeds; a failed
    stage leaves its finished calls in the local cache, so the rerun repeats none of them."""
    session = open_session(params, stage)
    ok = False
    try:
        yield session
        ok = True
    finally:
        session.close(write_recording=ok)
