"""What a replay's missing calls say, for the error that lists them (pipeline.llm.session): whether
the stage never ran under this model or ran and these calls are new, with the fix for each."""

from __future__ import annotations

from pathlib import Path

from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.types import ModelIdentity

__all__ = ["why_missing"]


def why_missing(
    index: RecordingIndex, stage: str, recordings_dir: Path, identity: ModelIdentity | None
) -> str | None:
    """Whether the stage never ran under this model (its recording holds none of its calls) or
    ran and these calls are new (a prompt or a param changed since), with the fix for each."""
    own = index.stage(stage)
    if own.error is not None or identity is None:
        return None
    wanted = identity
    recorded = {f"{m.backend}:{m.name}" for m in own.models}
    if not recorded:
        return (
            f"Cause: stage '{stage}' was never recorded here (no {recordings_dir}/"
            f"{stage}/). Fix: fetch the recordings/ folder it was run with, or run it "
            f"where the model is served: `./judgeloop repro {stage}`."
        )
    if f"{wanted.backend}:{wanted.name}" not in recorded:
        return (
            f"Cause: stage '{stage}' never ran under these params: its recording holds calls "
            f"by {', '.join(sorted(recorded))}, and llm names {wanted.backend}:{wanted.name}. "
            f"Fix: run it where that model is served (`./judgeloop repro {stage}`), or put "
            "the llm params back as they were when it ran (git checkout -- params.yaml)."
        )
    return (
        f"Cause: stage '{stage}' ran under this model, but these calls are new (a prompt, a "
        f"param or the data changed since). Fix: record them where the model is served: "
        f"`./judgeloop repro {stage}`."
    )
