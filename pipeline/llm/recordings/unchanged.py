"""A stage's recording left in place where writing it again would give the same bytes (issue 33).

A replay serves every call from the stage's own recording, each kept as its line (StageIndex
verbatim_at), and then wrote that recording again: the same bytes, 100-130 us a call at 10k calls
(the kept lines and every block read back, their order worked out, 20-30 MB written and renamed).
The writer now leaves the file where it is when it can show, from what it holds, that the file it
would write is the one there:

- every call it holds is a line of the stage's own recording kept as it was read, none made here,
  no block of its own, and it holds each of that recording's lines once: nothing added or dropped;
- in the order it writes them (its calls' Wheres, read back from the lines as for the write) those
  lines come in the file's own order, and each is a line line_safe leaves as it is, so each line
  written would be its bytes;
- the blocks it would write (those the lines refer to, by id) are the recording's blocks, and the
  recording is one file laid out as the writer lays one out: its call lines, then each block's line
  as blob_line writes it, by id ascending, each line ending in "\\n" (seen by the scan that placed
  its lines: folder_scan.ScannedRecording.as_written); a sharded or older layout is written again;
- the file at the recording's path now is the file the scan opened (the same inode) and hashes to
  the sha256 the scan took of it, so the bytes left are the bytes that were verified (an edit since,
  in place or by a rename, is written over as today, or refused where a kept line no longer matches
  its digest).

Anything else writes the recording as before. Trust is unchanged: the lines served were verified
(and read back against their digests) as before; the file left is byte for byte the one a write
would rename into place, so its pin in dvc.lock holds, and it was never a partial write.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.llm.recordings import shards
from pipeline.llm.recordings.call_places import Where, kept_line, unpacked
from pipeline.llm.recordings.line_format import blob_refs, line_safe
from pipeline.llm.recordings.offsets import READ_BUFFER
from pipeline.llm.recordings.stage_folders import CALLS_FILE

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_index import StageIndex


def kept_in_order(
    recorded: StageIndex, numbers: Iterable[int], count: int, where_in: Callable[[str], Where]
) -> bool:
    """Whether the calls held (`numbers`, as CallPlaces holds them, `count` of them) are the lines of
    `recorded`, each once, and would be written in its order as its bytes, with its blocks, no other;
    `where_in` gives a kept line's Where as the writer sorts by it."""
    lines = len(recorded.lines)
    if not recorded.as_written or count != lines or lines > shards.SHARD_AT:
        return False
    order: list[tuple[Where, int]] = []
    refs: set[str] = set()
    for number in numbers:
        index = kept_line(unpacked(number)[0])
        if index is None:
            return False  # a line made here
        line = recorded.line(index)  # read back and checked against its digest
        if line_safe(line) != line:
            return False  # written otherwise than read
        refs.update(blob_refs(line))
        order.append((where_in(line), index))
    order.sort(key=_where)
    if any(index != at for at, (_, index) in enumerate(order)):
        return False
    return len(refs) == len(recorded.blobs) and all(blob in recorded.blobs for blob in refs)


def same_file(recorded: StageIndex, directory: Path) -> bool:
    """Whether `directory`'s recording is now the one file `recorded` was scanned from (the same
    inode, never through a link) and still hashes to the sha256 the scan took of its bytes."""
    files = recorded.lines.files
    if len(files.paths) != 1 or len(recorded.hashes) != 1 or recorded.hashes[0][0] != CALLS_FILE:
        return False
    path = directory / CALLS_FILE
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        now, scanned = os.fstat(fd), os.fstat(files.fd(0))
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (scanned.st_dev, scanned.st_ino):
            return False
        digest = hashlib.sha256()
        with open(fd, "rb", closefd=False) as stream:
            while chunk := stream.read(READ_BUFFER):
                digest.update(chunk)
        return digest.hexdigest() == recorded.hashes[0][1]
    finally:
        os.close(fd)


def _where(pair: tuple[Where, int]) -> Where:
    return pair[0]
