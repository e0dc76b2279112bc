"""A report's recorded calls, held as each stage's packed recording and parsed one call at a time.

A report counts every call (pipeline.data.recorded_calls.call_counts), names the model that made
them (pipeline.data.recorded_models.count_models) and shows each item's calls by key. Parsed all at
once, every prompt unpacked from the shared blocks, a run's calls are about 150 kB each in memory:
1.8 GB at 29k calls (bench/million.py). StageRecords keeps each stage's recording as a StageIndex
(verified in full once per content, as read_stage verifies it; the places of its lines, each read
back and checked against its digest when parsed)
and parses a call when it is shown, then drops it, so a report holds one item's calls. A call is
counted from its verified line's context, reply and model alone: its prompts are not unpacked,
so counting reads none of the blocks back from the file (issue 33).

By key it is what recorded_calls.first_by_key gives: a key recorded more than once is its first
copy, by stage name then line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import orjson

from pipeline.data.recorded_calls import call_counts, counted_calls
from pipeline.data.recorded_models import ModelUse, count_models
from pipeline.llm.keys import KEY_RECIPE
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ModelIdentity, Options


def stage_index_calls(index: StageIndex) -> Iterator[RecordedCall]:
    """Every call of a stage's recording in line order, each parsed from its verified line when
    reached (as StageIndex.call parses one)."""
    return index.every_call()


class StageRecords(Mapping[str, CallRecord]):
    """Key -> the first recorded call of that key among the stages (by stage name, then line),
    parsed when asked for; with each stage's call_counts and the models of every call, counted at
    read."""

    def __init__(
        self,
        indexes: dict[str, StageIndex],
        counts: dict[str, dict[str, int]],
        models: Counter[tuple[str, str, str]],
    ) -> None:
        self.indexes, self.counts, self._models = indexes, counts, models

    @classmethod
    def read(
        cls, recordings_dir: Path, stages: Iterable[str], memo: VerifiedMemo | None = None
    ) -> StageRecords:
        """Each of `stages`' recordings under `recordings_dir` (nothing recorded: no call), verified
        (content `memo` holds as verified in full is not verified again; any other is, in full), its
        calls counted one at a time."""
        indexes: dict[str, StageIndex] = {}
        counts: dict[str, dict[str, int]] = {}
        models: Counter[tuple[str, str, str]] = Counter()
        for stage in sorted(set(stages)):
            directory = stage_folders.stage_dir(recordings_dir, stage)
            if not stage_folders.has_recording(directory):
                counts[stage] = call_counts(())
                continue
            index = indexes[stage] = index_stage(directory, memo=memo)
            counts[stage] = counted_calls(_counted_headers(index, models))
        return cls(indexes, counts, models)

    def models(self) -> list[ModelUse]:
        """The models of every recorded call (first copies or not), as count_models counts them."""
        return count_models(self._models.elements())

    def header(self, key: str) -> tuple[ModelIdentity, Options] | None:
        """The model and options of this key's call (None: not recorded), as self[key] would give
        them, read from its verified line's JSON: its prompts are not unpacked (a report's index
        names every call's model and options, and parsing each call for them was most of its cost).
        The line is read back and checked against its digest as a parse reads it, and must record
        this very key under today's key recipe; a line under an older recipe is parsed in full."""
        place = self.place(key)
        return None if place is None else self.header_at(key, place)

    def place(self, key: str) -> tuple[str, int] | None:
        """Where this key's call is, as self[key] finds it: its stage and the index of its line there
        (None: not recorded). A reader that marks the calls it has seen marks this place (a byte a
        line: see lines), not the key (about 100 bytes)."""
        for stage, index in self.indexes.items():
            found = index.at.get(key)
            if found is not None:
                return stage, found
        return None

    def lines(self, stage: str) -> int:
        """How many call lines `stage`'s recording has (a place's index is below it)."""
        return len(self.indexes[stage].lines)

    def header_at(self, key: str, place: tuple[str, int]) -> tuple[ModelIdentity, Options]:
        """header(key), the key's place (self.place(key)) known."""
        stage, found = place
        raw = orjson.loads(self.indexes[stage].line(found))
        if raw.get("recipe", KEY_RECIPE) != KEY_RECIPE or raw.get("key") != key:
            record = self[key]
            return record.model, record.request.options
        request = raw["request"]
        options = Options.model_validate(request["options"]) if "options" in request else Options()
        return ModelIdentity.model_validate(raw["model"]), options

    def __getitem__(self, key: str) -> CallRecord:
        for index in self.indexes.values():
            call = index.call(key)
            if call is not None:
                return call.record
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return any(key in index.at for index in self.indexes.values())

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key for index in self.indexes.values() for key in index.at))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _counted_headers(
    index: StageIndex, models: Counter[tuple[str, str, str]]
) -> Iterator[tuple[CallContext, str | None]]:
    """Each call's context and reply's done_reason (what counted_calls counts), its model counted in
    `models`, validated from its verified line's JSON as a parse validates them: its prompts are
    not unpacked, so counting reads none of the stage's blocks back (about 8 us a block read from
    its file; a stage of 10k calls asks for about 100k)."""
    for _, line in index.lines.by_item():
        raw = orjson.loads(line)
        model = ModelIdentity.model_validate(raw["model"])
        models[(model.backend, model.name, model.digest)] += 1
        yield CallContext.model_validate(raw["context"]), ChatReply.model_validate(raw["reply"]).done_reason
