"""What every LLM stage shares: a session whose calls are recorded when the stage succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from pipeline.errors import ConfigError
from pipeline.llm.recordings.stage_folders import has_recording
from pipeline.llm.recordings.store import absent, absent_message
from pipeline.llm.session import LLMSession, open_session
from pipeline.llm.settings import EngineSettings


def check_recordings_here(params: EngineSettings, stage: str, root: Path = Path(".")) -> None:
    """The stage's recording, when dvc.lock pins it and it is not here (not pulled, with
    cache.recordings_store: dvc), is named before the stage starts: replay fails, saying `dvc pull`
    brings it; any other mode says so and goes on (its calls come from the local cache, or the model)."""
    if has_recording(root / params.cache.recordings / stage):
        return  # the usual case, without reading dvc.lock
    replay = params.cache.mode == "replay"
    missing = absent(root, root / params.cache.recordings, (stage,))
    if not missing:
        return
    message = absent_message(missing, params.cache.recordings_store)
    if replay:
        raise ConfigError(f"replay mode: {message}")
    click.echo(f"{stage}: {message} Without them its calls come from the local cache or the model.", err=True)


@contextmanager
def recorded_session(params: EngineSettings, stage: str) -> Iterator[LLMSession]:
    """The stage's calls are written to recordings/<stage>/ only when the stage succeeds; a failed
    stage leaves its finished calls in the local cache, so the rerun repeats none of them."""
    check_recordings_here(params, stage)
    session = open_session(params, stage)
    ok = False
    try:
        yield session
        ok = True
    finally:
        session.close(write_recording=ok)
