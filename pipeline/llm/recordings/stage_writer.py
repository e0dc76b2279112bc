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
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pipeline.errors import CorruptRecordError, UnwritableTextError
from pipeline.llm.files import TMP_SUFFIX, atomic_write_chunks, locked
from pipeline.llm.killed_writes import clear_named
from pipeline.llm.recordings import dvc_links, item_table, shards
from pipeline.llm.recordings.call_places import Source, Where, kept_line, unpacked
from pipeline.llm.recordings.line_format import blob_refs
from pipeline.llm.recordings.spool import BlockLines, block_shards
from pipeline.llm.recordings.stage_calls import StageCalls
from pipeline.llm.recordings.stage_folders import CALLS_FILE, LEGACY_BLOBS_FILE, has_recording, refuse_linked
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.records import RecordedCall


class StageRecording(StageCalls):
    """One stage's recording: its calls gathered as the stage runs (StageCalls: their lines on disk
    until it is written, in a Spool), then written in one step (`write`)."""

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

    @staticmethod
    def _clear_stale(directory: Path) -> None:
        """(under the folder's lock) A temporary file here now is a killed writer's: every live writer
        waits for the lock. Its shards too, each named in a warning."""
        patterns = (f".{CALLS_FILE}.*{TMP_SUFFIX}", *shards.TEMPORARIES)
        clear_named(directory, patterns)
        shards.clear_killed_writer(directory, holding_lock=True)

    @staticmethod
    def _drop_unnamed(directory: Path) -> None:
        """(a recording left in place) The shard files its manifest does not name, as a write drops
        them after its rename (none for a recording of one file)."""
        manifest = directory / CALLS_FILE
        try:  # as it was checked: never through a link, but DVC's into its cache
            fd = dvc_links.open_file(manifest, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return  # changed since it was checked: which files are the recording's is not known, none go
        try:  # a recording of one file is read no further than its opening (it names none)
            with open(fd, "rb", closefd=False) as stream:
                opening = stream.read(len(shards.MANIFEST_OPENING))
                data = (
                    opening + stream.read() if shards.is_manifest(opening.decode("ascii", "replace")) else b""
                )
        finally:
            os.close(fd)
        try:
            named = shards.manifest_entries(manifest, data.decode("utf-8", "replace")) if data else []
        except CorruptRecordError:
            return  # changed since it was checked: which files are the recording's is not known, none go
        shards.drop_unnamed(directory, {name for name, _ in named})

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
                left = keep is None and self.unchanged(directory)
            if left:  # the files there are those this would write (pipeline.llm.recordings.unchanged)
                self._clear_stale(directory)
                self._drop_unnamed(directory)
                return count
            with self._lock:
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
            self._clear_stale(directory)
            if count > shards.SHARD_AT:
                self._write_shards(directory, calls, blocks)
            else:
                atomic_write_chunks(directory / CALLS_FILE, self._chunks(order, blocks))
                shards.drop_unnamed(directory, set())  # a sharded recording before: its shards
            with contextlib.suppress(FileNotFoundError):  # its blocks are in calls.jsonl now
                (directory / LEGACY_BLOBS_FILE).unlink()
            return count


def write_stage(
    directory: Path, calls: Iterable[RecordedCall], keep: Callable[[RecordedCall], bool] | None = None
) -> None:
    """Write one stage's calls (see StageRecording.write for `keep`)."""
    recording = StageRecording()
    for call in calls:
        recording.add(call)
    recording.write(directory, keep)
