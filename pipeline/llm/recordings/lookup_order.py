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


class LookupOrder(StagesRead):
    """RecordingIndex's lookup in the other stages' recordings (RecordingIndex.elsewhere)."""

    _every_stage_read: bool
    _order: dict[str, int]
    _lookup_dirs: list[Path] | None
    _keys: dict[str, Mapping[str, int]]
    _unpinned_names: dict[str, bool]

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

    def _every_stage(self) -> dict[str, ReadRecording]:
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

    def _showing(self, key: str) -> Iterator[tuple[str, ReadRecording]]:
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

    def _whole(self, directory: Path) -> ReadRecording:
        """A stage's recording read whole and verified (once), in place of its keys."""
        with self._lock:
            calls = self._stages.get(directory.name)
            if calls is None:
                calls = self._stages[directory.name] = self._read(directory)
            self._keys.pop(directory.name, None)
            return calls

    def _answering(self, stages: Iterable[tuple[str, ReadRecording]]) -> Iterator[ReadRecording]:
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
