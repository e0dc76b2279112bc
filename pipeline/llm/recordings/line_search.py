"""A recording's lines found in its bytes by what they hold, without splitting the file into lines.

A reader of a few calls (key_reader.read_keys, stage_index.read_items) searches a file's bytes for
the marks its lines are written with (a key, an item, a block line's opening) and decodes, parses
and checks only the lines found (line_checks); a line not found as written sends it back to reading
the file whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pipeline.llm.recordings.line_checks import blob_entry, decoded_line


def lines_holding(data: bytes, marks: Iterable[bytes]) -> list[tuple[int, bytes]]:
    """The lines of `data` (numbered from 1) that hold one of `marks`, found without splitting it."""
    starts: set[int] = set()
    for mark in marks:
        at = data.find(mark)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            end = data.find(b"\n", at)
            at = -1 if end < 0 else data.find(mark, end)
    return [(data.count(b"\n", 0, start) + 1, _line_at(data, start)) for start in sorted(starts)]


def _line_at(data: bytes, start: int) -> bytes:
    end = data.find(b"\n", start)
    return data[start:] if end < 0 else data[start:end]


def blocks_by_opening(
    source: Path, data: bytes, wanted: set[str], blobs: dict[str, str], problems: list[str]
) -> bool:
    """Add to `blobs` the blocks `wanted` from a file's bytes, each found by the opening its line is
    written with (`{"blob":"<id>",` at a line's start: a quote inside a JSON string is escaped, so
    only a block line opens so) and checked against its id as split_recording checks every block
    (noting in `problems` one that fails); False when one is not found so (a line not as written:
    the reader then parses the file whole)."""
    for blob in wanted:
        opening = b'{"blob":"' + blob.encode("ascii") + b'",'
        start = 0 if data.startswith(opening) else data.find(b"\n" + opening) + 1
        if start == 0 and not data.startswith(opening):
            return False
        number = data.count(b"\n", 0, start) + 1
        where = f"{source}:{number}"
        if (entry := blob_entry(decoded_line(_line_at(data, start), where), where, problems)) is not None:
            blobs[entry[0]] = entry[1]
    return True
