"""A stage's recording as it is being made: its lines on disk, only their places in memory (issue 33).

A stage of a million calls made its recording as a dict of packed lines (and its blocks) held until
the stage was written, then joined into one string and encoded: memory of the order of the
recording's text, three times over at the end. A Spool writes each line (and each shared block's
line, once) to a temporary file as it is made and keeps, per call, only where it lies; the stage's
recording is then written from it in its sorted order
(pipeline.llm.recordings.stage_writer.StageRecording.write), a line at a time, through the same
temporary-file-and-rename as before (pipeline.llm.files), so the bytes are the same as when it was
held whole. A line that cannot be encoded (a lone surrogate) is kept as text, so that the write
refuses it as it always did, leaving the old recording whole.

A line's place is its number in the spool: the lines lie in a pipeline.llm.line_file.LineFile, which
keeps where each line's bytes end in an array (8 bytes a line), not an (offset, length) tuple (about
120 bytes a line with its two numbers): a recording holds a line for each call and for each distinct
block, about three lines a call (issue 33). A session's served calls are kept in the same store.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from pipeline.llm.line_file import LineFile
from pipeline.llm.recordings.id_table import IdTable

Place = int | str  # a line's number in the spool, or its text when UTF-8 cannot hold it


class Spool:
    """Lines written to an unnamed temporary file (gone with the process), read back by place
    (pipeline.llm.line_file.LineFile, the same store as a session's served calls)."""

    def __init__(self) -> None:
        self._lines = LineFile(prefix="judgeloop-recording-")

    def put(self, line: str) -> Place:
        """Keep one line (without its "\\n"); where it lies."""
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError:
            return line  # written as text: StageRecording.write's UTF-8 check names it
        return self._lines.append(data)

    def get(self, place: Place) -> str | bytes:
        """A line kept by put: its bytes (text only for a line UTF-8 could not hold)."""
        if isinstance(place, str):
            return place
        return self._lines.line(place)

    def close(self) -> None:
        self._lines.close()


_HEX16 = re.compile(r"[0-9a-f]{16}")


class BlockLines:
    """Each distinct block's line in a spool, by the block's id (pipeline.llm.recordings.line_format.blob_id:
    16 lowercase hex digits), held as that id's number in a packed table (IdTable: 24 to 48 bytes a
    block, not a dict's 115 or its text's): a recording being made holds about six blocks a judge
    call (issue 33). Sorting the numbers sorts the ids (same length, same digits)."""

    def __init__(self) -> None:
        self._at = IdTable()  # id -> its line's number in the spool
        self._text: dict[int, str] = {}  # id -> its line as text, where UTF-8 could not hold it

    @staticmethod
    def number(blob: str) -> int:
        if _HEX16.fullmatch(blob) is None:
            raise ValueError(f"not a block id: {blob[:40]!r}")
        return int(blob, 16)

    def __contains__(self, blob: str) -> bool:
        number = self.number(blob)
        return number in self._at or number in self._text

    def __len__(self) -> int:
        return len(self._at) + len(self._text)

    def setdefault(self, blob: str, place: Place) -> None:
        """Keep `place` for `blob` unless it has one already."""
        number = self.number(blob)
        if number in self._text or (isinstance(place, str) and number in self._at):
            return
        if isinstance(place, str):
            self._text[number] = place
        else:
            self._at.setdefault(number, place)

    def get(self, blob: str) -> Place | None:
        return self.at(self.number(blob))

    def at(self, number: int) -> Place | None:
        """The line of the block whose id is `number` (as `number` gives it)."""
        text = self._text.get(number)
        return text if text is not None else self._at.get(number)

    def numbers(self, also: Iterable[int] = ()) -> array[int]:
        """Every id held and every id in `also` (as numbers), once each, sorted: 8 bytes a block, not
        a string each (a million-call stage holds millions; issue 33)."""
        merged = array("Q", self._at)
        merged.extend(self._text)
        merged.extend(number for number in also if number not in self._at and number not in self._text)
        return sorted_numbers(merged)


SORT_IN_NUMPY_AT = 1 << 16  # more numbers than this are sorted without a Python int each


def sorted_numbers(numbers: array[int]) -> array[int]:
    """An array("Q")'s numbers, sorted, in an array("Q"): a large one sorted by numpy in place of a
    list of ints (44 bytes a number, at the moment the recording run's memory peaks)."""
    if len(numbers) <= SORT_IN_NUMPY_AT:
        return array("Q", sorted(numbers))
    import numpy  # (only for a large stage: its import is not every command's)

    ordered = array("Q")
    ordered.frombytes(numpy.sort(numpy.frombuffer(numbers, dtype=numpy.uint64)).tobytes())
    return ordered


def block_shards(numbers: array[int], digits: int = 1) -> Iterator[tuple[str, tuple[int, int]]]:
    """The blocks of each shard (pipeline.llm.recordings.shards.shard_of: an id's first `digits` hex
    digits), in `numbers` sorted: each shard that holds any, with the range of its blocks there."""
    shift = 64 - 4 * digits
    for prefix in range(16**digits):
        first, end = bisect_left(numbers, prefix << shift), bisect_left(numbers, (prefix + 1) << shift)
        if end > first:
            yield f"{prefix:0{digits}x}", (first, end)
