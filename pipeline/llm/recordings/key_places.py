"""A recording's keys and the line of each, in 24 bytes a key (issue 33).

A StageIndex kept a dict of key -> line: each key a 36-character string (85 bytes as a Python str),
its line number an int, its dict slot: about 190 bytes a key, 90 MB for the paper's judge at a
million calls, held through the stage. Every key of today's recipe is `jl2:` and 32 hex digits
(pipeline.llm.keys.request_key), a 128-bit number: KeyPlaces holds it as two 64-bit halves in
arrays, in the recording's order, with its line, and beside them the rows sorted by key, searched
by bisection. A table with any other key (none is made today) is a plain dict, as before.

Keys and block ids are hashes, spread evenly over their range: each sorted table is cut into
buckets by its top bits, a bucket for every one or two entries (up to 4 bytes an entry more), and a
lookup bisects its bucket alone, two or three probes where the whole table took about twenty, each
boxing a 64-bit int (issue 33: BlockPlaces.get was 3-4.7 % of a replay). Whatever the spread (a
recording is untrusted input), an entry is in its bucket: crowded buckets are only slower.

It reads as the dict did: `get`, `in`, its length, and its keys in the recording's order (first
line of each key; a key recorded twice keeps its first line).
"""

from __future__ import annotations

import itertools
import operator
import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping

from pipeline.llm.keys import KEY_PREFIX

_HEX_DIGITS = "0123456789abcdef"  # a block id is 16 of them, as line_format.blob_id writes one


def _block_id(blob: str) -> bool:
    """Whether `blob` is of the writer's form (str.strip with the digits leaves nothing of a string
    made of them alone: in C, about half a regular expression's fullmatch)."""
    return len(blob) == 16 and not blob.strip(_HEX_DIGITS)


# A sealed BlockPlaces' search: the ids sorted (the last place of each), their lines, where each
# bucket begins (_bucket_starts) and the shift that gives an id's bucket. One tuple, assigned whole,
# so that a reader never sees one part of a seal and another of the next.
_Search = tuple["array[int]", "array[int]", "array[int]", int]


def _bucket_starts(sorted_ids: array[int], bits: int) -> array[int]:
    """Where each of the 2**bits buckets of `sorted_ids` (by their top `bits` bits) begins, and
    their end: 2**bits + 1 offsets; the ids whose top bits are b lie from starts[b] to starts[b + 1]."""
    starts = array("I", bytes(4 * ((1 << bits) + 1)))
    for top in map(operator.rshift, sorted_ids, itertools.repeat(64 - bits)):
        starts[top + 1] += 1
    return array("I", itertools.accumulate(starts))


_HEAD = len(KEY_PREFIX)


def _packable(key: str) -> bool:
    """Whether `key` is of today's recipe as request_key writes it: the prefix and 32 hex digits."""
    return len(key) == _HEAD + 32 and key.startswith(KEY_PREFIX) and not key[_HEAD:].strip(_HEX_DIGITS)


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
        self._starts = array("I", [0, 0])  # where each bucket of high halves begins (_bucket_starts)
        self._shift = 64

    @classmethod
    def of(cls, first_lines: Iterable[tuple[str, int]]) -> KeyPlaces:
        """The table of (key, line) pairs, each key once, in the recording's order; ValueError for a
        key that does not pack."""
        table = cls()
        for key, line in first_lines:
            if not _packable(key):
                raise ValueError(key)
            high, low = _halves(key)
            table._high.append(high)
            table._low.append(low)
            table._line.append(line)
        table._rows = array("I", sorted(range(len(table._high)), key=table._high.__getitem__))
        table._sorted_high = array("Q", (table._high[row] for row in table._rows))
        bits = max(0, len(table._rows).bit_length() - 1)  # a bucket for every one or two keys
        table._starts, table._shift = _bucket_starts(table._sorted_high, bits), 64 - bits
        return table

    def _row(self, key: object) -> int | None:
        if not isinstance(key, str) or not _packable(key):
            return None
        high, low = _halves(key)
        sorted_high, starts = self._sorted_high, self._starts
        top = high >> self._shift
        end = starts[top + 1]
        at = bisect_left(sorted_high, high, starts[top], end)
        while at < end and sorted_high[at] == high:  # keys sharing a high half, side by side
            row = self._rows[at]
            if self._low[row] == low:
                return row
            at += 1
        return None

    def get(self, key: object, default: int | None = None) -> int | None:  # type: ignore[override]
        """(Mapping.get raises and catches a KeyError for every key not here.)"""
        row = self._row(key)
        return default if row is None else self._line[row]

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


_EMPTY: _Search = (array("Q"), array("I"), array("I", [0, 0]), 64)


class BlockPlaces(Mapping[str, int]):
    """A recording's block ids -> the index of their line, filled as its files are scanned: each id
    of the writer's form (16 hex digits, a 64-bit number) held in arrays, about 16 bytes, where a
    dict of id strings cost about 160 bytes an id (the paper's judge records about six blocks a
    call). Reads as the dict it replaces: an id placed twice is at its last place, ids iterate in the
    order they were first placed, and an id of another form is kept in a dict beside (and iterated
    after)."""

    def __init__(self) -> None:
        self._ids = array("Q")  # every id placed, in order, and its line
        self._lines = array("I")
        self._odd: dict[str, int] = {}
        self._search = _EMPTY  # (built when first read: _seal)
        self._first = array("I")  # rows that place an id for the first time, in order
        self._sealed = True
        self._lock = threading.Lock()

    def __setitem__(self, blob: str, line: int) -> None:
        if _block_id(blob):
            with self._lock:
                self._ids.append(int(blob, 16))
                self._lines.append(line)
                self._sealed = False
        else:
            self._odd[blob] = line

    def _seal(self) -> None:
        """(once after the last placing) The search: one row an id, its last place, and the buckets."""
        with self._lock:
            if self._sealed:
                return
            ids, lines = self._ids, self._lines
            # Each place as one number, its id above its row: sorted, an id's places come together
            # in the order they were placed (as a stable sort by id leaves them), and no key list
            # beside (a sort by `ids.__getitem__` held a boxed id and a boxed row a place).
            placed = [ident << 32 | row for row, ident in enumerate(ids)]
            placed.sort()
            sorted_ids, sorted_lines, first = array("Q"), array("I"), array("I")
            last = -1
            for place in placed:
                ident, row = place >> 32, place & 0xFFFF_FFFF
                if ident != last:
                    first.append(row)
                    sorted_ids.append(ident)
                    sorted_lines.append(lines[row])
                    last = ident
                else:  # placed again: its last place stands, as a dict's assignment leaves it
                    sorted_lines[-1] = lines[row]
            del placed
            bits = max(0, len(sorted_ids).bit_length() - 1)  # a bucket for every one or two ids
            self._search = (sorted_ids, sorted_lines, _bucket_starts(sorted_ids, bits), 64 - bits)
            self._first = array("I", sorted(first))
            self._sealed = True

    def __getitem__(self, blob: str) -> int:
        found = self.get(blob)
        if found is None:
            raise KeyError(blob)
        return found

    def get(self, blob: object, default: int | None = None) -> int | None:  # type: ignore[override]
        if not isinstance(blob, str):
            return default
        if len(blob) != 16 or blob.strip(_HEX_DIGITS):  # (_block_id, inline: this is the hot path)
            return self._odd.get(blob, default)
        if not self._sealed:
            self._seal()
        ids, lines, starts, shift = self._search
        number = int(blob, 16)
        top = number >> shift
        end = starts[top + 1]
        at = bisect_left(ids, number, starts[top], end)
        if at < end and ids[at] == number:
            return lines[at]
        return default

    def __contains__(self, blob: object) -> bool:
        return self.get(blob) is not None

    def __len__(self) -> int:
        if not self._sealed:
            self._seal()
        return len(self._search[0]) + len(self._odd)

    def __iter__(self) -> Iterator[str]:
        if not self._sealed:
            self._seal()
        ids = self._ids
        yield from (f"{ids[row]:016x}" for row in self._first)
        yield from self._odd
