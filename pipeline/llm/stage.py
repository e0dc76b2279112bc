"""What every LLM stage shares: a session whose calls are recorded when the stage succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from pipeline.errors import ConfigError, JudgeloopError
from pipeline.llm.recordings.stage_folders import has_recording
from pipeline.llm.recordings.store import absent, absent_message
from pipeline.llm.session import LLMSession, open_session
from pipeline.llm.settings import EngineSettings
from pipeline.llm.terminal import guarded


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
    try:
        yield session
    except BaseException as failure:
        closed_after(session, failure)
        raise
    session.close(write_recording=True)


def closed_after(session: LLMSession, failure: BaseException) -> None:
    """The session of a stage that failed closed, its recording not written; where the close fails
    too (a line it served was since edited in place, so its seed is refused), the stage's own error
    stays the one raised and shown first, the close's named after it: in its message where the
    command line prints only that (a JudgeloopError), and in its notes, which a traceback prints."""
    try:
        session.close(write_recording=False)
    except Exception as closing:
        said = f"{session.stage}: closing its session after this error failed too: {type(closing).__name__}: "
        said += str(closing)
        failure.add_note(said)
        if isinstance(failure, JudgeloopError):
            # click's stubs mark `message` final; it is a plain attribute, set as __init__ sets it
            vars(failure)["message"] = f"{failure.message}\n{guarded(said)}"
