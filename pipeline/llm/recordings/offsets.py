"""A stage's recording held as offsets into its files, each line read back and checked when served.

A StageIndex (pipeline.llm.recordings.stage_index) held every line of its recording in memory, about
10-18 kB a call: a replay of 30k calls peaked at 1.25 GB and the report at 0.58 GB (issue 33), so
that a million calls would need many times the 2 GB target. It now holds, per line, where it is
(file, offset, length, line number: 18 bytes) and a 16-byte digest of its bytes (SHA-256, cut), and reads
the line again from its file when it is served: about 40 bytes a line and the key map.

Nothing on disk is believed for it. The table is built in one pass over the files (scan_folder),
the same pass that hashes them: each file's sha256 (checked against the shard manifest, and the
recording's digest for the verified memo) and md5 (checked against the folder's pin in dvc.lock)
are taken over the very bytes whose offsets and digests are kept. The caller then verifies (or, for
content the memo holds as verified, scans) every call line as read back through the table. A line
served later is read through the descriptor the pass opened (the file it hashed, even if a writer
has since renamed another over it) and checked against its digest before use: a byte changed on
disk since, by an edit in place, is refused naming the file and line, never served.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import os
import stat
import threading
import weakref
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.bounds import MAX_LINE_BYTES
from pipeline.llm.recordings.dvc_links import open_file
from pipeline.llm.recordings.key_places import BlockPlaces

DIGEST_BYTES = 16
READ_BUFFER = 1 << 20
FIX = "Fix: restore the file from git (git checkout -- {path}), or re-record the stage."


def line_digest(data: bytes) -> bytes:
    """The first 16 bytes of the line's SHA-256: as hard to match by another line as a 16-byte BLAKE2b
    (what it was), and faster where the CPU computes SHA-256 itself (x86 SHA extensions, ARMv8),
    which OpenSSL uses: 2.6 against 4.4 us for a 1 kB block line, 5.1 against 9.5 for a 2.6 kB call
    line, and every line is digested as its file is scanned and again each time it is read back."""
    return hashlib.sha256(data).digest()[:DIGEST_BYTES]


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class OpenFiles:
    """The recording's files as the scan opened them, by number; closed when no table uses them."""

    def __init__(self) -> None:
        self.paths: list[Path] = []
        self._fds: list[int] = []
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    def open(self, path: Path) -> int:
        """Open `path` (never through a symbolic link, but for one DVC made into its cache:
        dvc_links.open_file) and number it; OSError as os.open raises it, CorruptRecordError where it
        is not a file (a folder opens for reading, then fails each read)."""
        fd = open_file(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fix = (
                f"Fix: restore the stage's folder from git (git checkout -- {path.parent}), or re-record it."
            )
            raise CorruptRecordError(f"{path}: not a file (a folder or another kind of entry). {fix}")
        self._fds.append(fd)
        self.paths.append(path)
        return len(self.paths) - 1

    def fd(self, number: int) -> int:
        return self._fds[number]

    def close(self) -> None:
        self._finalizer()


@dataclass
class LineTable:
    """Lines of the recording's files: each one's file, offset, length, line number and digest."""

    files: OpenFiles
    file: array[int] = field(default_factory=lambda: array("H"))
    offset: array[int] = field(default_factory=lambda: array("Q"))
    length: array[int] = field(default_factory=lambda: array("I"))
    number: array[int] = field(default_factory=lambda: array("I"))
    digests: bytearray = field(default_factory=bytearray)
    starts: list[int] = field(default_factory=list)  # where each file's lines begin (they are together)

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, file: int, offset: int, data: bytes, number: int) -> int:
        if not self.file or self.file[-1] != file:
            self.starts.append(len(self.offset))
        self.file.append(file)
        self.offset.append(offset)
        self.length.append(len(data))
        self.number.append(number)
        self.digests += line_digest(data)
        return len(self.offset) - 1

    def where(self, index: int) -> str:
        return f"{self.files.paths[self.file[index]]}:{self.number[index]}"

    def text(self, index: int) -> str:
        """The line at `index`, read from its file and checked against the digest taken when the
        file was hashed; CorruptRecordError, naming the file and line, if it changed since."""
        length = self.length[index]
        data = os.pread(self.files.fd(self.file[index]), length, self.offset[index])
        start = index * DIGEST_BYTES
        if len(data) != length or line_digest(data) != self.digests[start : start + DIGEST_BYTES]:
            path = self.files.paths[self.file[index]]
            raise CorruptRecordError(
                f"{self.where(index)}: changed on disk since the recording was read and checked, so it "
                f"is not served. {FIX.format(path=path)}"
            )
        return data.decode("utf-8")

    def by_item(self) -> Iterator[tuple[int, str]]:
        """Every line once, as (index, text read and checked as `text` does): each file's lines in
        their order, the files' lines merged by the item their context names, so that the calls of
        one item, which share its transcript's blocks, come together (issue 33).

        A sharded recording's calls are cut into shards by key, each shard in the recording's order
        (by item): read shard after shard, an item's blocks are asked for once in each shard, 16
        times over a stage whose blocks are far more than LazyBlobs keeps, each time read back from
        the file (at 9,683 calls, 3.2 block reads a block in the judge stage). Merged, each block is
        read about once. The item is only an order: a line that names none, or names it otherwise,
        is still read, checked and handed on, in its file's order."""
        ends = [*self.starts[1:], len(self)] if self.starts else []
        heads: list[tuple[str, int, int, int, str]] = []
        for rank, (start, end) in enumerate(zip(self.starts, ends, strict=True)):
            text = self.text(start)
            heads.append((_item_hint(text), rank, start, end, text))
        heapq.heapify(heads)
        while heads:
            _, rank, index, end, text = heads[0]
            yield index, text
            if index + 1 < end:
                following = self.text(index + 1)
                heapq.heapreplace(heads, (_item_hint(following), rank, index + 1, end, following))
            else:
                heapq.heappop(heads)


def _item_hint(line: str) -> str:
    """The item a call line's context names, read from its opening without parsing it: a canonical
    line opens with its checksum, then its context (keys sorted, "item" second). Only an order for
    LineTable.by_item, never trusted: "" when it is not there."""
    at = line.find('"item":"', 0, 512)
    if at < 0:
        return ""
    start = at + len('"item":"')
    return line[start : line.find('"', start)]


class LazyBlobs(dict[str, str]):
    """A recording's shared blocks by id, each read through its LineTable when asked for (its line
    checked against its digest) and kept in a bounded cache: an interview's blocks are shared by
    many calls of the same item, served one after the other.

    The blocks kept are this dict's own entries, so that one kept is found by a dict lookup in C, as
    in the plain dict of blocks a parse was given before the index (unpack_content asks for a dozen
    blocks or more a call, and two Python calls a block cost about 15 us a call); one not kept is
    read in __missing__. `[]`, `in`, `get`, iteration and len are the recording's blocks, not the
    cache's. Past CACHE_CHARS the oldest blocks go, down to half of it, so that the item being
    served keeps its blocks (emptied whole, an item's blocks read before the emptying were read
    again for each of its calls)."""

    CACHE_CHARS = 8 * 2**20
    LENGTHS_KEPT = 1 << 14

    def __init__(self, table: LineTable) -> None:
        super().__init__()
        self.table = table
        self.at = BlockPlaces()  # blob id -> its line in `table` (packed: pipeline.llm.recordings.key_places)
        # Each line's text's length in characters, by its index in `table`, taken as it was checked
        # against its id when scanned: a served line's blocks are then found in the request a caller
        # holds, without reading them back (StageIndex.call_with).
        self.chars = array("I")
        self._lengths: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def __missing__(self, blob: str) -> str:
        found = self.at.get(blob)
        if found is None:
            raise KeyError(blob)
        text = orjson.loads(self.table.text(found))["text"]
        assert isinstance(text, str)  # its line was a blob line when it was placed, and is the same bytes
        with self._lock:
            if not dict.__contains__(self, blob):
                if self._chars + len(text) > self.CACHE_CHARS:
                    self._let_go_of_oldest()
                dict.__setitem__(self, blob, text)
                self._chars += len(text)
        return text

    def _let_go_of_oldest(self) -> None:
        """(under the lock) The blocks kept longest let go of, down to half of CACHE_CHARS."""
        dropped: list[str] = []
        for blob, text in dict.items(self):
            if self._chars <= self.CACHE_CHARS // 2:
                break
            dropped.append(blob)
            self._chars -= len(text)
        for blob in dropped:
            dict.__delitem__(self, blob)

    def place(self, blob: str, file: int, offset: int, data: bytes, number: int, chars: int) -> None:
        """Place the blob line of `blob` (its bytes `data`, its text `chars` characters long)."""
        self.at[blob] = self.table.add(file, offset, data, number)
        self.chars.append(chars)

    def length(self, blob: str) -> int | None:
        """The length in characters of the text of `blob` (None: not a block of this recording).
        The last LENGTHS_KEPT asked for are kept by id (an item's calls ask for the same blocks)."""
        chars = self._lengths.get(blob)
        if chars is None:
            found = self.at.get(blob)
            if found is None or found >= len(self.chars):
                return None
            chars = self.chars[found]
            if len(self._lengths) >= self.LENGTHS_KEPT:
                self._lengths = {}  # (a new dict, not cleared: another thread may be reading it)
            self._lengths[blob] = chars
        return chars

    def __contains__(self, blob: object) -> bool:
        return blob in self.at

    def get(self, blob: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self[blob] if blob in self.at else default

    def clear_cache(self) -> None:
        """Let go of the blocks kept (they are read again when next asked for)."""
        with self._lock:
            dict.clear(self)
            self._chars = 0

    def __iter__(self) -> Iterator[str]:
        return iter(self.at)

    def __len__(self) -> int:
        return len(self.at)

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # as a dict's

    def keys(self) -> NoReturn:
        raise TypeError("a recording's blocks are read when asked for: iterate them for their ids")

    items = values = keys


@dataclass
class FileRead:
    """One file streamed line by line: its hashes, and the first problem found in it (raised by
    the caller once the folder's pin has been checked, which comes first)."""

    sha256: str = ""
    md5: str = ""
    problem: CorruptRecordError | None = None


Placed = tuple[int, int, bytes, str | None]  # a line's number, offset, bytes and text


def stream_lines(path: Path, fd: int, read: FileRead, *, md5: bool = True) -> Iterator[Placed]:
    """(line number, offset, bytes, text) for each line of the file open at `fd`, split at "\\n"
    only; text None for a line that is too long or not UTF-8 (its problem noted in `read`, the first
    one kept). The file's sha256 and (unless `md5` is False: "" then) md5 are taken over exactly the
    bytes read, into `read`."""
    fix = FIX.format(path=path)
    sha, digest_md5 = hashlib.sha256(), hashlib.md5() if md5 else None
    with open(fd, "rb", buffering=READ_BUFFER, closefd=False) as stream:
        stream.seek(0)
        offset, number = 0, 0
        while raw := stream.readline():
            number += 1
            sha.update(raw)
            if digest_md5 is not None:
                digest_md5.update(raw)
            body = raw[:-1] if raw.endswith(b"\n") else raw
            text = _decoded(body, path, number, fix, read)
            yield number, offset, body, text
            offset += len(raw)
    read.sha256, read.md5 = sha.hexdigest(), "" if digest_md5 is None else digest_md5.hexdigest()


def _decoded(body: bytes, path: Path, number: int, fix: str, read: FileRead) -> str | None:
    if len(body) > MAX_LINE_BYTES:
        if read.problem is None:
            read.problem = CorruptRecordError(
                f"{path}:{number}: longer than {MAX_LINE_BYTES:,} bytes, more than a call. {fix}"
            )
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if read.problem is None:
            read.problem = CorruptRecordError(
                f"{path}:{number}: byte 0x{body[exc.start]:02x} is not UTF-8. {fix}"
            )
        return None


def hash_file(path: Path) -> str:
    """md5 of a file of the folder that is not read as the recording (for the folder's pin)."""
    md5 = hashlib.md5()
    with open(path, "rb") as stream:
        while chunk := stream.read(READ_BUFFER):
            md5.update(chunk)
    return md5.hexdigest()


def read_small(fd: int) -> bytes:
    """A whole small file (a manifest) from its descriptor."""
    with open(fd, "rb", closefd=False) as stream:
        stream.seek(0)
        return stream.read()
