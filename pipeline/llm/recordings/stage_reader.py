"""A stage's recording read whole: split into its call lines and its blocks, every call verified.

split_recording reads calls.jsonl (or the shards its manifest names, pipeline.llm.recordings.shards,
each checked against its hash; or, from before the blocks moved into calls.jsonl, the blobs.jsonl
beside it) and checks every block against its id, listing the lines that fail rather than raising,
for the tolerant readers (cache verify, gc, audit) to report. read_stage serves each call verified
(line_checks.trusted_call): a damaged file fails, naming its line, rather than being served.
Content verified in full before is remembered (pipeline.llm.recordings.verified_memo) and then
parsed, not verified again.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import line_checks, shards
from pipeline.llm.recordings.line_checks import blob_entry, recording_text, trusted_call
from pipeline.llm.recordings.line_format import file_lines
from pipeline.llm.recordings.stage_folders import (
    CALLS_FILE,
    LEGACY_BLOBS_FILE,
    has_recording,
    refuse_linked,
    stage_dir,
    stage_dirs,
)
from pipeline.llm.recordings.verified_memo import IN_PROCESS, VerifiedMemo
from pipeline.llm.records import RecordedCall


@dataclass(frozen=True)
class RecordingLines:
    """A stage's recording split into its parts: the call lines (with their numbers) and the blobs,
    and every line that is neither, for the tolerant readers to report."""

    path: Path
    calls: list[tuple[int, str]]
    blobs: Mapping[str, str]
    problems: list[str]
    # A sharded recording (pipeline.llm.recordings.shards): each shard file with the number its first
    # line has in `calls`' numbering, which runs on from shard to shard.
    sources: tuple[tuple[int, Path], ...] = ()
    # Each file read, by name, with the sha256 of its bytes, in order: what the verified memo's digest
    # covers (pipeline.llm.recordings.verified_memo); empty for a recording put together otherwise.
    hashes: tuple[tuple[str, str], ...] = ()

    def located(self, number: int) -> tuple[Path, int]:
        """The file and line of a line numbered `number` here."""
        if not self.sources:
            return self.path, number
        at = bisect.bisect_right([first for first, _ in self.sources], number) - 1
        first, path = self.sources[max(at, 0)]
        return path, number - first + 1

    def where(self, number: int) -> str:
        path, line = self.located(number)
        return f"{path}:{line}"


def split_recording(directory: Path, files: dict[str, bytes] | None = None) -> RecordingLines:
    """Read a stage's recording: calls.jsonl (and a blobs.jsonl beside it, from before they were one
    file; or the shards it names, pipeline.llm.recordings.shards), every blob checked against its id.
    Bad lines are listed, not raised. `files`: the folder's files as already read (and checked
    against the folder's pin, pipeline.llm.recordings.pins), to parse those bytes rather than read
    the files again."""
    refuse_linked(directory)
    path = directory / CALLS_FILE
    first = recording_text(path, None if files is None else files.get(CALLS_FILE))
    if files is not None:
        return _split_text(directory, first, files)
    try:
        return _split_text(directory, first, None)
    except shards.RACES:
        # A writer may have replaced the manifest and its shards between two reads: once more.
        return _split_text(directory, recording_text(path), None)


def _split_text(directory: Path, first: str, files: dict[str, bytes] | None) -> RecordingLines:
    """split_recording of a recording whose calls.jsonl reads `first`."""
    names = list(files) if files is not None else os.listdir(directory)
    if shards.is_manifest(first):
        return _split_shards(directory, first, files, names)
    shards.refuse_strays(directory, names, set())
    path = directory / CALLS_FILE
    given = files if files is not None else {}
    calls: list[tuple[int, str]] = []
    blobs: dict[str, str] = {}
    problems: list[str] = []
    sources = [(path, first)]
    legacy = directory / LEGACY_BLOBS_FILE
    if LEGACY_BLOBS_FILE in given or (files is None and legacy.is_file()):
        sources.append((legacy, recording_text(legacy, given.get(LEGACY_BLOBS_FILE))))
    for source, text in sources:
        holds_calls = source == path  # once a file, not once a line
        for number, line in enumerate(file_lines(text), start=1):
            if holds_calls and not line.startswith('{"blob":'):
                calls.append((number, line))
                continue
            if (blob := blob_entry(line, f"{source}:{number}", problems)) is not None:
                blobs[blob[0]] = blob[1]
    hashes = tuple((source.name, _sha256(text)) for source, text in sources)
    return RecordingLines(path, calls, blobs, problems, hashes=hashes)


def _split_shards(
    directory: Path, manifest: str, files: dict[str, bytes] | None, names: list[str]
) -> RecordingLines:
    """split_recording of a sharded recording: every shard its manifest names, checked against its
    hash, its calls numbered on from the shard before."""
    path = directory / CALLS_FILE
    named = shards.parse_manifest(path, manifest)
    shards.refuse_strays(directory, names, {name for name, _ in named})
    calls: list[tuple[int, str]] = []
    blobs: dict[str, str] = {}
    problems: list[str] = []
    sources: list[tuple[int, Path]] = []
    offset = 0
    for name, sha in named:
        shard = directory / name
        lines = file_lines(recording_text(shard, shards.shard_bytes(directory, name, sha, files)))
        sources.append((offset + 1, shard))
        holds_calls = name.startswith("calls-")
        for number, line in enumerate(lines, start=1):
            if holds_calls and not line.startswith('{"blob":'):
                calls.append((offset + number, line))
            elif (blob := blob_entry(line, f"{shard}:{number}", problems)) is not None:
                blobs[blob[0]] = blob[1]
        offset += len(lines)
    hashes = ((CALLS_FILE, _sha256(manifest)), *named)
    return RecordingLines(path, calls, blobs, problems, tuple(sources), hashes)


def _sha256(text: str) -> str:
    """sha256 of the bytes a file decoded to `text` held (strict UTF-8 decodes one way only)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LoadedCall:
    path: Path
    line: int
    call: RecordedCall


def whole_recording(directory: Path, files: dict[str, bytes] | None, verify: bool) -> RecordingLines:
    """split_recording, and CorruptRecordError at its first bad blob line when `verify`."""
    parts = split_recording(directory, files)
    if parts.problems and verify:
        raise CorruptRecordError(
            f"{parts.problems[0]}. Fix: restore the file from git (git checkout -- {directory}), "
            "or re-record the stage."
        )
    return parts


def read_stage(
    directory: Path,
    *,
    verify: bool = True,
    files: dict[str, bytes] | None = None,
    memo: VerifiedMemo | None = None,
) -> Iterator[LoadedCall]:
    """A stage's calls; CorruptRecordError at the first line that cannot be read or trusted.
    `files`: the folder's files as already read (see split_recording). Content verified in full
    before (in this process, or as `memo` remembers) is parsed but its records not verified again
    (pipeline.llm.recordings.verified_memo); content verified in full now is remembered."""
    if not (has_recording(directory) if files is None else CALLS_FILE in files):
        return
    parts = whole_recording(directory, files, verify)
    memo = memo or IN_PROCESS
    unverified = memo.holds(parts) if verify else None
    for number, line in parts.calls:
        if unverified is not None:
            yield LoadedCall(*parts.located(number), trusted_call(line, parts, number))
            continue
        call = line_checks.parse_call_line(line, parts.blobs, parts.where(number))
        yield LoadedCall(*parts.located(number), call.current() if verify else call)
    if unverified is not None:
        memo.remember(unverified)


def read_all(root: Path, *, verify: bool = True) -> Iterator[LoadedCall]:
    for directory in stage_dirs(root):
        stage_dir(root, directory.name)  # a folder name that is not a plain name, or a link out
        yield from read_stage(directory, verify=verify)
