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
(pipeline.llm.recordings.folder_scan). A stage's
recording that cannot be trusted (a bad line, a blob that does not hash to its id, a folder that
does not match its pin in dvc.lock, a symbolic link, a name that is not a plain name) is left out as a
whole, and remembered with its reason (file and line): the session whose own stage it is fails
with that reason, while every other stage goes on replaying from its own recording. Nothing of a
damaged recording is served.

A session looks in its own stage's recording first, then in the others (a call asked again in a
later stage, say): those dvc.lock pins first, then any other folder, each group by name; so a
recording added beside the pipeline's (a folder no stage owns, which no pin covers, such as
`JUDGE` beside `judge`, which sorts before it) cannot take the place of a stage's own calls, nor
of a call another stage recorded; and while a pinned recording is damaged, no unpinned folder
answers at all (the calls the damaged one held are unknown, and one of them must not be answered
by whatever such a folder holds for its key).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from weakref import WeakValueDictionary

from pipeline.errors import CorruptRecordError, JudgeloopError
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.folder_scan import verified_models
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.stage_keys import recorded_keys
from pipeline.llm.recordings.verified_memo import IN_PROCESS, VerifiedMemo
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity


@dataclass
class StageCalls:
    """One stage's recorded calls by key (verified, parsed when served), or why none may be used."""

    index: StageIndex | None = None
    error: JudgeloopError | None = None
    # The records served and still held (by a session, a status probe): served again as the same
    # object rather than parsed into a copy, while nothing holds one it costs nothing.
    _alive: WeakValueDictionary[str, CallRecord] = field(default_factory=WeakValueDictionary, repr=False)

    @property
    def damage(self) -> str | None:
        return None if self.error is None else self.error.message

    def get(self, key: str, request: ChatRequest | None = None) -> CallRecord | None:
        """`request`: the request `key` was derived from, where the caller holds it (StageIndex.call)."""
        if self.index is None:
            return None
        record = self._alive.get(key)
        if record is None:
            call = self.index.call(key, request)
            if call is None:
                return None
            record = self._alive[key] = call.record
        return record

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
        self.root = root
        self.pins = pins if pins is not None else Pins()
        self.memo = memo  # recordings verified in full before (pipeline.llm.recordings.verified_memo)
        self.hold_one = hold_one
        self._stages: dict[str, StageCalls] = {}
        self._noted: dict[str, set[ModelIdentity]] = {}  # models of the stages read but not held
        self._noted_keys: dict[str, frozenset[str]] = {}  # with hold_one: their keys
        self._every_stage_read = False
        self._order: dict[str, int] = {}  # each stage's place in lookup order, once every stage is read
        self._lookup_dirs: list[Path] | None = None  # the stages' folders in lookup order, once listed
        self._keys: dict[str, Mapping[str, int]] = {}  # stages read for their keys only (stage_keys)
        self._unpinned_names: dict[str, bool] = {}
        self._lock = threading.Lock()

    def _read(self, directory: Path) -> StageCalls:
        try:
            stage_folders.stage_dir(self.root, directory.name)
            stage_folders.refuse_linked(directory)
            if not stage_folders.has_recording(directory):
                self.pins.check(directory)
                return StageCalls()
            # One pass hashes each file and places its lines: the bytes checked against the pin are
            # those verified, and each line served is checked against them (stage_index.index_stage).
            return StageCalls(index_stage(directory, pins=self.pins, memo=self.memo))
        except JudgeloopError as exc:
            return StageCalls(error=exc)

    def stage(self, name: str) -> StageCalls:
        """One stage's calls (none for a stage with no recording), read when first asked for."""
        with self._lock:
            calls = self._stages.get(name)
            if calls is None:
                directory = self.root / name
                has = stage_folders.has_recording(directory)
                calls = self._read(directory) if has else StageCalls()
                if self.hold_one:
                    self._let_go()
                calls = self._stages[name] = calls
            return calls

    def _let_go(self) -> None:
        """(hold_one, under the lock) Every held stage's recording let go of, its models and keys
        noted; a damaged one stays, with its reason."""
        for name, calls in list(self._stages.items()):
            if calls.error is None:
                self._note(name, calls)
                del self._stages[name]
        self._every_stage_read = False

    def _note(self, name: str, calls: StageCalls) -> None:
        self._noted[name] = calls.models
        if self.hold_one:
            self._noted_keys[name] = frozenset(calls.keys())

    def read_already(self, name: str) -> StageIndex | None:
        """A stage's recording if this index has read it (and could trust it), else None: unread."""
        with self._lock:
            calls = self._stages.get(name)
        return None if calls is None else calls.index

    def _stage_dirs(self) -> list[Path]:
        """The stages' folders in lookup order: those dvc.lock pins first, then the others (an
        unpinned folder's call for a key could be anyone's), each group by name."""
        return sorted(stage_folders.stage_dirs(self.root), key=self._unpinned)

    def _unpinned(self, directory: Path) -> bool:
        unpinned = self._unpinned_names.get(directory.name)
        if unpinned is None:  # asked once a folder (a lookup elsewhere may walk them at each miss)
            # A link (refused when read) counts as pinned: resolved, it would name another folder's pin.
            unpinned = self.pins.pin(directory) is None and not directory.is_symlink()
            self._unpinned_names[directory.name] = unpinned
        return unpinned

    def _every_stage(self) -> dict[str, StageCalls]:
        with self._lock:
            if not self._every_stage_read:
                order = self._stage_dirs()
                for directory in order:
                    if directory.name not in self._stages:
                        self._stages[directory.name] = self._read(directory)
                self._order = {directory.name: number for number, directory in enumerate(order)}
                self._every_stage_read = True
            last = len(self._order)
            return dict(
                sorted(self._stages.items(), key=lambda item: (self._order.get(item[0], last), item[0]))
            )

    def own(self, key: str, stage: str, request: ChatRequest | None = None) -> CallRecord | None:
        """The call from `stage`'s own recording; CorruptRecordError if that recording is damaged.
        `request`: the request `key` was derived from, where the caller holds it (StageIndex.call)."""
        calls = self.stage(stage)
        if calls.error is not None:
            kind = type(calls.error) if isinstance(calls.error, CorruptRecordError) else CorruptRecordError
            raise kind(f"the recording of stage '{stage}' cannot be used: {calls.error.message}")
        return calls.get(key, request)

    def elsewhere(self, key: str) -> CallRecord | None:
        """The call from any other stage's recording that can be trusted, in stage order. A stage
        is first read for its keys only (pipeline.llm.recordings.stage_keys): one that does not show
        the key is passed over unread (issue 33: in a recording run no later stage's call is in an
        earlier one's recording), and one that shows it is read and verified whole before it answers."""
        if self.hold_one:
            return self._elsewhere_unheld(key)
        for calls in self._answering(self._showing(key)):
            record = calls.get(key)
            if record is not None:
                return record
        return None

    def _showing(self, key: str) -> Iterator[tuple[str, StageCalls]]:
        """The stages in lookup order that may hold `key`, each read whole (verified) when reached:
        a stage whose keys do not show it is passed over, except that every pinned stage passed over
        is read whole before the first unpinned folder that shows it, since an unpinned folder answers
        only while every pinned recording is whole (_answering)."""
        passed: list[Path] = []  # pinned stages not read whole
        for directory in self._lookup_order():
            unpinned = self._unpinned(directory)
            if not self._shows(directory, key):
                if not unpinned:
                    passed.append(directory)
                continue
            if unpinned:
                for pinned in passed:
                    yield pinned.name, self._whole(pinned)
                passed = []
            yield directory.name, self._whole(directory)

    def _lookup_order(self) -> list[Path]:
        with self._lock:
            if self._lookup_dirs is None:  # listed once (a lookup elsewhere may come at each miss)
                self._lookup_dirs = self._stage_dirs()
            return self._lookup_dirs

    def _shows(self, directory: Path, key: str) -> bool:
        """Whether a stage may hold `key`: one read whole (or damaged) always may; another is read
        for its keys, once (one not readable so is read whole now)."""
        with self._lock:
            if directory.name in self._stages:
                return True
            keys = self._keys.get(directory.name)
            if keys is None:
                keys = recorded_keys(directory)
                if keys is None:
                    self._stages[directory.name] = self._read(directory)
                    return True
                self._keys[directory.name] = keys
            return key in keys

    def _whole(self, directory: Path) -> StageCalls:
        """A stage's recording read whole and verified (once), in place of its keys."""
        with self._lock:
            calls = self._stages.get(directory.name)
            if calls is None:
                calls = self._stages[directory.name] = self._read(directory)
            self._keys.pop(directory.name, None)
            return calls

    def _answering(self, stages: Iterable[tuple[str, StageCalls]]) -> Iterator[StageCalls]:
        """`stages` (in lookup order) that may answer another stage's lookup: a folder dvc.lock does
        not pin only while every pinned one is whole, since a call a damaged pinned recording holds
        would otherwise be answered by whatever an unpinned folder holds for its key."""
        pinned_damaged = False
        for name, calls in stages:
            unpinned = self._unpinned(self.root / name)
            if unpinned and pinned_damaged:
                return
            pinned_damaged |= not unpinned and calls.error is not None
            yield calls

    def lookup(self, key: str, stage: str) -> CallRecord | None:
        return self.own(key, stage) or self.elsewhere(key)

    def _elsewhere_unheld(self, key: str) -> CallRecord | None:
        """(hold_one) elsewhere, holding no other stage: a stage not read yet is read and noted, and
        the stage whose noted keys have the key is read again for its call and let go of."""
        pinned_damaged = False
        for directory in self._stage_dirs():
            if pinned_damaged and self._unpinned(directory):
                return None  # as _answering: no unpinned answer while a pinned recording is damaged
            with self._lock:
                calls = self._stages.get(directory.name)
                keys = self._noted_keys.get(directory.name)
            if calls is None and keys is None:
                self._models_of(directory, keep=False)
                with self._lock:
                    calls = self._stages.get(directory.name)  # damaged: kept with its reason
                    keys = self._noted_keys.get(directory.name)
            if calls is None and keys is not None and key in keys:
                calls = self._read(directory)
            if calls is not None and (record := calls.get(key)) is not None:
                return record
            pinned_damaged |= calls is not None and calls.error is not None and not self._unpinned(directory)
        return None

    @property
    def by_key(self) -> dict[str, CallRecord]:
        """Every trusted recorded call, the first by stage order for a key recorded twice."""
        merged: dict[str, CallRecord] = {}
        for calls in self._answering(self._every_stage().items()):
            for key in calls.keys() - merged.keys():
                if (record := calls.get(key)) is not None:
                    merged[key] = record
        return merged

    def damaged(self) -> list[str]:
        """Why each recording read so far was left out; those read for their keys only (by a lookup
        elsewhere they did not answer) are read whole first, so that a damaged one is named too."""
        for name in list(self._keys):
            self._whole(self.root / name)
        with self._lock:
            return [calls.damage for _, calls in sorted(self._stages.items()) if calls.damage is not None]

    def identities(self, backend: str, name: str, *, hold_only: str | None = None) -> set[ModelIdentity]:
        """The models by that backend and name that made recorded calls, from every stage that can be
        trusted: read from the verified lines' models, no call parsed (issue 31). With `hold_only`
        (a session's own stage), a stage read only for this is not held: its models are noted, and
        its recording read again only if a lookup needs it (a scan, once the memo holds it), so that
        a session holds its own stage's recording, not the whole run's (issue 33)."""
        found: set[ModelIdentity] = set()
        for directory in stage_folders.stage_dirs(self.root):
            keep = hold_only is None or directory.name == hold_only
            models = self._models_of(directory, keep=keep)
            found |= {m for m in models if m.backend == backend and m.name == name}
        return found

    def _verified_models(self, directory: Path) -> set[ModelIdentity] | None:
        """A stage's models, noted, where the memo holds its recording as verified in full: read
        without placing its lines, for a session that only needs the model's identity from it (a
        replay's every stage reads every other stage's recording for it: issue 33). None otherwise."""
        if not stage_folders.has_recording(directory):
            return None
        try:
            stage_folders.stage_dir(self.root, directory.name)
        except JudgeloopError:
            return None
        found = verified_models(directory, self.pins, self.memo or IN_PROCESS)
        if found is None:
            return None
        models = {ModelIdentity(backend=b, name=n, digest=d) for b, n, d in found}
        with self._lock:
            return self._noted.setdefault(directory.name, models)

    def _models_of(self, directory: Path, *, keep: bool) -> set[ModelIdentity]:
        with self._lock:
            calls = self._stages.get(directory.name)
            noted = self._noted.get(directory.name)
        if calls is None and noted is None and not keep and not self.hold_one:
            noted = self._verified_models(directory)
        if calls is None and noted is None:
            read = self._read(directory)
            with self._lock:
                if (keep and not self.hold_one) or read.error is not None:  # damaged: kept with its reason
                    calls = self._stages.setdefault(directory.name, read)
                else:
                    self._note(directory.name, read)
                    noted = self._noted[directory.name]
        return calls.models if calls is not None else noted or set()
