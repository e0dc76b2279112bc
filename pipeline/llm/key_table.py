"""A session's keys and a word for each (hit or miss, asked), packed: about 40 to 70 bytes a key (issue 33).

A stage session keeps every key it served, for its run summary (`RunStats.keys`: key -> "hit" or
"miss", written sorted), and every key it sent past the cache (`LLMSession.asked`). As dicts of
strings that is a key's text (about 85 bytes) and a dict's slot each, twice: about 250 bytes a call,
held until the stage closes, which at a million calls is part of what a recording run's peak holds.
A key as pipeline.llm.keys makes it (KEY_PREFIX and 32 hex digits of a 128-bit digest) is held here
as its two 64-bit halves: the high half in a packed table (pipeline.llm.recordings.id_table.IdTable)
naming its row, the halves in two arrays, the word as one byte. A key of any other form, or one
whose high half another key holds already (about one chance in 10^7 at a million keys), is kept in
a dict as before. The keys read back sorted (every packed key has the same prefix and length, so
its digest's order is its text's), merged with the dict's.

Not thread-safe: the session takes its lock around it.
"""

from __future__ import annotations

import heapq
import re
from array import array
from collections.abc import Iterator, Mapping

from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.recordings.id_table import IdTable

_DIGEST = re.compile("[0-9a-f]{32}")
_HALF = 2**64 - 1
SORT_IN_NUMPY_AT = 1 << 16  # more keys than this are sorted without a Python int each


class KeyTable(Mapping[str, str]):
    """Keys -> a few distinct words; the first word set for a key stays (as dict.setdefault)."""

    def __init__(self) -> None:
        self._rows = IdTable()  # a packed key's high half -> its row
        self._high, self._low = array("Q"), array("Q")  # by row
        self._word = bytearray()  # by row: its word's number in _words
        self._words: list[str] = []
        self._others: dict[str, str] = {}

    @staticmethod
    def _halves(key: str) -> tuple[int, int] | None:
        if len(key) != len(KEY_PREFIX) + 32 or not key.startswith(KEY_PREFIX):
            return None
        if _DIGEST.fullmatch(key, len(KEY_PREFIX)) is None:
            return None
        digest = int(key[len(KEY_PREFIX) :], 16)
        return digest >> 64, digest & _HALF

    def _row(self, halves: tuple[int, int]) -> int | None:
        row = self._rows.get(halves[0])
        return row if row is not None and self._low[row] == halves[1] else None

    def __getitem__(self, key: str) -> str:
        halves = self._halves(key)
        row = None if halves is None else self._row(halves)
        return self._others[key] if row is None else self._words[self._word[row]]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        halves = self._halves(key)
        return (halves is not None and self._row(halves) is not None) or key in self._others

    def setdefault(self, key: str, word: str) -> str:
        """`key`'s word, set to `word` if it has none."""
        halves = self._halves(key)
        if halves is None or halves[0] in self._rows:
            row = None if halves is None else self._row(halves)
            return self._words[self._word[row]] if row is not None else self._others.setdefault(key, word)
        if word not in self._words:
            if len(self._words) == 256:
                return self._others.setdefault(key, word)
            self._words.append(word)
        self._rows.setdefault(halves[0], len(self._low))
        self._high.append(halves[0])
        self._low.append(halves[1])
        self._word.append(self._words.index(word))
        return word

    def __len__(self) -> int:
        return len(self._low) + len(self._others)

    def __iter__(self) -> Iterator[str]:
        """The keys, sorted."""
        return (key for key, _ in self.sorted_items())

    def sorted_items(self) -> Iterator[tuple[str, str]]:
        """(key, word) for every key, sorted by key, each key's text made as it is read."""
        packed = (
            (f"{KEY_PREFIX}{self._high[row]:016x}{self._low[row]:016x}", self._words[self._word[row]])
            for row in self._order()
        )
        return heapq.merge(packed, sorted(self._others.items()))

    def _order(self) -> Iterator[int]:
        """The packed rows in their keys' order (by the high half, then the low)."""
        if len(self._low) <= SORT_IN_NUMPY_AT:
            high, low = self._high, self._low
            return iter(sorted(range(len(low)), key=lambda row: high[row] << 64 | low[row]))
        import numpy  # (only for a large stage: its import is not every command's)

        halves = [
            numpy.frombuffer(self._low, dtype=numpy.uint64),
            numpy.frombuffer(self._high, dtype=numpy.uint64),
        ]
        rows = numpy.lexsort(halves)
        del halves  # (the arrays can grow again once no view of them is left)
        return (int(row) for row in rows)
