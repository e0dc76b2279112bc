"""A stage's recording held as its lines, each call parsed only when it is served (issues 31, 33).

recordings.read_stage builds every call of a recording (its prompts unpacked from the shared
blocks): at tens of thousands of calls, about 150 kB a call in memory, and most of a stage's fixed
cost when every recording is read for the model's identity. A StageIndex keeps the packed lines
(the blocks once) and a map of key -> line: it is verified in full once per content, each call
dropped once checked, and its digest remembered (pipeline.llm.recordings.verified_memo); content the memo
holds is only scanned for its keys and models (orjson, no call built). A lookup parses one line, a
line that was verified (or is byte for byte content that was). Nothing of a recording that fails
is served: a bad line anywhere raises, naming its file and line, and the stage is left out whole.

The same scan serves `audit --item` (read_items): each line is read for its context's item only,
and that item's calls are parsed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline.llm.keys import KEY_RECIPE, canonical_json
from pipeline.llm.recordings import text as recordings
from pipeline.llm.recordings.verified_memo import IN_PROCESS, VerifiedMemo
from pipeline.llm.records import RecordedCall


def _context_item(line: str) -> str | None:
    """The item a call line's context names, read from its JSON alone (None: not readable so)."""
    try:
        context = orjson.loads(line)["context"]
        item = context.get("item", "")
        return item if isinstance(item, str) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_items(directory: Path, items: Collection[str]) -> Iterator[recordings.LoadedCall]:
    """The calls of `items` in a stage's recording, unverified (read_stage(verify=False), for audit):
    the other lines are only scanned for their context's item, not parsed, so the calls of one item
    in a large recording cost a JSON read of each line. A line that cannot be scanned is parsed, and
    so named if damaged."""
    if not recordings.has_recording(directory):
        return
    parts = recordings.split_recording(directory)
    wanted = set(items)
    for number, line in parts.calls:
        item = _context_item(line)
        if item is None or item in wanted:
            call = recordings.parse_call_line(line, parts.blobs, parts.where(number))
            if call.context.item in wanted:
                yield recordings.LoadedCall(*parts.located(number), call)


Identity = tuple[str, str, str]  # a ModelIdentity's backend, name and digest


@dataclass(frozen=True)
class StageIndex:
    """A stage's recording, verified in full, kept as its lines: today's key -> the line of its
    first call, parsed only when that call is served (issues 31 and 33). Holding the packed lines
    (shared blocks once) instead of every call parsed, its prompts unpacked, keeps a stage's
    recording at about its size on disk in memory, and a lookup or an identity costs no parse of
    the calls nobody asks for."""

    parts: recordings.RecordingLines
    at: dict[str, int]  # key -> index in parts.calls
    models: frozenset[Identity]

    def __len__(self) -> int:
        return len(self.at)

    def verbatim_at(self, call: RecordedCall) -> int | None:
        """The index (in parts.calls) of the line that records this very call, its context and record
        equal; None when none does. A replay writes it as it was read instead of packing the call's
        prompts into blocks again (ten times a hit's cost): the same call gives the same line
        (canonical JSON, content-defined blocks), and a line written by an earlier judgeloop in
        another form stays as it was.

        Found without parsing the line: a canonical line opens with its checksum, then its context
        (keys sorted), and the line was verified (its checksum covers its record), so a line that
        opens with the served record's checksum and this call's context records this very call. A
        line in another form, with the same checksum, is parsed and compared."""
        found = self.at.get(call.record.key)
        if found is None:
            return None
        number, line = self.parts.calls[found]
        context = call.context.model_dump(mode="json", exclude_defaults=True)
        opening = f'{{"checksum":"{call.record.checksum}","context":{canonical_json(context)},'
        if recordings.line_safe(line).startswith(recordings.line_safe(opening)):
            return found
        if f'"checksum":"{call.record.checksum}"' not in line:
            return None
        same = recordings.parse_call_line(line, self.parts.blobs, self.parts.where(number))
        return found if same.record == call.record and same.context == call.context else None

    def call(self, key: str) -> RecordedCall | None:
        """The recorded call of this key, parsed from the line that was verified (None: not here)."""
        found = self.at.get(key)
        if found is None:
            return None
        number, line = self.parts.calls[found]
        where = self.parts.where(number)
        return recordings.parse_call_line(line, self.parts.blobs, where, verified=True).current()


def _identity(model: Any) -> Identity:
    return (str(model["backend"]), str(model["name"]), str(model["digest"]))


def _indexed(line: str, parts: recordings.RecordingLines, number: int) -> tuple[str, Identity]:
    """The key and model of a line whose content was verified in full before (the memo holds its
    digest): read from the JSON alone, no call built. A line under an older key recipe is parsed,
    for its key under today's."""
    try:
        raw = orjson.loads(line)
        if raw.get("recipe", KEY_RECIPE) == KEY_RECIPE and isinstance(raw["key"], str):
            return raw["key"], _identity(raw["model"])
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # not as verified content reads: parsed in full below, which names what is wrong
    record = recordings.parse_call_line(line, parts.blobs, parts.where(number)).current().record
    return record.key, _identity(record.model.model_dump())


def index_stage(
    directory: Path, *, files: dict[str, bytes] | None = None, memo: VerifiedMemo | None = None
) -> StageIndex:
    """A stage's recording as a StageIndex; CorruptRecordError at the first line that cannot be read
    or trusted, as read_stage. Content the memo does not hold is verified line by line now (each
    call dropped once checked), and remembered; content it holds is only scanned for keys."""
    parts = recordings.whole_recording(directory, files, verify=True)
    memo = memo or IN_PROCESS
    unverified = memo.holds(parts)
    at: dict[str, int] = {}
    models: set[Identity] = set()
    for found, (number, line) in enumerate(parts.calls):
        if unverified is None:
            key, model = _indexed(line, parts, number)
        else:
            record = recordings.trusted_call(line, parts, number).record
            key, model = record.key, _identity(record.model.model_dump())
        at.setdefault(key, found)
        models.add(model)
    if unverified is not None:
        memo.remember(unverified)
    return StageIndex(parts, at, frozenset(models))
