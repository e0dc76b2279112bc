"""Every recorded call under recordings/, by key, for a session to serve: verified, stage by stage.

Each stage's recording is read (and every record verified: key re-derived, checksum checked) once
per session, when first needed: a session's own stage's at its first call, another's when a call in
neither the own recording nor the local cache (pipeline.llm.session) shows its key there (each other
stage is first read for its keys alone, unverified, only to know which to read:
pipeline.llm.recordings.stage_keys), or when the model's identity is read from them. It is
kept as the places of its lines (pipeline.llm.recordings.stage_index.StageIndex: key -> file, offset
and digest of its line), and a call is read from its file, checked against its digest and parsed
only when it is served, so holding a stage's recording costs about 40 bytes a call and its key,
and an identity or a lookup costs no parse of the other calls. A
recording verified in full before (its content's digest in the memo, pipeline.llm.recordings.verified_memo)
is only scanned for its keys and models. Its files are hashed in the pass that places their lines,
and the bytes that match the folder's pin in dvc.lock are the bytes verified and, later, served
(pipeline.llm.recordings.folder_scan). A stage's recording that cannot be trusted is left out as a
whole, with its reason: the session whose own stage it is fails with that reason, while every other
stage goes on replaying from its own recording.

RecordingIndex is put together from parts, one module an idea, each given the stages read
(StagesRead: what every part works on, under its one lock) and holding only its own state:
    stage_read.py       a stage's recording read, its calls by key or why none may be used (ReadRecording),
                        and the stages read (StagesRead)
    lookup_order.py     the lookup in the other stages' recordings: its order, which may answer
    recorded_models.py  the models that made the recorded calls (the model's identity)
    hold_one.py         `judgeloop status`'s mode: one stage's recording held at a time
"""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.hold_one import HoldOne
from pipeline.llm.recordings.lookup_order import LookupOrder
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.recorded_models import RecordedModels
from pipeline.llm.recordings.stage_index import StageIndex
from pipeline.llm.recordings.stage_read import ReadRecording, StagesRead
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity

__all__ = ["ReadRecording", "RecordingIndex"]


class RecordingIndex:
    def __init__(
        self,
        root: Path,
        pins: Pins | None = None,
        memo: VerifiedMemo | None = None,
        *,
        hold_one: bool = False,
    ) -> None:
        """hold_one: hold one stage's recording at a time (`judgeloop status`, which dry-runs every
        stage in turn: issue 33). Reading a stage's lets go of the one held before, keeping its
        models and keys; a call another stage recorded is served from that stage read again (a scan,
        once the memo holds it), not held."""
        self._stages = StagesRead(root, pins if pins is not None else Pins(), memo, hold_one=hold_one)
        self._lookup = LookupOrder(self._stages)
        self._models = RecordedModels(self._stages)
        self._hold = HoldOne(self._stages, self._lookup, self._models)

    @property
    def root(self) -> Path:
        return self._stages.root

    @property
    def pins(self) -> Pins:
        return self._stages.pins

    @property
    def memo(self) -> VerifiedMemo | None:
        """Recordings verified in full before (pipeline.llm.recordings.verified_memo)."""
        return self._stages.memo

    @property
    def hold_one(self) -> bool:
        return self._stages.hold_one

    def stage(self, name: str) -> ReadRecording:
        """One stage's calls (none for a stage with no recording), read when first asked for."""
        stages = self._stages
        with stages.lock:
            calls = stages.held.get(name)
            if calls is None:
                directory = stages.root / name
                has = stage_folders.has_recording(directory)
                calls = stages.read(directory) if has else ReadRecording()
                if stages.hold_one:
                    self._hold.let_go()
                calls = stages.held[name] = calls
            return calls

    def read_already(self, name: str) -> StageIndex | None:
        """A stage's recording if this index has read it (and could trust it), else None: unread."""
        with self._stages.lock:
            calls = self._stages.held.get(name)
        return None if calls is None else calls.index

    def own(
        self, key: str, stage: str, request: ChatRequest | None = None, *, seed: bool = True
    ) -> CallRecord | None:
        """The call from `stage`'s own recording; CorruptRecordError if that recording is damaged.
        `request`: the request `key` was derived from, where the caller holds it; `seed` False: the
        caller has no local cache to seed, so keeps no layout of its messages (StageIndex.call)."""
        return self._usable(stage).get(key, request, seed=seed)

    def own_checksum(self, key: str, stage: str) -> str | None:
        """The checksum of the record `own(key, stage)` serves, read without parsing the call
        (ReadRecording.checksum); None: not there, or only `own` can say. Raises as `own` does."""
        return self._usable(stage).checksum(key)

    def _usable(self, stage: str) -> ReadRecording:
        calls = self.stage(stage)
        if calls.error is not None:
            kind = type(calls.error) if isinstance(calls.error, CorruptRecordError) else CorruptRecordError
            raise kind(f"the recording of stage '{stage}' cannot be used: {calls.error.message}")
        return calls

    def elsewhere(self, key: str) -> CallRecord | None:
        """The call from any other stage's recording that can be trusted, in stage order. A stage
        is first read for its keys only (pipeline.llm.recordings.stage_keys): one that does not show
        the key is passed over unread (issue 33: in a recording run no later stage's call is in an
        earlier one's recording), and one that shows it is read and verified whole before it answers."""
        if self.hold_one:
            return self._hold.elsewhere(key)
        return self._lookup.first(key)

    def lookup(self, key: str, stage: str) -> CallRecord | None:
        return self.own(key, stage) or self.elsewhere(key)

    def identities(self, backend: str, name: str, *, hold_only: str | None = None) -> set[ModelIdentity]:
        """The models by that backend and name that made recorded calls (RecordedModels.identities)."""
        return self._models.identities(backend, name, hold_only=hold_only)

    @property
    def by_key(self) -> dict[str, CallRecord]:
        """Every trusted recorded call, the first by stage order for a key recorded twice."""
        return self._lookup.by_key

    def damaged(self) -> list[str]:
        """Why each recording read so far was left out (LookupOrder.damaged)."""
        return self._lookup.damaged()
