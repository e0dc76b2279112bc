"""Text cut into blocks of whole lines at content-defined boundaries, so that the same transcript
gives the same blocks whatever prompt surrounds it.

A line whose CRC-32 (of its UTF-8 bytes, line break included) is 0 mod 8 ends a block once the
block holds MIN_BLOCK characters; a block ends in any case at the line that brings it to MAX_BLOCK.
Lines are str.splitlines' (keepends). This is the recordings' rule (pipeline.llm.recordings.line_format,
which imports it), so both give the same blocks for the same text. Here a block's lines are
found by bisection over the lines' ends, and only the lines that could end it are hashed (those
past MIN_BLOCK characters, up to the first marked one), rather than every line.
"""

from __future__ import annotations

import zlib
from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate

MIN_BLOCK = 256
MAX_BLOCK = 8192

Part = str | dict[str, str]
# A message's text as a recording's line lays it out (pipeline.llm.recordings.line_format): one string, or
# its parts in order, each literal text or a 1-tuple holding a stored block's text (checked against
# its id there). The local cache is seeded from it (pipeline.llm.cache.blocks.pack_laid) without
# cutting the text again, where the layout is the one split_blocks gives.
Laid = str | list[str | tuple[str]]
# The characters at which str.splitlines ends a line.
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def split_blocks(text: str) -> list[str]:
    """The blocks of `text`, in order; they join back to `text`."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return []
    ends = list(accumulate(map(len, lines)))  # where each line ends, in characters
    crc = zlib.crc32
    blocks: list[str] = []
    start, first = 0, 0  # the block's first character and first line
    last = len(lines) - 1
    while first <= last:
        # The line that brings the block to MAX_BLOCK characters ends it at the latest...
        end = min(bisect_left(ends, start + MAX_BLOCK, first), last)
        # ...and the first marked line from the one that brings it to MIN_BLOCK on, if sooner: the
        # lines before that one are never hashed.
        at = bisect_left(ends, start + MIN_BLOCK, first, end)
        while at < end and crc(lines[at].encode()) & 7:
            at += 1
        blocks.append(text[start : ends[at]])
        start, first = ends[at], at + 1
    return blocks


def pack_parts(text: str, keep: Callable[[str], dict[str, str]]) -> list[Part]:
    """`text` as parts: each block of MIN_BLOCK characters or more handed to `keep`, which stores it
    and returns the reference that stands for it; the shorter blocks between joined as literal text.
    The recordings (blobs) and the local cache (zlib blocks) differ only in `keep`."""
    parts: list[Part] = []
    for block in split_blocks(text):
        if len(block) >= MIN_BLOCK:
            parts.append(keep(block))
        elif parts and isinstance(parts[-1], str):
            parts[-1] += block
        else:
            parts.append(block)
    return parts


def block_fits(block: str) -> tuple[bool, bool]:
    """Whether split_blocks, cutting a text at a point where `block` starts, cuts exactly `block`:
    (when more text follows it, when it ends the text). Which it cuts depends only on the text from
    that point: the block's lines, then, if more follows, whether its last line is marked. (More
    text must also begin a line of its own: a block ending in "\r" before a "\n" does not end a line;
    the caller, who sees both, checks that.)"""
    lines = block.splitlines(keepends=True)
    ends = list(accumulate(map(len, lines)))
    last = len(lines) - 1
    low = bisect_left(ends, MIN_BLOCK)  # the line that brings it to MIN_BLOCK: the first that may end it
    high = bisect_left(ends, MAX_BLOCK)  # the line that brings it to MAX_BLOCK: the last that may
    if low > last or high < last:
        return False, False
    crc = zlib.crc32
    if any(not crc(line.encode()) & 7 for line in lines[low:last]):  # a marked line ends it sooner
        return False, False
    inner = block[-1] in LINE_BREAKS and (high == last or not crc(lines[last].encode()) & 7)
    return inner, True
