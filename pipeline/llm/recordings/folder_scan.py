"""One pass over a stage's recording folder: every file hashed as it is streamed, and every line's
place and digest kept (pipeline.llm.recordings.offsets), never the lines themselves (issue 33).

What the pass checks, and in which order its problems are raised, is what reading the folder whole
checked (pipeline.llm.recordings.pins.Pins.pinned_files, then stage_reader.split_recording): a symbolic
link first; then the folder against its pin in dvc.lock, over the md5 of the bytes this pass read;
then each file's problems (a shard that does not hash to its manifest's sha256 or is missing, a
stray, a line too long or not UTF-8); then a blob line that does not hash to its id. The calls
themselves are verified by the caller (pipeline.llm.recordings.stage_index), each read back through
the table and checked against its digest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.files import TMP_SUFFIX
from pipeline.llm.recordings import line_checks, line_format, offsets, shards, stage_folders
from pipeline.llm.recordings.offsets import FileRead, LazyBlobs, LineTable, OpenFiles, hash_file
from pipeline.llm.recordings.pins import MAX_FILE_BYTES, Pins
from pipeline.llm.recordings.verified_memo import VerifiedMemo, files_digest

BLOB_OPENING = b'{"blob":'


@dataclass
class ScannedRecording:
    """A stage's recording as placed lines: its call lines in order, its blocks by id, and each file
    read with its sha256, in order (what the verified memo's digest covers)."""

    calls: LineTable
    blobs: LazyBlobs
    hashes: list[tuple[str, str]]
    # Whether it is one file laid out as StageRecording.write lays one out: its call lines, then its
    # blocks' lines as blob_line writes them, by id ascending, each line ending in "\n". (Whether
    # its calls are in the writer's order, and its blocks exactly those they refer to, only the
    # writer can tell: StageCalls.unchanged.)
    as_written: bool = False
    block_ids: str = ""  # the sha256 of its blocks' ids, in the file's order (as_written: ascending)


@dataclass
class _Scan:
    directory: Path
    files: OpenFiles = field(default_factory=OpenFiles)
    problems: list[CorruptRecordError] = field(default_factory=list)
    blob_problems: list[str] = field(default_factory=list)
    md5s: dict[str, str] = field(default_factory=dict)
    hashes: list[tuple[str, str]] = field(default_factory=list)
    # Whether the folder's pin in dvc.lock is checked (over each file's md5): an md5 costs about
    # three times a sha256, and nothing else reads it.
    pinned: bool = True
    # The recording's layout as the writer's (ScannedRecording.as_written), as far as seen so far.
    as_written: bool = True
    _last_blob: str = ""
    _block_ids: hashlib._Hash = field(default_factory=hashlib.sha256)

    def __post_init__(self) -> None:
        self.calls = LineTable(self.files)
        self.blobs = LazyBlobs(LineTable(self.files))

    def run(self, names: list[str]) -> None:
        path = self.directory / stage_folders.CALLS_FILE
        try:
            opened = self.files.open(path)  # read once: the file whose opening says what it is
        except FileNotFoundError:
            raise shards.MissingShardError(f"{path}: gone while read (a writer replaced it).") from None
        fd = self.files.fd(opened)
        head = os.pread(fd, len(shards.MANIFEST_OPENING), 0)
        if head == shards.MANIFEST_OPENING.encode("ascii"):
            self.as_written = False  # a sharded recording is always written again (see StageCalls.unchanged)
            self._sharded(path, fd, names)
            return
        self._noted(lambda: shards.refuse_strays(self.directory, names, set()))
        self._stream(path, holds_calls=True, opened=opened)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            self.as_written = False
        legacy = self.directory / stage_folders.LEGACY_BLOBS_FILE
        if legacy.is_file():
            self.as_written = False
            self._stream(legacy, holds_calls=False)

    def _noted(self, check: Callable[[], None]) -> None:
        try:
            check()
        except CorruptRecordError as exc:
            self.problems.append(exc)

    def _sharded(self, path: Path, fd: int, names: list[str]) -> None:
        with open(fd, "rb", closefd=False) as stream:
            data = stream.read()
        self.md5s[path.name] = hashlib.md5(data).hexdigest()
        self.hashes.append((path.name, hashlib.sha256(data).hexdigest()))
        try:
            named = shards.parse_manifest(path, line_checks.recording_text(path, data))
        except CorruptRecordError as exc:  # raised once the folder's pin is checked, which comes first
            self.problems.append(exc)
            return
        self._noted(lambda: shards.refuse_strays(self.directory, names, {name for name, _ in named}))
        for name, sha in named:
            self._stream(self.directory / name, holds_calls=name.startswith("calls-"), sha=sha)

    def _stream(
        self, path: Path, *, holds_calls: bool, sha: str | None = None, opened: int | None = None
    ) -> None:
        try:
            number = self.files.open(path) if opened is None else opened
        except FileNotFoundError:
            fix = shards.FIX.format(folder=self.directory)
            self.problems.append(shards.MissingShardError(f"{path}: named by calls.jsonl but missing. {fix}"))
            return
        except CorruptRecordError as exc:  # a folder where the shard should be: noted, as a missing one
            self.problems.append(exc)
            return
        fd = self.files.fd(number)
        read = FileRead()
        size = os.fstat(fd).st_size
        if size > line_checks.MAX_RECORDING_BYTES:
            fix = f"Fix: restore the file from git (git checkout -- {path}), or re-record the stage."
            raise CorruptRecordError(f"{path}: {size / 2**30:.1f} GiB, more than a recording holds. {fix}")
        for line_number, offset, body, text in offsets.stream_lines(path, fd, read, md5=self.pinned):
            if text is None:
                continue
            if holds_calls and not body.startswith(BLOB_OPENING):
                self.calls.add(number, offset, body, line_number)
                self.as_written = self.as_written and not self._last_blob  # no call line after a block
                continue
            entry = line_checks.blob_entry(text, f"{path}:{line_number}", self.blob_problems)
            if entry is not None:
                self.blobs.place(entry[0], number, offset, body, line_number, len(entry[1]))
                self._note_block(entry, text)
        self.md5s[path.name] = read.md5
        self.hashes.append((path.name, read.sha256))
        if sha is not None and read.sha256 != sha:
            fix = shards.FIX.format(folder=self.directory)
            edited = f"{path}: does not hash to the sha256 calls.jsonl gives it (edited). {fix}"
            self.problems.append(CorruptRecordError(edited))
        elif read.problem is not None:
            self.problems.append(read.problem)

    def _note_block(self, entry: tuple[str, str], text: str) -> None:
        """Whether this block's line keeps the layout as the writer's: after the one before by id,
        and its bytes those blob_line gives its id and text."""
        if self.as_written:
            self.as_written = entry[0] > self._last_blob and text == line_format.blob_line(*entry)
        self._last_blob = entry[0]
        self._block_ids.update(entry[0].encode("utf-8"))

    def check_pin(self, pins: Pins) -> None:
        """The folder against its pin in dvc.lock: the md5 of each file as this pass read it (of
        any other file of the folder, as it is now)."""
        if not pins.needs_hashes(self.directory):
            return
        md5s: dict[str, str] = {}
        for path in sorted(self.directory.rglob("*")):
            if not path.is_file() or path.name.endswith(TMP_SUFFIX):
                continue
            rel = path.relative_to(self.directory).as_posix()
            if rel not in self.md5s and path.stat().st_size > MAX_FILE_BYTES:
                raise CorruptRecordError(
                    f"{path}: {path.stat().st_size / 2**30:.1f} GiB, more than a recording holds. "
                    f"Fix: restore the file from git (git checkout -- {path}), or re-record the stage."
                )
            md5s[rel] = self.md5s.get(rel) or hash_file(path)
        for name in self.md5s.keys() - md5s.keys():  # read, then gone: a writer replaced the folder
            gone = self.directory / name
            raise shards.MissingShardError(f"{gone}: gone while read (a writer replaced it).")
        pins.check_hashes(self.directory, md5s)

    def raise_problems(self) -> None:
        if self.problems:
            raise self.problems[0]
        if self.blob_problems:
            raise CorruptRecordError(
                f"{self.blob_problems[0]}. Fix: restore the file from git "
                f"(git checkout -- {self.directory}), or re-record the stage."
            )


_S = TypeVar("_S", bound=_Scan)


def scan_folder(directory: Path, pins: Pins | None = None) -> ScannedRecording:
    """A stage's recording scanned (see the module): its placed lines, every file hashed, the folder
    checked against its pin (`pins`, when given) and for strays; CorruptRecordError (or
    LockMismatchError) for what cannot be trusted, in the order a whole read raised it."""
    stage_folders.refuse_linked(directory)
    scan = _checked(_Scan(directory, pinned=pins is not None and pins.needs_hashes(directory)), pins)
    try:
        scan.raise_problems()
    except BaseException:
        scan.files.close()
        raise
    block_ids = scan._block_ids.hexdigest()
    return ScannedRecording(scan.calls, scan.blobs, scan.hashes, scan.as_written, block_ids)


def _checked(scan: _S, pins: Pins | None) -> _S:
    """`scan` run over its folder's files and the folder checked against its pin (`pins`, when
    given), in the order a whole read checked them (see the module); its files closed if that
    raises. The problems it notes are the caller's to raise or act on."""
    try:
        scan.run(os.listdir(scan.directory))
        if pins is not None:
            scan.check_pin(pins)
    except BaseException:
        scan.files.close()
        raise
    return scan


@dataclass
class _Hashed(_Scan):
    """A scan that only hashes each file (as _Scan hashes it: the same names and sha256s, in the
    same order), placing no line and checking no block: for content the verified memo holds, whose
    lines and blocks were checked in full before. Its call files are noted for their models."""

    call_files: list[int] = field(default_factory=list)

    def _stream(
        self, path: Path, *, holds_calls: bool, sha: str | None = None, opened: int | None = None
    ) -> None:
        number = self.files.open(path) if opened is None else opened  # FileNotFoundError: read whole
        fd = self.files.fd(number)
        if os.fstat(fd).st_size > line_checks.MAX_RECORDING_BYTES:
            raise _NotAsVerified(path)
        sha256, md5 = hashlib.sha256(), hashlib.md5() if self.pinned else None
        with open(fd, "rb", closefd=False) as stream:
            while chunk := stream.read(offsets.READ_BUFFER):
                sha256.update(chunk)
                if md5 is not None:
                    md5.update(chunk)
        self.md5s[path.name] = "" if md5 is None else md5.hexdigest()
        self.hashes.append((path.name, sha256.hexdigest()))
        if sha is not None and sha256.hexdigest() != sha:
            raise _NotAsVerified(path)
        if holds_calls:
            self.call_files.append(number)

    def models(self) -> frozenset[tuple[str, str, str]]:
        """The models of the call lines of the files hashed (read again: the memo holds them)."""
        found: set[tuple[str, str, str]] = set()
        for number in self.call_files:
            with open(self.files.fd(number), "rb", buffering=offsets.READ_BUFFER, closefd=False) as stream:
                stream.seek(0)
                for raw in stream:
                    if not raw.startswith(BLOB_OPENING):
                        model = orjson.loads(raw)["model"]
                        found.add((str(model["backend"]), str(model["name"]), str(model["digest"])))
        return frozenset(found)


class _NotAsVerified(Exception):
    """A file a verified recording could not hold (read whole instead, which names what is wrong)."""


Models = frozenset[tuple[str, str, str]]
Hashed = Callable[[list[tuple[str, str]], dict[str, str], dict[str, os.stat_result], Models], None]


def verified_models(
    directory: Path, pins: Pins | None, memo: VerifiedMemo, hashed: Hashed | None = None
) -> frozenset[tuple[str, str, str]] | None:
    """The models (backend, name, digest) of a stage's recording whose content `memo` holds as verified
    in full, read without placing its lines or checking its blocks again: every file hashed as
    scan_folder hashes it, the folder checked against its pin and for strays, each call line's model
    read. None where the memo does not hold this content, or anything is not as a verified recording
    is (the caller then reads it with scan_folder, which verifies it and names what is wrong).
    `hashed`, for content the memo holds: told each file's sha256 (in order), md5 ("" unpinned),
    status once read, and the models (pipeline.llm.recordings.models_memo remembers them)."""
    stage_folders.refuse_linked(directory)
    scan = _Hashed(directory, pinned=pins is not None and pins.needs_hashes(directory))
    try:
        if _checked(scan, pins).problems or memo.holds_digest(files_digest(scan.hashes)) is not None:
            return None
        models = scan.models()
        if hashed is not None:  # the files' status after their last read
            opened = {path.name: os.fstat(scan.files.fd(n)) for n, path in enumerate(scan.files.paths)}
            hashed(scan.hashes, scan.md5s, opened, models)
        return models
    except (OSError, ValueError, KeyError, TypeError, AttributeError, _NotAsVerified, CorruptRecordError):
        return None
    finally:
        scan.files.close()
