"""The order a lookup in the other stages' recordings takes, and which of them may answer it.

A session looks in its own stage's recording first, then in the others (a call asked again in a
later stage, say): those dvc.lock pins first, then any other folder, each group by name; so a
recording added beside the pipeline's (a folder no stage owns, which no pin covers, such as
`JUDGE` beside `judge`, which sorts before it) cannot take the place of a stage's own calls, nor
of a call another stage recorded; and while a pinned recording is damaged, no unpinned folder
answers at all (the calls the damaged one held are unknown, and one of them must not be answered
by whatever such a folder holds for its key). Each other stage is first read for its keys alone,
unverified (pipeline.llm.recordings.stage_keys), only to know which to read whole and verify.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.stage_keys import recorded_keys
from pipeline.llm.recordings.stage_read import ReadRecording, StagesRead
from pipeline.llm.records import CallRecord


class LookupOrder:
    """RecordingIndex's lookup in the other stages' recordings (RecordingIndex.elsewhere), on the
    stages the index has read (`stages`); what it keeps of its own: the order, the folders listed,
    the stages read for their keys only, and which folders dvc.lock does not pin."""

    def __init__(self, stages: StagesRead) -> None:
        self._stages = stages
        self._order: dict[str, int] = {}  # each stage's place in lookup order, once every stage is read
        self._lookup_dirs: list[Path] | None = None  # the stages' folders in lookup order, once listed
        self._keys: dict[str, Mapping[str, int]] = {}  # stages read for their keys only (stage_keys)
        self._unpinned_names: dict[str, bool] = {}

    def stage_dirs(self) -> list[Path]:
        """The stages' folders in lookup order: those dvc.lock pins first, then the others (an
        unpinned folder's call for a key could be anyone's), each group by name."""
        return sorted(stage_folders.stage_dirs(self._stages.root), key=self.unpinned)

    def unpinned(self, directory: Path) -> bool:
        unpinned = self._unpinned_names.get(directory.name)
        if unpinned is None:  # asked once a folder (a lookup elsewhere may walk them at each miss)
            # A link (refused when read) counts as pinned: resolved, it would name another folder's pin.
            unpinned = self._stages.pins.pin(directory) is None and not directory.is_symlink()
            self._unpinned_names[directory.name] = unpinned
        return unpinned

    def first(self, key: str) -> CallRecord | None:
        """The call for `key` from the first other stage's recording that holds it and may answer:
        a stage is first read for its keys only (pipeline.llm.recordings.stage_keys), one that does
        not show the key is passed over unread, and one that shows it is read and verified whole
        before it answers."""
        for calls in self._answering(self._showing(key)):
            record = calls.get(key)
            if record is not None:
                return record
        return None

    def _every_stage(self) -> dict[str, ReadRecording]:
        stages = self._stages
        with stages.lock:
            if not stages.every_stage_held:
                order = self.stage_dirs()
                for directory in order:
                    if directory.name not in stages.held:
                        stages.held[directory.name] = stages.read(directory)
                self._order = {directory.name: number for number, directory in enumerate(order)}
                stages.every_stage_held = True
            last = len(self._order)
            return dict(
                sorted(stages.held.items(), key=lambda item: (self._order.get(item[0], last), item[0]))
            )

    def _showing(self, key: str) -> Iterator[tuple[str, ReadRecording]]:
        """The stages in lookup order that may hold `key`, each read whole (verified) when reached:
        a stage whose keys do not show it is passed over, except that every pinned stage passed over
        is read whole before the first unpinned folder that shows it, since an unpinned folder answers
        only while every pinned recording is whole (_answering)."""
        passed: list[Path] = []  # pinned stages not read whole
        for directory in self._lookup_order():
            unpinned = self.unpinned(directory)
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
        with self._stages.lock:
            if self._lookup_dirs is None:  # listed once (a lookup elsewhere may come at each miss)
                self._lookup_dirs = self.stage_dirs()
            return self._lookup_dirs

    def _shows(self, directory: Path, key: str) -> bool:
        """Whether a stage may hold `key`: one read whole (or damaged) always may; another is read
        for its keys, once (one not readable so is read whole now)."""
        stages = self._stages
        with stages.lock:
            if directory.name in stages.held:
                return True
            keys = self._keys.get(directory.name)
            if keys is None:
                keys = recorded_keys(directory)
                if keys is None:
                    stages.held[directory.name] = stages.read(directory)
                    return True
                self._keys[directory.name] = keys
            return key in keys

    def _whole(self, directory: Path) -> ReadRecording:
        """A stage's recording read whole and verified (once), in place of its keys."""
        stages = self._stages
        with stages.lock:
            calls = stages.held.get(directory.name)
            if calls is None:
                calls = stages.held[directory.name] = stages.read(directory)
            self._keys.pop(directory.name, None)
            return calls

    def _answering(self, stages: Iterable[tuple[str, ReadRecording]]) -> Iterator[ReadRecording]:
        """`stages` (in lookup order) that may answer another stage's lookup: a folder dvc.lock does
        not pin only while every pinned one is whole, since a call a damaged pinned recording holds
        would otherwise be answered by whatever an unpinned folder holds for its key."""
        pinned_damaged = False
        for name, calls in stages:
            unpinned = self.unpinned(self._stages.root / name)
            if unpinned and pinned_damaged:
                return
            pinned_damaged |= not unpinned and calls.error is not None
            yield calls

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
            self._whole(self._stages.root / name)
        with self._stages.lock:
            held = sorted(self._stages.held.items())
            return [calls.damage for _, calls in held if calls.damage is not None]
