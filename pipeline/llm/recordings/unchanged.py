"""A stage's recording left in place where writing it again would give the same bytes (issue 33).

A replay serves every call from the stage's own recording, each kept as its line (StageIndex
verbatim_at), and then wrote that recording again: the same bytes, 100-130 us a call at 10k calls
(the kept lines and every block read back, their order worked out, 20-30 MB written and renamed).
The writer now leaves the file where it is when it can show, from what it holds, that the file it
would write is the one there:

- every call it holds is a line of the stage's own recording kept as it was read, none made here,
  no block of its own, and it holds each of that recording's lines once: nothing added or dropped;
- in the order it writes them (its calls' Wheres, as it holds them: each kept line's Where is kept
  beside it, WHERES_HELD lines at most, past which it is read back from the line as the writer reads
  it to sort) those lines come in the file's own order, and each is a line line_safe leaves as it
  is, so each line written would be its bytes;
- the blocks it would write (those the lines refer to, by id) are the recording's blocks, and the
  recording is one file laid out as the writer lays one out: its call lines, then each block's line
  as blob_line writes it, by id ascending, each line ending in "\\n" (seen by the scan that placed
  its lines, which also hashed the ids in their order: folder_scan.ScannedRecording.as_written and
  block_ids); an older layout (a blobs.jsonl beside) is written again;
- the file at the recording's path now is the file the scan opened (the same inode) and hashes to
  the sha256 the scan took of it, so the bytes left are the bytes that were verified (an edit since,
  in place or by a rename, is written over as today, or refused where a kept line no longer matches
  its digest).

A sharded recording (past shards.SHARD_AT calls: a manifest, shards of calls and of blocks, tables of
items) is left where every file is the writer's own, which the scan alone cannot tell (the reader
accepts more than the writer writes), so each is read again (the same inode as scanned, the same
sha256) and checked here, the cheap checks first:
- the order as above, by shard and then by Where: each shard of calls holds the kept lines of its
  key's digit, in the writer's order, as line_safe leaves them, and nothing else (as many "\\n" as
  call lines placed in it, a last "\\n": no block line, no blank line);
- each shard of blocks holds lines exactly as blob_line writes them, of its digit, the ids ascending
  across the shards, and those ids are exactly the blocks the call lines refer to;
- each shard of calls' table of items is the table the writer makes from those lines and their
  items (item_table.writers_table, the writer's code: a table the reader accepts, an item split in
  two runs say, is not left), found under its name and holding those bytes;
- the manifest's bytes are shards.manifest_text of those files, under the names the writer gives.
Then the shard files the manifest does not name are dropped, as after a write.

Anything else writes the recording as before. Trust is unchanged: the lines served were verified
(and read back against their digests) as before; the file left is byte for byte the one a write
would rename into place, so its pin in dvc.lock holds, and it was never a partial write.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from pipeline.llm.recordings import dvc_links, item_table, shards
from pipeline.llm.recordings.call_places import Where, kept_line, unpacked
from pipeline.llm.recordings.line_format import BLOB_REF, blob_line
from pipeline.llm.recordings.offsets import LineTable, OpenFiles
from pipeline.llm.recordings.stage_folders import CALLS_FILE, LEGACY_BLOBS_FILE

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_index import StageIndex


# A recording of more lines than this holds no Where beside its kept lines (265-315 bytes a line
# measured, review12: 66-80 MiB at this bound); `unchanged` reads theirs back from the lines, as the
# writer would to sort them.
WHERES_HELD = 2**18


def unchanged_file(
    recorded: StageIndex,
    directory: Path,
    numbers: Iterable[int],
    count: int,
    wheres: Mapping[int, Where],
    where_of: Callable[[int], Where] | None = None,
) -> bool:
    """Whether the calls held (`numbers`, as CallPlaces holds them, `count` of them) are the lines of
    `recorded`, each once, and would be written in its order as its bytes, with its blocks, no other,
    and the files in `directory` are still the ones `recorded` was read from (see the module).
    `wheres`: the Where the writer holds each kept line under (by the line's number), which it sorts
    by (the Where of the call kept: verbatim_at kept the line as the one of that very context and
    key); a kept line not in it has its Where read back from its line (`where_of`, as the writer
    reads it to sort), or, without `where_of`, is not left."""
    lines = len(recorded.lines)
    if count != lines or lines == 0 or os.path.lexists(directory / LEGACY_BLOBS_FILE):
        return False  # (an older layout's blobs.jsonl, even one put there since the read: the write drops it)
    sharded = lines > shards.SHARD_AT
    if not sharded and not recorded.as_written:
        return False
    order = _order(numbers, wheres, where_of, by_shard=sharded)
    if order is None or any(index != at for at, (_, _, index) in enumerate(order)):
        return False
    if sharded:
        return _unchanged_shards(recorded, directory, order)
    files = recorded.lines.files
    if len(files.paths) != 1 or len(recorded.hashes) != 1 or recorded.hashes[0][0] != CALLS_FILE:
        return False
    data = _same_file(files, 0, directory / CALLS_FILE, recorded.hashes[0][1])
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
Placed = tuple[int, Where, int]  # a kept line's shard number, its Where, its number in the recording


def _order(
    numbers: Iterable[int],
    wheres: Mapping[int, Where],
    where_of: Callable[[int], Where] | None,
    *,
    by_shard: bool,
) -> list[Placed] | None:
    """The kept lines held, in the order the writer writes them (a sharded recording's by shard, then
    by Where; one file's by Where); None where a line was made here (or its Where is not known)."""
    order: list[Placed] = []
    for number in numbers:
        source, shard = unpacked(number)
        index = kept_line(source)
        if index is None:
            return None  # a line made here
        where = wheres.get(index)
        if where is None:
            if where_of is None:
                return None
            where = where_of(number)
        order.append((shard if by_shard else 0, where, index))
    order.sort(key=_placed)
    return order


def _placed(placed: Placed) -> tuple[int, Where]:
    return placed[0], placed[1]


def _same_file(files: OpenFiles, number: int, path: Path, sha: str) -> bytes | None:
    """The bytes at `path` where it is now the file the scan opened as `number` (the same inode,
    never through a link but DVC's into its cache, the file the scan read through it) and still hashes
    to `sha`, the sha256 the scan took of it."""

    def scanned(now: os.stat_result) -> bool:
        then = os.fstat(files.fd(number))
        return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)

    data = _read_regular(path, same=scanned)
    return data if data is not None and hashlib.sha256(data).hexdigest() == sha else None


def _read_regular(
    path: Path, limit: int = -1, same: Callable[[os.stat_result], bool] | None = None
) -> bytes | None:
    """Up to `limit` bytes (-1: all) of the file at `path`, opened never through a link but DVC's
    into its cache; None where it cannot be opened, is no regular file, or `same` says its status
    (fstat) is not the one expected."""
    try:
        fd = dvc_links.open_file(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        now = os.fstat(fd)
        if (same is not None and not same(now)) or not stat.S_ISREG(now.st_mode):
            return None
        with open(fd, "rb", closefd=False) as stream:
            return stream.read(limit)
    finally:
        os.close(fd)


def _unchanged_shards(recorded: StageIndex, directory: Path, order: list[Placed]) -> bool:
    """Whether a sharded recording (pipeline.llm.recordings.shards), whose kept lines `order` holds in
    the writer's order, is the folder the writer would write: each shard of calls its lines in that
    order, each of its digit, as read (line_safe leaves them), nothing else; the blocks canonical, by
    id, each in the shard of its digit, exactly those the call lines refer to; each table of items
    the writer's own for its shard; the manifest the writer's bytes naming them; each file the one
    the scan read (its inode) and hashing to the sha256 verified."""
    table = recorded.lines
    names = [path.name for path in table.files.paths]
    if names[:1] != [CALLS_FILE] or [name for name, _ in recorded.hashes] != names:
        return False
    spans = {table.file[first]: first for first in table.starts}
    written: list[tuple[str, str]] = []
    tables: list[tuple[str, str]] = []
    ids: list[bytes] = []
    refs: set[bytes] = set()
    for number, (name, sha) in enumerate(recorded.hashes[1:], start=1):
        kind, prefix = shards.prefix_of(name)
        data = _same_file(table.files, number, directory / name, sha)
        if data is None or kind not in ("blocks", "calls"):
            return False
        if kind == "blocks" and not _canonical_blocks(data, prefix, ids):
            return False
        if kind == "calls":
            lines = _calls_lines(data, prefix, table, order, spans.get(number))
            if lines is None:
                return False
            refs.update(_BLOB_REF.findall(data))
            text = item_table.writers_table(name, sha, lines)
            tables.append(_table(directory, prefix, text))
        written.append((f"{kind}-{prefix}-{sha[:16]}.jsonl", sha))
    if sorted(refs) != ids or any(not name for name, _ in tables):
        return False
    manifest = _same_file(table.files, 0, directory / CALLS_FILE, recorded.hashes[0][1])
    return manifest == shards.manifest_text(written + tables).encode("utf-8")


def _calls_lines(
    data: bytes, prefix: str, table: LineTable, order: list[Placed], first: int | None
) -> list[tuple[str, bytes]] | None:
    """A shard of calls' (item, line with its "\\n") as the writer writes them from its kept lines,
    where its bytes are those lines, of its digit, in the writer's order, each as line_safe leaves it,
    and nothing else (every line of the file a call line: no block line, no blank line left out)."""
    if first is None or not data.endswith(b"\n") or any(raw in data for raw in _ESCAPED_BREAKS):
        return None
    end, file, shard = first + data.count(b"\n"), table.file[first], int(prefix, 16)
    if end > len(table) or table.file[end - 1] != file or (end < len(table) and table.file[end] == file):
        return None  # a line of the file that is no call line (the lines of a file are together)
    if any(order[at][0] != shard for at in range(first, end)):
        return None
    lines = []
    for at in range(first, end):
        offset = table.offset[at]
        lines.append((order[at][1][1], data[offset : offset + table.length[at] + 1]))  # (its item, its line)
    return lines


def _canonical_blocks(data: bytes, prefix: str, ids: list[bytes]) -> bool:
    """Whether a shard of blocks is as the writer writes one: each line as blob_line writes its id and
    text, each id of the shard's digit (added to `ids`, all shards' in the file's order, which the
    caller compares with the ids the call lines refer to, sorted: ascending, each once)."""
    if not data.endswith(b"\n"):
        return False
    for raw in data[:-1].split(b"\n"):
        try:
            entry = orjson.loads(raw)
            blob, text = entry["blob"], entry["text"]
            if not isinstance(blob, str) or not isinstance(text, str) or not blob.startswith(prefix):
                return False
            if raw != blob_line(blob, text).encode("utf-8"):
                return False
        except (ValueError, KeyError, TypeError, UnicodeEncodeError):
            return False
        ids.append(raw[9 : 9 + len(blob)])  # (canonical: the id's bytes follow '{"blob":"')
    return True


def _table(directory: Path, prefix: str, text: bytes) -> tuple[str, str]:
    """The table of items the writer writes as `text`, (its name, its sha256); ("", "") where the file
    of that name is not those bytes."""
    sha = hashlib.sha256(text).hexdigest()
    name = f"{shards.TABLE_KIND}-{prefix}-{sha[:16]}.jsonl"
    same = _read_regular(directory / name, len(text) + 1) == text  # (no more read of a file of any size)
    return (name, sha) if same else ("", "")
