"""The models that made a stage's recorded calls, read for the model's identity (issues 31, 33)."""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import JudgeloopError
from pipeline.llm.recordings import models_memo, stage_folders
from pipeline.llm.recordings.stage_read import StagesRead
from pipeline.llm.recordings.verified_memo import IN_PROCESS
from pipeline.llm.types import ModelIdentity


class RecordedModels:
    """RecordingIndex's models by stage, on the stages the index has read (`stages`): a stage read
    only for them is not held, its models noted."""

    def __init__(self, stages: StagesRead) -> None:
        self._stages = stages

    def identities(self, backend: str, name: str, *, hold_only: str | None = None) -> set[ModelIdentity]:
        """The models by that backend and name that made recorded calls, from every stage that can be
        trusted: read from the verified lines' models, no call parsed (issue 31). With `hold_only`
        (a session's own stage), a stage read only for this is not held: its models are noted, and
        its recording read again only if a lookup needs it (a scan, once the memo holds it), so that
        a session holds its own stage's recording, not the whole run's (issue 33)."""
        found: set[ModelIdentity] = set()
        for directory in stage_folders.stage_dirs(self._stages.root):
            keep = hold_only is None or directory.name == hold_only
            models = self.models_of(directory, keep=keep)
            found |= {m for m in models if m.backend == backend and m.name == name}
        return found

    def _verified_models(self, directory: Path) -> set[ModelIdentity] | None:
        """A stage's models, noted, where the memo holds its recording as verified in full: read
        without placing its lines, for a session that only needs the model's identity from it (a
        replay's every stage reads every other stage's recording for it: issue 33), answered without
        reading it where the private memo holds its files as they are (models_memo). None otherwise."""
        stages = self._stages
        if not stage_folders.has_recording(directory):
            return None
        try:
            stage_folders.stage_dir(stages.root, directory.name)
        except JudgeloopError:
            return None
        found = models_memo.models(directory, stages.pins, stages.memo or IN_PROCESS)
        if found is None:
            return None
        models = {ModelIdentity(backend=b, name=n, digest=d) for b, n, d in found}
        with stages.lock:
            return stages.noted.setdefault(directory.name, models)

    def models_of(self, directory: Path, *, keep: bool) -> set[ModelIdentity]:
        """A stage's models: from its recording held or its models noted, else read (and held if
        `keep`, unless the index holds one stage at a time; noted otherwise)."""
        stages = self._stages
        with stages.lock:
            calls = stages.held.get(directory.name)
            noted = stages.noted.get(directory.name)
        if calls is None and noted is None and not keep and not stages.hold_one:
            noted = self._verified_models(directory)
        if calls is None and noted is None:
            read = stages.read(directory)
            with stages.lock:
                if (keep and not stages.hold_one) or read.error is not None:  # damaged: kept with its reason
                    calls = stages.held.setdefault(directory.name, read)
                else:
                    stages.note(directory.name, read)
                    noted = stages.noted[directory.name]
        return calls.models if calls is not None else noted or set()
