"""A table of 64-bit ids -> whole numbers at or above 0, in two arrays: 16 bytes a slot (issue 33).

A recording being made holds each distinct block's place in its spool by the block's id, about six
a call of the paper's judge and refine stages. As a dict of int -> int that is about 115 bytes a
block (the id's int, the place's int, the dict's entry and slot), 700 bytes a call: at a million
calls the largest thing a recording run held per call. Here the ids and the values lie in two
arrays, found by open addressing (linear probing from the id's low bits mixed with its high ones),
at most two thirds full: 24 to 48 bytes a block. Block ids are sha256 prefixes, so their bits are
spread already; ids that are not (any 64-bit number is taken) only cost longer probes.

The calls of a recording being made are held the same way, by a 64-bit hash of their place in the
order (pipeline.llm.recordings.call_places).

Not thread-safe: its owners (pipeline.llm.recordings.spool.BlockLines and call_places.CallPlaces,
under StageRecording's lock) take turns.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

_EMPTY = 0  # a value slot holding 0 is free: a value v is stored as v + 1
_MASK64 = 2**64 - 1
_FIRST = 64  # slots to begin with (a power of two)


def _slot(number: int, mask: int) -> int:
    return (number ^ (number >> 29) ^ (number >> 47)) & mask


class IdTable:
    """64-bit ids -> values (whole numbers from 0 to 2**63 - 2); the first value set for an id stays."""

    def __init__(self) -> None:
        self._ids = array("Q", bytes(8 * _FIRST))
        self._values = array("q", bytes(8 * _FIRST))
        self._count = 0

    def _find(self, number: int) -> int:
        """The slot that holds `number`, or the free slot where it would go."""
        if not 0 <= number <= _MASK64:
            raise ValueError(f"not a 64-bit id: {number}")
        mask = len(self._ids) - 1
        at = _slot(number, mask)
        ids, values = self._ids, self._values
        while values[at] != _EMPTY and ids[at] != number:
            at = (at + 1) & mask
        return at

    def get(self, number: int) -> int | None:
        at = self._find(number)
        value = self._values[at]
        return None if value == _EMPTY else value - 1

    def __contains__(self, number: int) -> bool:
        return self._values[self._find(number)] != _EMPTY

    def __len__(self) -> int:
        return self._count

    def setdefault(self, number: int, value: int) -> int:
        """`number`'s value, set to `value` if it has none."""
        if not 0 <= value < 2**63 - 1:
            raise ValueError(f"not a value the table holds: {value}")
        at = self._find(number)
        held = self._values[at]
        if held != _EMPTY:
            return held - 1
        self._ids[at], self._values[at] = number, value + 1
        self._count += 1
        if 3 * self._count > 2 * len(self._ids):
            self._grow()
        return value

    def __setitem__(self, number: int, value: int) -> None:
        """Set `number`'s value, replacing any it had."""
        if self.setdefault(number, value) != value:
            self._values[self._find(number)] = value + 1

    def _grow(self) -> None:
        ids, values = self._ids, self._values
        self._ids = array("Q", bytes(16 * len(ids)))
        self._values = array("q", bytes(16 * len(ids)))
        mask = len(self._ids) - 1
        for number, value in zip(ids, values, strict=True):
            if value != _EMPTY:
                at = _slot(number, mask)
                while self._values[at] != _EMPTY:
                    at = (at + 1) & mask
                self._ids[at], self._values[at] = number, value

    def __iter__(self) -> Iterator[int]:
        """The ids held, in no particular order."""
        return (number for number, value in zip(self._ids, self._values, strict=True) if value != _EMPTY)

    def values(self) -> Iterator[int]:
        """The values held, in no particular order."""
        return (value - 1 for value in self._values if value != _EMPTY)
