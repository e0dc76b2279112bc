"""The calls of some items in a stage's recording, for `audit --item` (issue 33): each line read for
its context's item only, and that item's calls parsed; a recording whose lines open as the writer
writes them is searched as bytes for the items as written, and only those lines and their blocks
read. Unverified, as stage_reader.read_stage(verify=False) reads (audit names a damaged line); the
calls of a few keys are key_reader's.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import line_checks, line_format, line_search, shards, stage_folders, stage_reader
from pipeline.llm.recordings.block_places import block_lines_start, placed_blocks, sharded_blocks
from pipeline.llm.recordings.line_format import BLOCK_OPENING, CALL_OPENING


def _context_item(line: str) -> str | None:
    """The item a call line's context names, read from its JSON alone (None: not readable so)."""
    try:
        return _item_of(orjson.loads(line))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _item_of(raw: Any) -> str | None:
    item = raw["context"].get("item", "")
    return item if isinstance(item, str) else None


def read_items(directory: Path, items: Collection[str]) -> Iterator[stage_reader.LoadedCall]:
    """The calls of `items` in a stage's recording, unverified (read_stage(verify=False), for audit):
    the other lines are only scanned for their context's item, not parsed, so the calls of one item
    in a large recording cost a JSON read of each line. A line that cannot be scanned is parsed, and
    so named if damaged. A recording whose lines open as the writer writes them is searched as bytes
    for the items as written instead, and only those lines and their blocks are read (_placed_items)."""
    if not stage_folders.has_recording(directory):
        return
    found = _placed_items(directory, set(items))
    if found is not None:
        yield from found
        return
    parts = stage_reader.split_recording(directory)
    wanted = set(items)
    for number, line in parts.calls:
        item = _context_item(line)
        if item is None or item in wanted:
            call = line_checks.parse_call_line(line, parts.blobs, parts.where(number))
            if call.context.item in wanted:
                yield stage_reader.LoadedCall(*parts.located(number), call)


Lines = list[tuple[Path, int, str]]  # a file, a line's number there, the line


def _placed_items(directory: Path, wanted: set[str]) -> list[stage_reader.LoadedCall] | None:
    """read_items without parsing every line: the recording's call lines searched as bytes for each
    item as the writer writes it in a line's context (`"item":"903"`: a quote inside a JSON string
    is escaped, so only the JSON's own keys read so), and for a line that may spell it otherwise
    (escapes, whitespace: line_search.lines_found, whose JSON is then read for its item), only those
    lines decoded and parsed, and only their blocks read. A sharded recording
    (pipeline.llm.recordings.shards): every shard of calls read and checked against its hash in the
    manifest, the blocks found where they lie (pipeline.llm.recordings.block_places), not with their
    shards read whole. A recording in one file: its blocks found by their lines' openings, as
    read_keys finds them. None for a recording holding a line not opened as the writer opens one
    (then read_items reads it whole, as before)."""
    if "" in wanted:
        return None  # a context without an item is written without one: nothing to search for
    path = directory / stage_folders.CALLS_FILE
    stage_folders.refuse_linked(directory)
    with path.open("rb") as opening:
        head = opening.read(len(shards.MANIFEST_OPENING)).decode("utf-8", "replace")
    marks = [line_format.line_safe(canonical_json({"item": item}))[1:-1].encode("utf-8") for item in wanted]
    found = (_sharded if shards.is_manifest(head) else _one_file)(directory, path, marks, wanted)
    if found is None:
        return None
    lines, blobs = found
    out = []
    for source, number, text in lines:
        call = line_checks.parse_call_line(text, blobs, f"{source}:{number}")
        if call.context.item in wanted:
            out.append(stage_reader.LoadedCall(source, number, call))
    return out


Found = tuple[Lines, dict[str, str]]  # the lines holding an item sought, and the blocks they refer to


def _sharded(directory: Path, path: Path, marks: list[bytes], wanted: set[str]) -> Found | None:
    """_placed_items' lines and blocks of a sharded recording, whose manifest is at `path`."""
    named = shards.parse_manifest(path, line_checks.recording_text(path))
    shards.refuse_strays(directory, os.listdir(directory), {name for name, _ in named})
    held = (
        (directory / name, shards.shard_bytes(directory, name, sha, None))
        for name, sha in named
        if shards.prefix_of(name)[0] == "calls"
    )  # one shard's bytes held at a time
    lines = _item_lines(held, marks, wanted)
    blobs = None if lines is None else sharded_blocks(directory, named, _refs(lines))
    return None if lines is None or blobs is None else (lines, blobs)


def _one_file(directory: Path, path: Path, marks: list[bytes], wanted: set[str]) -> Found | None:
    """_placed_items' lines and blocks of a recording in one file, at `path`."""
    names = os.listdir(directory)
    if stage_folders.LEGACY_BLOBS_FILE in names or path.stat().st_size > line_checks.MAX_RECORDING_BYTES:
        return None  # read whole, which says what is wrong with a large one
    shards.refuse_strays(directory, names, set())
    data = path.read_bytes()
    lines = _item_lines([(path, data)], marks, wanted)
    if lines is None:
        return None
    blobs: dict[str, str] = {}
    refs = _refs(lines)
    if not (
        placed_blocks(path, refs, blobs, [], block_lines_start(data))
        or line_search.blocks_by_opening(path, data, refs, blobs, [])
    ):
        return None
    return lines, blobs


def _refs(lines: Lines) -> set[str]:
    return {blob for _, _, line in lines for blob in line_format.blob_refs(line)}


def _item_lines(files: Iterable[tuple[Path, bytes]], marks: list[bytes], wanted: set[str]) -> Lines | None:
    """The call lines of `files` that hold one of `marks` (or may spell an item otherwise and name one
    of `wanted`: line_search.lines_found), decoded; None for a file with a line that opens as neither
    a call line nor a block line."""
    lines: Lines = []
    sought: set[str | None] = {*wanted, None}  # (None: an item not read as a string: parsed, so named)
    for path, data in files:
        count = data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))
        start = block_lines_start(data) or len(data)  # (only block lines, or none: searched whole)
        before = data.startswith(CALL_OPENING) + data.count(b"\n" + CALL_OPENING, 0, start)
        after = data.count(b"\n" + CALL_OPENING, start)
        if before + after + data.startswith(BLOCK_OPENING) + data.count(b"\n" + BLOCK_OPENING) != count:
            return None
        end = start if after == 0 else len(data)  # where its call lines end: only block lines after
        found = line_search.lines_found(data, marks, "item", lambda raw: _item_of(raw) in sought, end)
        for number, held in found:
            if not held.startswith(BLOCK_OPENING):
                lines.append((path, number, line_checks.decoded_line(held, f"{path}:{number}")))
    return lines
