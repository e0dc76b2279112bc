"""A stage's recording as an index reads it: its calls by key, verified, or why none may be used.

A stage's recording that cannot be trusted (a bad line, a blob that does not hash to its id, a folder
that does not match its pin in dvc.lock, a symbolic link, a name that is not a plain name) is left
out as a whole, and remembered with its reason (file and line). Nothing of a damaged recording is
served. StagesRead is the state every part of RecordingIndex (pipeline.llm.recordings.index) is given:
the stages it has read, the models of those it let go of, and the one way it reads a stage.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from weakref import WeakValueDictionary

from pipeline.errors import JudgeloopError
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity


@dataclass
class ReadRecording:
    """One stage's recorded calls by key (verified, parsed when served), or why none may be used."""

    index: StageIndex | None = None
    error: JudgeloopError | None = None
    # The records served and still held (by a session, a status probe): served again as the same
    # object rather than parsed into a copy, while nothing holds one it costs nothing.
    _alive: WeakValueDictionary[str, CallRecord] = field(default_factory=WeakValueDictionary, repr=False)

    @property
    def damage(self) -> str | None:
        return None if self.error is None else self.error.message

    def get(self, key: str, request: ChatRequest | None = None, *, seed: bool = True) -> CallRecord | None:
        """`request`: the request `key` was derived from, where the caller holds it; `seed`: whether
        the caller seeds a local cache with it (StageIndex.call)."""
        if self.index is None:
            return None
        record = self._alive.get(key)
        if record is None:
            call = self.index.call(key, request, seed=seed)
            if call is None:
                return None
            record = self._alive[key] = call.record
        return record

    def checksum(self, key: str) -> str | None:
        """The checksum of the record `get(key)` serves, without parsing its call where it is not held
        already (StageIndex.checksum); None: not here, or only `get` can say."""
        if self.index is None:
            return None
        record = self._alive.get(key)
        return record.checksum if record is not None else self.index.checksum(key)

    def keys(self) -> set[str]:
        return set() if self.index is None else set(self.index.at)

    @property
    def models(self) -> set[ModelIdentity]:
        """The models that made the calls (each a model of a verified call)."""
        if self.index is None:
            return set()
        return {ModelIdentity(backend=b, name=n, digest=d) for b, n, d in self.index.models}

    @property
    def by_key(self) -> dict[str, CallRecord]:
        """Every call, parsed: for a test or a small tool; a session looks up one key (get)."""
        return {key: record for key in sorted(self.keys()) if (record := self.get(key)) is not None}


class StagesRead:
    """The stages a RecordingIndex has read, and the one way it reads a stage: the state its parts
    (pipeline.llm.recordings.lookup_order, recorded_models, hold_one) share, each given this object
    and working on it under its one lock."""

    def __init__(self, root: Path, pins: Pins, memo: VerifiedMemo | None, *, hold_one: bool) -> None:
        self.root = root
        self.pins = pins
        self.memo = memo  # recordings verified in full before (pipeline.llm.recordings.verified_memo)
        self.hold_one = hold_one
        self.held: dict[str, ReadRecording] = {}  # the stages read and held, by name
        self.noted: dict[str, set[ModelIdentity]] = {}  # models of the stages read but not held
        self.noted_keys: dict[str, frozenset[str]] = {}  # with hold_one: their keys
        # Every stage's folder read into `held` (LookupOrder's merge); hold_one's letting go undoes it.
        self.every_stage_held = False
        self.lock = threading.Lock()

    def read(self, directory: Path) -> ReadRecording:
        try:
            stage_folders.stage_dir(self.root, directory.name)
            stage_folders.refuse_linked(directory)
            if not stage_folders.has_recording(directory):
                self.pins.check(directory)
                return ReadRecording()
            # One pass hashes each file and places its lines: the bytes checked against the pin are
            # those verified, and each line served is checked against them (stage_index.index_stage).
            return ReadRecording(index_stage(directory, pins=self.pins, memo=self.memo))
        except JudgeloopError as exc:
            return ReadRecording(error=exc)

    def note(self, name: str, calls: ReadRecording) -> None:
        self.noted[name] = calls.models
        if self.hold_one:
            self.noted_keys[name] = frozenset(calls.keys())
