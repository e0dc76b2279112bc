"""A recording's lines found in its bytes by what they hold, without splitting the file into lines.

A reader of a few calls (key_reader.read_keys, item_reader.read_items) searches a file's bytes for
the marks its lines are written with (a key, an item, a block line's opening) and decodes, parses
and checks only the lines found (line_checks); a line not found as written sends it back to reading
the file whole.

A search for a member as written (`"item":"903"`) passes by a line that spells it otherwise: JSON
lets a line write any character of a name or string as a `\\u` escape, and put whitespace between
its tokens, and such a line is valid JSON, verifies (the checksum is over the parsed record) and is
served by a full read. So a reader also takes the lines that may spell a member otherwise
(spelled_otherwise: rare, the writer never writes so) and keeps those whose JSON names what it
looks for (lines_found).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from pipeline.llm.recordings.line_checks import blob_entry, decoded_line
from pipeline.llm.recordings.line_format import BLOCK_OPENING

# What a string spelled otherwise than the writer spells it holds. The writer writes canonical JSON
# (orjson) made line_safe: every character raw but `"`, `\` and the controls (a short escape where
# there is one, else \u00XX; a reader refuses a raw control) and \x85, U+2028, U+2029 (\u escapes).
# Of the other spellings JSON allows, `\uXXXX` is open to any character and `\/` to "/"; and the
# three line breaks can be written raw. So a line holds one of these wherever it spells a string
# (a member's name or value) otherwise than the writer: a name such as "item" or "key" (no short
# escape is one of their letters) only with `\u`. (Patterns with a literal opening: re scans for it
# about as fast as bytes.find, and faster where the opening's first byte is common.)
RAW_BREAKS = (re.compile(b"\xc2\x85"), re.compile(b"\xe2\x80[\xa8\xa9]"))  # (never in ASCII bytes)
OTHERWISE = (re.compile(rb"\\[u/]"), *RAW_BREAKS)
_NOT_BLOCK = re.compile(rb'\n(?!\{"blob":"|\Z)')  # a line break before a line not opened as a block line


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


def spelled_otherwise(name: str) -> list[re.Pattern[bytes]]:
    """What a line holds that may spell the member `name` or its string value otherwise than the
    writer (`"name":"value"`): OTHERWISE, or whitespace between the name, the colon and the value
    (`"name"` followed by whitespace, or `"name":` followed by whitespace: JSON's whitespace that a
    line can hold is " ", "\\t" and "\\r")."""
    return [*OTHERWISE, re.compile(b'"' + re.escape(name.encode("utf-8")) + b'":?[ \t\r]')]


def lines_found(
    data: bytes, marks: Iterable[bytes], name: str, shows: Callable[[Any], bool], end: int
) -> list[tuple[int, bytes]]:
    """The lines of `data` that hold one of `marks` (the member `name` as the writer writes its
    values sought: lines_holding), and the call lines before `end` (where its call lines end:
    calls_end) that may spell it otherwise (spelled_otherwise) whose JSON `shows` a value sought, or
    that cannot be read as JSON (the caller parses them, which names what is wrong, as a whole read
    would): every line whose parsed member is sought."""
    found = dict(lines_holding(data, marks))
    patterns = spelled_otherwise(name)
    if data[:end].isascii():  # (at tens of GB/s)
        patterns = [pattern for pattern in patterns if pattern not in RAW_BREAKS]
    for number, line in _lines_matching(data, patterns, end):
        if number not in found and not line.startswith(BLOCK_OPENING):
            try:
                sought = shows(orjson.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError):
                sought = True
            if sought:
                found[number] = line
    return sorted(found.items())


def calls_end(data: bytes) -> int:
    """Where a file's call lines end: where its first block line begins when every line from there on
    is a block line (as the writer writes a recording in one file, and a block shard), else its end."""
    start = 0 if data.startswith(BLOCK_OPENING) else data.find(b"\n" + BLOCK_OPENING) + 1
    if start == 0:
        return len(data)  # no block line, or only block lines: searched whole
    return len(data) if _NOT_BLOCK.search(data, start) else start


def _lines_matching(data: bytes, patterns: Iterable[re.Pattern[bytes]], end: int) -> list[tuple[int, bytes]]:
    """The lines of `data` before `end` (numbered from 1) that hold a match of one of `patterns`."""
    starts: set[int] = set()
    for pattern in patterns:
        found = pattern.search(data, 0, end)
        while found is not None:
            starts.add(data.rfind(b"\n", 0, found.start()) + 1)
            stop = data.find(b"\n", found.start())
            found = None if stop < 0 else pattern.search(data, stop, end)
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
        opening = BLOCK_OPENING + blob.encode("ascii") + b'",'
        start = 0 if data.startswith(opening) else data.find(b"\n" + opening) + 1
        if start == 0 and not data.startswith(opening):
            return False
        number = data.count(b"\n", 0, start) + 1
        where = f"{source}:{number}"
        if (entry := blob_entry(decoded_line(_line_at(data, start), where), where, problems)) is not None:
            blobs[entry[0]] = entry[1]
    return True
