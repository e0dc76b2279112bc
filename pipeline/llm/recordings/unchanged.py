"""A stage's recording left in place where writing it again would give the same bytes (issue 33).

A replay serves every call from the stage's own recording, each kept as its line (StageIndex
verbatim_at), and then wrote that recording again: the same bytes, 100-130 us a call at 10k calls
(the kept lines and every block read back, their order worked out, 20-30 MB written and renamed).
The writer now leaves the file where it is when it can show, from what it holds, that the file it
would write is the one there:

- every call it holds is a line of the stage's own recording kept as it was read, none made here,
  no block of its own, and it holds each of that recording's lines once: nothing added or dropped;
- in the order it writes them (its calls' Wheres, as it holds them: for a recording of one file,
  each kept line's Where is kept beside it, 4,096 at most) those lines come in the file's own order,
  and each is a line line_safe leaves as it is, so each line written would be its bytes;
- the blocks it would write (those the lines refer to, by id) are the recording's blocks, and the
  recording is one file laid out as the writer lays one out: its call lines, then each block's line
  as blob_line writes it, by id ascending, each line ending in "\\n" (seen by the scan that placed
  its lines, which also hashed the ids in their order: folder_scan.ScannedRecording.as_written and
  block_ids); a sharded or older layout is written again;
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
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.llm.recordings import dvc_links, shards
from pipeline.llm.recordings.call_places import Where, kept_line, unpacked
from pipeline.llm.recordings.line_format import BLOB_REF
from pipeline.llm.recordings.stage_folders import CALLS_FILE

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_index import StageIndex


def unchanged_file(
    recorded: StageIndex, directory: Path, numbers: Iterable[int], count: int, wheres: Mapping[int, Where]
) -> bool:
    """Whether the calls held (`numbers`, as CallPlaces holds them, `count` of them) are the lines of
    `recorded`, each once, and would be written in its order as its bytes, with its blocks, no other,
    and the file in `directory` is still the one `recorded` was read from (see the module). `wheres`:
    the Where the writer holds each kept line under (by the line's number), which it sorts by (the
    Where of the call kept: verbatim_at kept the line as the one of that very context and key)."""
    lines = len(recorded.lines)
    if not recorded.as_written or count != lines or not 0 < lines <= shards.SHARD_AT:
        return False
    order: list[tuple[Where, int]] = []
    for number in numbers:
        index = kept_line(unpacked(number)[0])
        where = None if index is None else wheres.get(index)
        if index is None or where is None:
            return False  # a line made here
        order.append((where, index))
    order.sort(key=_where)
    if any(index != at for at, (_, index) in enumerate(order)):
        return False
    data = _same_file(recorded, directory)
    if data is None:
        return False
    # The call lines come first (as_written): each is written as line_safe leaves it, which is as
    # read where none of the breaks it escapes is in it (UTF-8: each has one spelling in bytes).
    end = recorded.lines.offset[lines - 1] + recorded.lines.length[lines - 1]
    if any(data.find(raw, 0, end) >= 0 for raw in _ESCAPED_BREAKS):
        return False
    # Then the blocks, each line as blob_line writes it, by id ascending (as_written): the blocks
    # written would be those the call lines refer to (as blob_refs finds them), by id.
    refs = sorted(set(_BLOB_REF.findall(data, 0, end)))
    return hashlib.sha256(b"".join(refs)).hexdigest() == recorded.block_ids  # as the scan took them


_ESCAPED_BREAKS = tuple(char.encode("utf-8") for char in ("\x85", "\u2028", "\u2029"))  # as line_safe
_BLOB_REF = re.compile(BLOB_REF.pattern.encode("ascii"))


def _same_file(recorded: StageIndex, directory: Path) -> bytes | None:
    """The bytes of `directory`'s recording where it is now the one file `recorded` was scanned from
    (the same inode, never through a link but DVC's into its cache) and still hashes to the sha256
    the scan took of it."""
    files = recorded.lines.files
    if len(files.paths) != 1 or len(recorded.hashes) != 1 or recorded.hashes[0][0] != CALLS_FILE:
        return None
    path = directory / CALLS_FILE
    try:  # never through a link, but DVC's into its cache (the file the scan read through it)
        fd = dvc_links.open_file(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        now, scanned = os.fstat(fd), os.fstat(files.fd(0))
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (scanned.st_dev, scanned.st_ino):
            return None
        with open(fd, "rb", closefd=False) as stream:
            data = stream.read()
    finally:
        os.close(fd)
    return data if hashlib.sha256(data).hexdigest() == recorded.hashes[0][1] else None


def _where(pair: tuple[Where, int]) -> Where:
    return pair[0]
