"""A sharded recording's blocks found where they lie, not read with their whole shard (issue 33).

A call line of a sharded recording (pipeline.llm.recordings.shards) refers to its shared blocks
by id, and a stage's blocks are spread over sixteen block shards by id: auditing one call read and
hashed nearly every block shard whole (about 2 GB at a million calls) for a few kB of text.

A block shard holds its block lines sorted by id, each opening `{"blob":"<id>",` (canonical JSON,
as the writer writes every shard). So a block is found by bisecting the file's bytes: read the line
that starts at or after a middle offset, compare its id, halve. About twenty reads of a few kB
find a block in a shard of a million, with no index to write, keep in step or trust.

Nothing found so is trusted for where it was found: the line found must open with the id asked
for and its text must hash to that id (blocks are content-addressed, line_checks.blob_entry), so a
block at a wrong place, swapped, or edited in place is never served as another. A block not found
so (a shard out of order, a line not as written, a file gone) is not taken as missing: the reader
then reads that shard whole and checks it against the sha256 its manifest gives it, as before,
which names what is wrong. What this does not check, and a whole read did, is the shard's other
bytes: a reader that must vouch for the whole stage (a replay, pinned by dvc.lock) still reads and
hashes every shard (pipeline.llm.recordings.folder_scan); the readers of a few calls that use this
(key_reader.read_keys, item_reader.read_items) verify each call they serve by its checksum.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

import orjson

from pipeline.llm.bounds import MAX_LINE_BYTES
from pipeline.llm.recordings import dvc_links, line_checks, line_format, line_search, shards

OPENING = b'{"blob":"'
ID_LENGTH = 16  # line_format.blob_id: 16 hex digits
CHUNK = 1 << 14  # bytes read a time while looking for a line's end


def _line_from(fd: int, start: int, size: int) -> bytes:
    """The line (without its "\\n") that starts at `start`; at most MAX_LINE_BYTES + 1 bytes of it
    (a longer one is refused by its reader, line_checks.decoded_line)."""
    parts: list[bytes] = []
    held = 0
    at = start
    while at < size and held <= MAX_LINE_BYTES:
        chunk = os.pread(fd, CHUNK, at)
        if not chunk:
            break
        end = chunk.find(b"\n")
        if end >= 0:
            parts.append(chunk[:end])
            break
        parts.append(chunk)
        held += len(chunk)
        at += len(chunk)
    return b"".join(parts)


PROBE = 1 << 12  # bytes read a time while bisecting (a block line is about 1 kB)
HEAD = len(OPENING) + ID_LENGTH + 2  # a block line's opening, through its id's closing quote and comma


def _start_at_or_after(fd: int, position: int, size: int) -> tuple[int, bytes]:
    """The offset of the first line that starts at or after `position` (`size` when none does), and
    that line's first HEAD bytes."""
    if position == 0:
        return 0, os.pread(fd, HEAD, 0)
    at = position - 1  # a line starts at `position` when the byte before it ends a line
    while at < size and at - position <= MAX_LINE_BYTES:  # (no line is longer: then as if none)
        chunk = os.pread(fd, PROBE, at)
        if not chunk:
            break
        end = chunk.find(b"\n")
        if end >= 0:
            head = chunk[end + 1 : end + 1 + HEAD]
            start = at + end + 1
            return start, head if len(head) == HEAD else os.pread(fd, HEAD, start)
        at += len(chunk)
    return size, b""


def _id_of(line: bytes) -> bytes | None:
    """The id a block line opens with, or None for a line not as the writer writes one."""
    if not line.startswith(OPENING) or line[len(OPENING) + ID_LENGTH : HEAD] != b'",':
        return None
    return line[len(OPENING) : len(OPENING) + ID_LENGTH]


def place_of(fd: int, size: int, blob: str, start: int = 0) -> tuple[int, bytes] | None:
    """Where the line of block `blob` starts in a block shard sorted by id (or in the blocks from
    `start` on: a recording in one file, whose blocks follow its calls), and the line; None when
    bisecting does not find it (not there, or the file not in order, or a line not as written).
    Only each probed line's opening is read; the line found is read whole."""
    wanted = blob.encode("ascii")
    low, high = start, size
    # Every line that starts before `low` has an id below `wanted`; the first line that starts at
    # or after `high` (if any) has one at or above it.
    while low < high:
        middle = (low + high) // 2
        at, head = _start_at_or_after(fd, middle, size)
        if at >= high:
            high = middle
            continue
        found = _id_of(head)
        if found is None:
            return None
        if found < wanted:
            low = at + 1
        else:
            high = at
    at, head = _start_at_or_after(fd, low, size)
    if at >= size or _id_of(head) != wanted:
        return None
    return at, _line_from(fd, at, size)


def line_number(fd: int, offset: int) -> int:
    """The number of the line that starts at `offset` (counted only to name a bad line)."""
    number, at = 1, 0
    while at < offset:
        chunk = os.pread(fd, min(1 << 20, offset - at), at)
        if not chunk:
            break
        number += chunk.count(b"\n")
        at += len(chunk)
    return number


def block_lines_start(data: bytes) -> int:
    """Where the block lines of a recording in one file begin (its calls come first): the first
    line that opens as a block line (a call line holds no raw "\\n"); 0 when none does."""
    return 0 if data.startswith(OPENING) else data.find(b"\n" + OPENING) + 1


def placed_blocks(
    path: Path, wanted: Iterable[str], blobs: dict[str, str], problems: list[str], start: int = 0
) -> bool:
    """Add to `blobs` the blocks `wanted` from the block shard at `path` (or the blocks of a
    recording in one file, from `start` on), each found by bisecting and checked against its id (one
    that fails is noted in `problems`, naming its line, as stage_reader.split_recording notes it);
    False when one is not found so (the caller then reads the shard whole)."""
    try:
        fd = dvc_links.open_file(path)  # never through a link, but DVC's into its cache
    except OSError:
        return False  # the whole read names what is wrong (missing, a link)
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            return False  # a folder opens, then fails each read: the whole read names it
        size = facts.st_size
        found: list[tuple[str, int, bytes]] = []
        for blob in sorted(set(wanted)):
            place = place_of(fd, size, blob, start)
            if place is None:
                return False
            found.append((blob, *place))
        for blob, at, line in found:
            text = _text_of(line, blob)
            if text is not None:
                blobs[blob] = text
                continue
            where = f"{path}:{line_number(fd, at)}"  # counted only for a bad line
            entry = line_checks.blob_entry(line_checks.decoded_line(line, where), where, problems)
            if entry is not None:
                blobs[entry[0]] = entry[1]
        return True
    finally:
        os.close(fd)


def _text_of(line: bytes, blob: str) -> str | None:
    """A block line's text when the line is within bounds and is block `blob`'s, its text hashing to
    that id; None for anything else (then read as split_recording reads it, which names the fault)."""
    if len(line) > MAX_LINE_BYTES:
        return None
    try:
        entry = orjson.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    text = entry.get("text")
    if entry.get("blob") != blob or not isinstance(text, str) or line_format.blob_id(text) != blob:
        return None
    return text


def sharded_blocks(directory: Path, named: list[tuple[str, str]], refs: set[str]) -> dict[str, str] | None:
    """The blocks `refs` of a sharded recording whose manifest names `named`, each found where it
    lies in its block shard or, failing that, in its shard read whole and checked against its hash;
    None for one not found either way. A block that does not hash to its id is left out (noted only):
    the call that uses it then fails its checksum, and is shown so."""
    blobs: dict[str, str] = {}
    problems: list[str] = []
    for name, sha in named:
        wanted = {blob for blob in refs if shards.prefix_of(name) == ("blocks", shards.shard_of(blob))}
        if not wanted or placed_blocks(directory / name, wanted, blobs, problems):
            continue
        data = shards.shard_bytes(directory, name, sha, None)
        if not line_search.blocks_by_opening(directory / name, data, wanted, blobs, problems):
            return None
    return blobs
