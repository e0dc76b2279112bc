"""A session as a stage opens one, on any backend, with its cache and recordings in one folder.

    session = folder_session(tmp_path, fake)          # tmp_path/cache, tmp_path/recordings
    session.chat(request, CallContext(stage="judge"))

Tests and benches build sessions outside a project (no params, no dvc.lock); this is the one place
that lays their folders out, so that a test and a bench that mean the same session get the same one.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.llm.cache.store import CallStore
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.settings import CacheMode
from pipeline.llm.types import Backend


def folder_session(
    root: Path,
    backend: Backend,
    *,
    stage: str = "judge",
    mode: CacheMode = "auto",
    recordings: str = "recordings",
    runs: bool = False,
) -> LLMSession:
    """A session for `stage` on `backend`: the local cache at root/cache (none in mode `off`), the
    recordings at root/<recordings>, and the run's stats at root/runs when `runs`."""
    return LLMSession(
        stage=stage,
        mode=mode,
        store=None if mode == "off" else CallStore(root / "cache"),
        index=RecordingIndex(root / recordings),
        recordings_dir=root / recordings,
        identity=backend.identity,
        backend=lambda: backend,
        runs_dir=root / "runs" if runs else None,
    )
