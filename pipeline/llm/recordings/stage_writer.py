"""A stage's recording written: its calls gathered as the stage runs, then written in one step.

One file, written in one step. The calls and the blocks they refer to are one file, replaced by
one rename of a temporary file of its own (pipeline.llm.files.atomic_write), so a writer killed at
any moment leaves the old recording or the new one, never a mix. (Before, `blobs.jsonl` beside
`calls.jsonl` was replaced by a second rename, and a kill between the two left calls whose text was
gone. A folder in that layout is still read, its blobs.jsonl with it, and is rewritten as one file
by the next write.) Each call carries its checksum and each blob is checked against its id, so a
damaged file fails, naming its line, rather than being served (pipeline.llm.recordings.line_checks).
Past shards.SHARD_AT calls the recording is sixteen shards by key under a manifest, renamed into
place in one step as well (pipeline.llm.recordings.shards).

Whose calls a recording holds, and who may replace them. A writer takes the stage folder's lock
(pipeline.llm.files.locked), so writers take turns, across processes, and then either

- replaces the recording (`keep=None`): a DVC pipeline stage. Its recording is exactly its last
  run, an output DVC pins in dvc.lock, and only that stage writes it; a rerun of the stage
  legitimately replaces its own previous run. Or
- adds to it (`keep=` a predicate on the calls already there): `judgeloop judge-evaluate`, which
  many runs write into one `--stage` folder. A batch keeps every call already recorded and adds
  its own: two batches, one after the other or at once, both keep all their calls, and what one
  recorded stays until `judgeloop cache gc` finds no recording that needs it. (A single answer
  judged again under the same item replaces only that item's earlier calls.)
"""

from __future__ import annotations

import contextlib
import os
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from pipeline.errors import UnwritableTextError
from pipeline.llm.files import TMP_SUFFIX, atomic_write_chunks, locked
from pipeline.llm.recordings import item_table, shards
from pipeline.llm.recordings.call_places import (
    SHARDS,
    CallPlaces,
    Source,
    Where,
    kept_line,
    kept_source,
    packed,
    shard_number,
    unpacked,
)
from pipeline.llm.recordings.line_format import blob_line, blob_refs, call_to_line, line_safe
from pipeline.llm.recordings.spool import BlockLines, Spool, block_shards
from pipeline.llm.recordings.stage_folders import CALLS_FILE, LEGACY_BLOBS_FILE, has_recording, refuse_linked
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_index import StageIndex


class StageRecording:
    """One stage's recording, built a call at a time, its lines on disk until it is written (Spool).

    A call's line is made when the call is added, by the thread that made it, and spooled; only its
    place is kept. A cache hit that the stage's own recording holds as it is (context and record:
    StageIndex.verbatim_at) keeps that line instead, by its number: packing a 20 kB prompt into blocks
    costs ten times the hit itself, and the same call gives the same line. The same call (context and
    key) added twice is one line; a line made for it wins over one kept.
    """

    def __init__(self) -> None:
        self._spool = Spool()
        # Each call's line, made here (in the spool) or kept (of `_recorded`), by its Where, held as
        # its hash (CallPlaces: issue 33); a line made here that UTF-8 cannot hold, as its text.
        self._calls = CallPlaces()
        self._text: dict[Where, str] = {}
        self._blobs = BlockLines()  # blob id -> its blob line, in the spool
        self._recorded: StageIndex | None = None
        self._labels: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        self._lock = threading.Lock()

    def add(self, call: RecordedCall, *, recorded: StageIndex | None = None, key: str | None = None) -> None:
        """Add a call; `recorded`: the stage's own recording as read for this run, whose line this
        call keeps if it records this very call; `key`: its record's key, as a string the caller holds
        anyway (held here in place of the record's own copy)."""
        where = self._where(call, call.record.key if key is None else key)
        if call.cache_hit:
            with self._lock:
                if where in self._text or self._holds(where):
                    return
            if self._keeps(where, call, recorded):
                return
        blobs: dict[str, str] = {}
        place = self._spool.put(call_to_line(call, blobs))
        with self._lock:
            new = [blob for blob in blobs if blob not in self._blobs]
        blob_places = {blob: self._spool.put(blob_line(blob, blobs[blob])) for blob in new}
        with self._lock:
            if isinstance(place, str):
                self._text[where] = place
            else:  # the line made last wins
                self._text.pop(where, None)
                self._calls.set(where, packed(place, where[-1]), self._where_of)
            for blob, blob_place in blob_places.items():
                self._blobs.setdefault(blob, blob_place)

    def _where(self, call: RecordedCall, key: str) -> Where:
        return self._where_in(call.context, key)

    def _where_in(self, context: CallContext, key: str) -> Where:
        """The call's place in the order, its labels' tuple shared with every call of the same labels
        (a stage has a few: held once each, not once a call; issue 33)."""
        *head, labels, attempt = context.sort_key()
        labels = self._labels.setdefault(labels, labels)  # one step (tuples of str), so thread-safe
        return (*head, labels, attempt, key)

    def _where_of(self, number: int) -> Where:
        """The Where of the call whose line CallPlaces holds as `number`, read back from that line."""
        raw = orjson.loads(self._raw(unpacked(number)[0]))
        return self._where_in(CallContext.model_validate(raw["context"]), raw["key"])

    def _holds(self, where: Where) -> bool:
        """Whether a line made here in the spool, or kept, is held for the call."""
        return self._calls.get(where, self._where_of) is not None

    def _keeps(self, where: Where, call: RecordedCall, recorded: StageIndex | None) -> bool:
        """Whether the call is kept as its line in `recorded` (then noted), not made again."""
        found = None if recorded is None else recorded.verbatim_at(call)
        with self._lock:
            if found is None or self._recorded not in (None, recorded):
                return False
            self._recorded = recorded
            if where not in self._text:
                self._calls.setdefault(where, packed(kept_source(found), where[-1]), self._where_of)
            return True

    def close(self) -> None:
        """Let go of the spooled lines (the recording is not written after this)."""
        self._spool.close()

    def __len__(self) -> int:
        """How many calls it holds: one for each context and key, as its file will."""
        with self._lock:
            return self._count()

    def _count(self) -> int:
        """The calls held, each once (a line as text wins over the same call's line kept: about never)."""
        return len(self._calls) + sum(1 for where in self._text if not self._holds(where))

    def _by_shard(self) -> dict[int, array[int]]:
        """Each call's number (as CallPlaces holds it), by its shard's number (a shard that holds only
        lines as text among them)."""
        calls: dict[int, array[int]] = {shard_number(where): array("Q") for where in self._text}
        for number in self._calls.numbers():
            calls.setdefault(number % SHARDS, array("Q")).append(number)
        return calls

    def _ordered(self, numbers: Iterable[int], shard: int | None = None) -> list[tuple[Where, Source]]:
        """Calls (numbers as CallPlaces holds them) with their Wheres, read back from their lines, and
        the lines made here as text (of `shard`, or all), in the recording's order; a line made here
        wins over one kept (a Where held both ways, as text and as kept)."""
        order: list[tuple[Where, Source]] = [
            (where, text) for where, text in self._text.items() if shard in (None, shard_number(where))
        ]
        for number in numbers:
            where = self._where_of(number)
            if where not in self._text:
                order.append((where, unpacked(number)[0]))
        order.sort(key=_first)
        return order

    def _chunks(self, order: list[tuple[Where, Source]], blocks: array[int]) -> Iterator[str | bytes]:
        """The recording's text, a line at a time: the calls in order, then every blob by id (a line
        UTF-8 cannot hold stays text, for atomic_write_chunks to refuse, naming its line)."""
        for _, source in order:
            yield self._raw(source)
            yield b"\n"
        for number in blocks:
            place = self._blobs.at(number)
            yield self._raw(place) if place is not None else self._kept_blob(number)
            yield b"\n"

    def _raw(self, source: Source) -> str | bytes:
        """A line without its "\\n": the recording's line kept, or the spool's."""
        kept = kept_line(source)
        if kept is not None:
            assert self._recorded is not None
            return line_safe(self._recorded.line(kept))
        return self._spool.get(source)

    def _kept_blob(self, number: int) -> str:
        assert self._recorded is not None
        blob = f"{number:016x}"
        return blob_line(blob, self._recorded.blobs[blob])

    def _line(self, source: Source) -> bytes:
        line = self._raw(source)
        return (line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n"

    def _blob_bytes(self, number: int) -> bytes:
        place = self._blobs.at(number)
        if place is not None:
            return self._line(place)
        return (self._kept_blob(number) + "\n").encode("utf-8")

    def _write_shards(self, directory: Path, calls: dict[int, array[int]], blocks: array[int]) -> None:
        """The stage's calls as shards by key and its blocks as shards by id (pipeline.llm.recordings.shards),
        then its manifest, in one rename; beside each shard of calls, its table of items. What is held
        for it is 8 bytes a call (its number, by shard) and one shard's Wheres at a time: a
        million-call stage's (item, line) pairs and block ids as text were the recording run's peak,
        then its Wheres (issue 33)."""
        before = set(os.listdir(directory))
        written: list[tuple[str, str]] = []
        tables: list[tuple[str, str]] = []  # each shard of calls' table of items, named last
        try:
            try:
                for prefix, (first, end) in block_shards(blocks, shards.SHARD_DIGITS):
                    chunks = (self._blob_bytes(blocks[at]) for at in range(first, end))
                    written.append(shards.write_shard(directory, "blocks", prefix, chunks))
                for number in sorted(calls):
                    order = self._ordered(calls.pop(number), number)
                    lines = ((where[1], self._line(source)) for where, source in order)
                    prefix = f"{number:0{shards.SHARD_DIGITS}x}"
                    shard, table = item_table.write_calls(directory, prefix, lines)
                    written.append(shard)
                    tables.append(table)
            except UnicodeEncodeError as exc:  # as atomic_write_chunks refuses it for one file
                raise UnwritableTextError(
                    f"{directory / CALLS_FILE}: not written: a call would hold a lone surrogate "
                    f"(\\u{ord(exc.object[exc.start]):04x}, half a character, which no UTF-8 file can hold), "
                    "so no reader could read it back. Fix: find the input it came from (a JSON or YAML "
                    "escape \\ud800 to \\udfff), write the character itself there, and run again; the old "
                    "recording is unchanged"
                ) from None
            written += tables
            shards.commit(directory / CALLS_FILE, written)
        except BaseException:
            # The old manifest still stands: the shards written for the new one go, so that the old
            # recording reads as it was (a killed writer leaves them, refused as strays until the next write).
            for name, _ in {*written, *tables}:
                if name not in before:
                    (directory / name).unlink(missing_ok=True)
            (directory / shards.JOURNAL).unlink(missing_ok=True)  # what it listed is gone, or named
            raise
        shards.drop_unnamed(directory, {name for name, _ in written})

    def write(self, directory: Path, keep: Callable[[RecordedCall], bool] | None = None) -> int:
        """Write the stage's calls in one step, streamed from the spool in their sorted order (the
        same bytes as when the file was held whole); how many calls the file holds. keep=None: they
        replace the recording (a pipeline stage's run). Otherwise the calls already recorded that
        `keep` accepts stay beside them (read and verified under the folder's lock, so concurrent
        writers lose nothing)."""
        refuse_linked(directory)
        with locked(directory):
            if keep is not None:
                earlier = (
                    [loaded.call for loaded in read_stage(directory)] if has_recording(directory) else []
                )
                for call in earlier:
                    if keep(call):
                        self.add(call)
            with self._lock:
                count = self._count()
                # Each call's number by shard, 8 bytes a call; a small stage's calls in order.
                calls = self._by_shard() if count > shards.SHARD_AT else {}
                order = [] if calls else self._ordered(self._calls.numbers())
                kept_blobs: set[int] = set()
                if self._recorded is not None:
                    for number in self._calls.numbers():
                        index = kept_line(unpacked(number)[0])
                        if index is not None:
                            kept_blobs.update(map(BlockLines.number, blob_refs(self._recorded.line(index))))
                blocks = self._blobs.numbers(kept_blobs)
                del kept_blobs
            # A temporary file here now is a killed writer's: every live writer waits for the lock.
            for pattern in (
                f".{CALLS_FILE}.*{TMP_SUFFIX}",
                f".calls-*{TMP_SUFFIX}",
                f".blocks-*{TMP_SUFFIX}",
                f".items-*{TMP_SUFFIX}",
            ):
                for stale in directory.glob(pattern):
                    stale.unlink(missing_ok=True)
            shards.clear_killed_writer(directory, holding_lock=True)  # its shards, named in a warning
            if count > shards.SHARD_AT:
                self._write_shards(directory, calls, blocks)
            else:
                atomic_write_chunks(directory / CALLS_FILE, self._chunks(order, blocks))
                shards.drop_unnamed(directory, set())  # a sharded recording before: its shards
            with contextlib.suppress(FileNotFoundError):  # its blocks are in calls.jsonl now
                (directory / LEGACY_BLOBS_FILE).unlink()
            return count


def _first(pair: tuple[Where, Source]) -> Where:
    return pair[0]


def write_stage(
    directory: Path, calls: Iterable[RecordedCall], keep: Callable[[RecordedCall], bool] | None = None
) -> None:
    """Write one stage's calls (see StageRecording.write for `keep`)."""
    recording = StageRecording()
    for call in calls:
        recording.add(call)
    recording.write(directory, keep)
