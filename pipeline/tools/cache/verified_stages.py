"""`judgeloop cache verify`'s read of the recordings, one stage at a time through its placed lines
(issue 33).

verify re-derives every recorded call's key and keeps, of each, its place and two digests
(pipeline.tools.cache.recorded_sums.Recorded). Read tolerantly (pipeline.tools.inventory.recorded_calls),
a stage's recording is held whole while it is checked: every shard's text and every block of the
stage as a string. At a million calls the refinement stage's recording is several GB, so verify's
peak was that stage's size (over 8 GB at 964,327 calls).

Here a stage is first read as a replay reads it (pipeline.llm.recordings.folder_scan: one pass that
hashes every file and checks the pin, the shards and every block line, keeping only each line's
place and digest), then each call line is read back, checked against its digest, parsed with its
blocks and verified in full (its key re-derived, its checksum), and dropped. Memory: about 40 bytes
a line, the blocks' bounded cache, and what verify keeps a call.

Where anything in a stage is wrong (a pin, a shard, a block, a line that does not parse or verify),
this read gives no answer for the stage, and verify reads it tolerantly as before: every problem is
listed in the same words, and a healthy stage gives the same checksums, places and count.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pipeline.errors import JudgeloopError
from pipeline.llm.recordings import line_checks, shards, stage_folders
from pipeline.llm.recordings.folder_scan import ScannedRecording, scan_folder
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.records import CallRecord

T = TypeVar("T")


class Untrusted(Exception):
    """Something in the stage is wrong: the tolerant read says what."""


def stage_entries(
    root: Path, directory: Path, pins: Pins | None, keep: Callable[[Path, int, CallRecord], T]
) -> tuple[dict[str, T], int] | None:
    """Each trusted call's key -> keep(file, line number, record) (the first line of a key, in the
    recording's order within its file), and the number of call lines; None where the stage cannot be
    trusted whole (the caller reads it tolerantly, for its problems)."""
    try:
        stage_folders.stage_dir(root, directory.name)
        scanned = _scanned(directory, pins)
    except JudgeloopError:
        return None
    try:
        return _entries(scanned, keep)
    except (JudgeloopError, Untrusted):
        return None
    finally:
        scanned.calls.files.close()


def _scanned(directory: Path, pins: Pins | None) -> ScannedRecording:
    try:
        return scan_folder(directory, pins)
    except shards.RACES:  # a writer replaced the manifest and its shards while they were read: once more
        return scan_folder(directory, pins)


def _entries(
    scanned: ScannedRecording, keep: Callable[[Path, int, CallRecord], T]
) -> tuple[dict[str, T], int]:
    lines, blobs = scanned.calls, scanned.blobs
    entries: dict[str, T] = {}
    # An item's calls together, so that its blocks are read back once (LineTable.by_item); a key's
    # lines are in one file (the shards are cut by key), each file in its order: its first line wins.
    for found, line in lines.by_item():
        call = line_checks.parse_call_line(line, blobs, lines.where(found))
        if call.record.problem() is not None:
            raise Untrusted(lines.where(found))
        record = call.current().record  # under today's key recipe, as the pipeline reads it
        if record.key not in entries:
            entries[record.key] = keep(lines.files.paths[lines.file[found]], lines.number[found], record)
    return entries, len(lines)
