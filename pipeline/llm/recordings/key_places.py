"""A recording's keys and the line of each, in 24 bytes a key (issue 33).

A StageIndex kept a dict of key -> line: each key a 36-character string (85 bytes as a Python str),
its line number an int, its dict slot: about 190 bytes a key, 90 MB for the paper's judge at a
million calls, held through the stage. Every key of today's recipe is `jl2:` and 32 hex digits
(pipeline.llm.keys.request_key), a 128-bit number: KeyPlaces holds it as two 64-bit halves in
arrays, in the recording's order, with its line, and beside them the rows sorted by key, searched
by bisection. A table with any other key (none is made today) is a plain dict, as before.

It reads as the dict did: `get`, `in`, its length, and its keys in the recording's order (first
line of each key; a key recorded twice keeps its first line).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping

from pipeline.llm.keys import KEY_PREFIX

_PACKABLE = re.compile(rf"{re.escape(KEY_PREFIX)}[0-9a-f]{{32}}")
_HEAD = len(KEY_PREFIX)


def _halves(key: str) -> tuple[int, int]:
    number = int(key[_HEAD:], 16)
    return number >> 64, number & 0xFFFF_FFFF_FFFF_FFFF


class KeyPlaces(Mapping[str, int]):
    """Keys of today's recipe -> the index of their first line, in the recording's order."""

    def __init__(self) -> None:
        self._high = array("Q")  # each key's halves and first line, in the recording's order
        self._low = array("Q")
        self._line = array("I")
        self._sorted_high = array("Q")  # the high halves sorted, searched in C (bisect on an array)
        self._rows = array("I")  # and the row of each

    @classmethod
    def of(cls, first_lines: Iterable[tuple[str, int]]) -> KeyPlaces:
        """The table of (key, line) pairs, each key once, in the recording's order; ValueError for a
        key that does not pack."""
        table = cls()
        for key, line in first_lines:
            if not _PACKABLE.fullmatch(key):
                raise ValueError(key)
            high, low = _halves(key)
            table._high.append(high)
            table._low.append(low)
            table._line.append(line)
        table._rows = array("I", sorted(range(len(table._high)), key=table._high.__getitem__))
        table._sorted_high = array("Q", (table._high[row] for row in table._rows))
        return table

    def _row(self, key: object) -> int | None:
        if not isinstance(key, str) or not _PACKABLE.fullmatch(key):
            return None
        high, low = _halves(key)
        at, end = bisect_left(self._sorted_high, high), len(self._rows)
        while at < end and self._sorted_high[at] == high:  # keys sharing a high half, side by side
            row = self._rows[at]
            if self._low[row] == low:
                return row
            at += 1
        return None

    def __getitem__(self, key: str) -> int:
        row = self._row(key)
        if row is None:
            raise KeyError(key)
        return self._line[row]

    def __contains__(self, key: object) -> bool:
        return self._row(key) is not None

    def __len__(self) -> int:
        return len(self._high)

    def __iter__(self) -> Iterator[str]:
        for high, low in zip(self._high, self._low, strict=True):
            yield f"{KEY_PREFIX}{high << 64 | low:032x}"


def places(first_lines: dict[str, int]) -> Mapping[str, int]:
    """`first_lines` (key -> its first line, in the recording's order) as a KeyPlaces, or itself when
    a key is not of today's recipe."""
    try:
        return KeyPlaces.of(first_lines.items())
    except ValueError:
        return first_lines
