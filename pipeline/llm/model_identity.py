"""The model a session's calls are keyed by (pipeline.llm.session): the backend's identity, or in
replay mode, where no model is asked, the one the recordings hold (or llm.digest pins)."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.errors import ConfigError
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.settings import EngineSettings
from pipeline.llm.types import Backend, ModelIdentity

__all__ = ["resolve_identity"]


def resolve_identity(
    params: EngineSettings, index: RecordingIndex, backend: Callable[[], Backend], stage: str | None = None
) -> ModelIdentity:
    """The model's identity: the backend's, or in replay mode the recordings' (read for it, `stage`'s
    own held for its lookups)."""
    llm = params.llm
    if params.cache.mode != "replay":
        return backend().identity()
    if llm.digest:
        return ModelIdentity(backend=llm.backend, name=llm.model, digest=llm.digest)
    recorded = index.identities(llm.backend, llm.model, hold_only=stage)
    if len(recorded) == 1:
        return next(iter(recorded))
    if not recorded:
        raise ConfigError(
            f"replay mode: no recorded call was made by {llm.backend} model '{llm.model}', so its identity "
            f"is unknown. Fix: check llm.backend/llm.model in params.yaml, or fetch the recordings/ folder."
        )
    digests = ", ".join(sorted(i.digest for i in recorded))
    raise ConfigError(
        f"replay mode: recordings hold several versions of '{llm.model}' ({digests}). "
        "Fix: pin the one to replay with llm.digest in params.yaml."
    )
