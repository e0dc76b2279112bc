"""The calls of some keys read out of a stage's recording, without reading all of it when it can.

A sharded recording (pipeline.llm.recordings.shards) is read as its manifest, the shards of those
keys' calls and the blocks their lines refer to (pipeline.llm.recordings.block_places); a recording
in one file is read whole, or, for a reader that asks every stage for a key most do not hold, only
its lines that show a key parsed (line_search). Each call served is checked as stage_reader checks
it (line_checks).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import block_places, line_checks, shards
from pipeline.llm.recordings.line_checks import decoded_line, recording_text, trusted_call
from pipeline.llm.recordings.line_format import blob_refs, line_safe
from pipeline.llm.recordings.line_search import (
    blocks_by_opening,
    calls_end,
    lines_found,
    spelled_otherwise,
)
from pipeline.llm.recordings.stage_folders import CALLS_FILE, LEGACY_BLOBS_FILE, has_recording, refuse_linked
from pipeline.llm.recordings.stage_reader import LoadedCall, RecordingLines, whole_recording


def read_keys(directory: Path, keys: Collection[str], *, verify: bool = True) -> Iterator[LoadedCall]:
    """The calls in a stage's recording whose lines show one of `keys` (as written, or spelled
    otherwise: escapes, whitespace, line_search.lines_found), verified as read_stage verifies them
    (unless verify=False). A sharded recording (pipeline.llm.recordings.shards) is read as its
    manifest, the shards of those keys' calls, each checked against its hash, and the blocks their
    lines refer to, each found where it lies and checked against its id
    (pipeline.llm.recordings.block_places; a block not found so: its shard read whole, checked
    against its hash), the folder checked for strays: a reader of one call of a million reads a
    sixteenth of the calls and a few kB of blocks, and parses that call's line only. A recording in
    one file is searched as bytes, and only the lines found are parsed.

    A call recorded under an older key recipe shows its old key: it is found by that key (read
    unverified, as `audit --key` reads, it keeps it), not by today's, under which read_stage, which
    re-derives every key, serves it. For every call of a stage, read_stage."""
    if not has_recording(directory):
        return
    refuse_linked(directory)
    wanted = set(keys)
    with (directory / CALLS_FILE).open("rb") as opening:  # a manifest, or the calls in one file?
        sharded = shards.is_manifest(opening.read(len(shards.MANIFEST_OPENING)).decode("utf-8", "replace"))
    if sharded:
        lines, parts = _key_lines(directory, recording_text(directory / CALLS_FILE), wanted, verify=verify)
    else:
        lines, parts = _file_key_lines(directory, wanted, verify)
    for shard, number, line in lines:
        if verify:
            call = trusted_call(line, RecordingLines(shard, [], parts.blobs, []), number)
        else:
            call = line_checks.parse_call_line(line, parts.blobs, f"{shard}:{number}")
        if call.record.key in wanted:
            yield LoadedCall(shard, number, call)


Found = tuple[list[tuple[Path, int, str]], RecordingLines]


def _key_lines(directory: Path, manifest: str, wanted: set[str], *, verify: bool = True) -> Found:
    """The lines that show `wanted` keys in a sharded recording (shard, line number, line), with the
    blocks they refer to."""
    named = shards.parse_manifest(directory / CALLS_FILE, manifest)
    shards.refuse_strays(directory, os.listdir(directory), {name for name, _ in named})
    marks = _marks(wanted)
    lines: list[tuple[Path, int, str]] = []
    needed = {("calls", shards.shard_of(key)) for key in wanted}
    for name, sha in named:
        if shards.prefix_of(name) in needed:  # searched as bytes, only the lines found decoded
            data = shards.shard_bytes(directory, name, sha, None)
            for number, held in _key_lines_found(data, marks, wanted, len(data)):  # calls only
                lines.append((directory / name, number, decoded_line(held, f"{directory / name}:{number}")))
    refs = {blob for _, _, line in lines for blob in blob_refs(line)}
    blocks = {("blocks", shards.shard_of(blob)) for blob in refs}
    chosen = [(name, sha) for name, sha in named if shards.prefix_of(name) in blocks]
    blobs: dict[str, str] = {}
    problems: list[str] = []
    for name, sha in chosen:  # each block found where it lies, else its shard read whole, one at a time
        if block_places.placed_blocks(directory / name, _in_shard(refs, name), blobs, problems):
            continue
        data = shards.shard_bytes(directory, name, sha, None)
        if not blocks_by_opening(directory / name, data, _in_shard(refs, name), blobs, problems):
            # a block line not as written: those shards parsed whole
            files = {name: shards.shard_bytes(directory, name, sha, None) for name, sha in chosen}
            files[CALLS_FILE] = shards.manifest_text(chosen).encode("utf-8")  # the part of it read
            return lines, whole_recording(directory, files, verify=verify)
    return lines, _found_blocks(directory / CALLS_FILE, blobs, problems, verify)


def _file_key_lines(directory: Path, wanted: set[str], verify: bool) -> Found:
    """The lines of `wanted` keys in a recording in one file, as written, with the blocks they
    refer to: the file is searched as bytes, and only those lines decoded, parsed and checked."""
    names = os.listdir(directory)
    path = directory / CALLS_FILE
    if LEGACY_BLOBS_FILE in names or path.stat().st_size > line_checks.MAX_RECORDING_BYTES:
        parts = whole_recording(directory, None, verify)  # (which says what is wrong with a large one)
        marks = _marks(wanted)
        return [(parts.path, n, line) for n, line in parts.calls if _holds(line, marks, wanted)], parts
    shards.refuse_strays(directory, names, set())
    data = path.read_bytes()
    held = _key_lines_found(data, _marks(wanted), wanted, calls_end(data))
    lines = [(path, number, decoded_line(line, f"{path}:{number}")) for number, line in held]
    refs = {blob for _, _, line in lines for blob in blob_refs(line)}
    blobs: dict[str, str] = {}
    problems: list[str] = []
    if not block_places.placed_blocks(
        path, refs, blobs, problems, block_places.block_lines_start(data)
    ) and not blocks_by_opening(path, data, refs, blobs, problems):
        return lines, whole_recording(directory, None, verify)
    return lines, _found_blocks(path, blobs, problems, verify)


def _in_shard(blobs: set[str], name: str) -> set[str]:
    return {blob for blob in blobs if shards.prefix_of(name) == ("blocks", shards.shard_of(blob))}


def _found_blocks(path: Path, blobs: dict[str, str], problems: list[str], verify: bool) -> RecordingLines:
    if problems and verify:
        raise CorruptRecordError(
            f"{problems[0]}. Fix: restore the file from git (git checkout -- {path.parent}), "
            "or re-record the stage."
        )
    return RecordingLines(path, [], blobs, problems)


def _marks(keys: Iterable[str]) -> list[str]:
    """Each key's member as the writer writes it (canonical JSON made line_safe)."""
    return [line_safe(canonical_json({"key": key}))[1:-1] for key in keys]


def _key_lines_found(data: bytes, marks: list[str], wanted: set[str], end: int) -> list[tuple[int, bytes]]:
    """The lines of `data` that show a key of `wanted` as written, or may spell it otherwise and name
    one (line_search.lines_found: escapes, whitespace; its call lines end at `end`)."""
    marked = [mark.encode("utf-8") for mark in marks]
    return lines_found(data, marked, "key", lambda raw: raw["key"] in wanted, end)


def _holds(line: str, marks: list[str], wanted: set[str]) -> bool:
    """Whether a line shows a key of `wanted` as written, or may spell one otherwise and names one in
    its JSON (or cannot be read so: then parsed, and named), as _key_lines_found finds it."""
    if any(mark in line for mark in marks):
        return True
    if not any(pattern.search(line.encode("utf-8")) for pattern in spelled_otherwise("key")):
        return False
    try:
        return bool(orjson.loads(line)["key"] in wanted)
    except (ValueError, KeyError, TypeError, AttributeError):
        return True
