"""Cache keys packed as their digests' 16 bytes, each with a word: 22 to 45 bytes a key (issue 33).

The one packed container of cache keys. A stage session keeps every key it served, for its run
summary (`RunStats.keys`: key -> "hit" or "miss", written sorted), and every key it sent past the
cache (`LLMSession.asked`); `judgeloop status` counts each key it plans for the model once in the
whole prediction (pipeline.tools.status.planned: `add` and `in`, a set's use). As dicts or sets of
strings that is a key's text (about 85 bytes) and a slot each: 120 to 250 bytes a key, held until
the stage or the prediction ends, which at a million calls is part of what a run's peak holds.

A key as pipeline.llm.keys makes it (KEY_PREFIX and 32 lower-case hex digits of a 128-bit digest)
is the same key exactly as its digest's 16 bytes: here those lie in one open-addressed table
(linear probing from the digest's first 8 bytes, at most three quarters full), and the key's word
as one byte beside them (0 marks a free slot). A key of any other form (none is made today) is
kept in a dict as it is. The keys read back sorted (every packed key has the same prefix and
length, so its digest's byte order is its text's), merged with the dict's.

Not thread-safe: its owners (the session under its lock, a prediction from one thread) take turns.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping

from pipeline.llm.keys import KEY_PREFIX

WIDTH = 16  # an xxh3-128 digest
_TEXT = len(KEY_PREFIX) + 2 * WIDTH
_FIRST = 1024  # slots to begin with (a power of two)
_WORDS = 255  # distinct words packed (a byte each, 0 being a free slot); more go to the dict
SORT_IN_NUMPY_AT = 1 << 16  # more keys than this are sorted by numpy, not a bytes object each


def _digest(key: str) -> bytes | None:
    """The key's 16 bytes, or None where it is not KEY_PREFIX and 32 lower-case hex digits."""
    if len(key) != _TEXT or not key.startswith(KEY_PREFIX):
        return None
    tail = key[len(KEY_PREFIX) :]
    if tail != tail.lower():
        return None
    try:
        digest = bytes.fromhex(tail)
    except ValueError:
        return None
    return digest if len(digest) == WIDTH else None  # (fromhex skips spaces between digits)


class KeyTable(Mapping[str, str]):
    """Keys -> a few distinct words; the first word set for a key stays (as dict.setdefault). As a
    set of keys: `add` and `in`."""

    def __init__(self) -> None:
        self._table = bytearray(WIDTH * _FIRST)  # slot i: bytes 16i to 16i + 16
        self._word = bytearray(_FIRST)  # slot i: its word's number in _words, plus one (0: free)
        self._mask = _FIRST - 1
        self._count = 0
        self._words: list[str] = []
        self._others: dict[str, str] = {}

    def _slot(self, digest: bytes) -> tuple[int, bool]:
        """Where `digest` is (True), or the free slot where it would go (False)."""
        table, word, mask = self._table, self._word, self._mask
        slot = int.from_bytes(digest[:8], "little") & mask
        while word[slot]:
            at = slot * WIDTH
            if table[at : at + WIDTH] == digest:
                return slot, True
            slot = (slot + 1) & mask
        return slot, False

    def __getitem__(self, key: str) -> str:
        digest = _digest(key)
        if digest is None:
            return self._others[key]
        slot, there = self._slot(digest)
        if not there:
            raise KeyError(key)
        return self._words[self._word[slot] - 1]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        digest = _digest(key)
        return key in self._others if digest is None else self._slot(digest)[1]

    def setdefault(self, key: str, word: str) -> str:
        """`key`'s word, set to `word` if it has none."""
        digest = _digest(key)
        if digest is None:
            return self._others.setdefault(key, word)
        slot, there = self._slot(digest)
        if there:
            return self._words[self._word[slot] - 1]
        if word not in self._words:
            if len(self._words) == _WORDS:
                return self._others.setdefault(key, word)
            self._words.append(word)
        self._table[slot * WIDTH : (slot + 1) * WIDTH] = digest
        self._word[slot] = self._words.index(word) + 1
        self._count += 1
        if 4 * self._count > 3 * (self._mask + 1):
            self._grow()
        return word

    def add(self, key: str) -> None:
        """Hold `key` (as a set does), with the word "" if it has none."""
        self.setdefault(key, "")

    def _grow(self) -> None:
        table, word = self._table, self._word
        self._mask = 2 * self._mask + 1
        self._table = bytearray(WIDTH * (self._mask + 1))
        self._word = bytearray(self._mask + 1)
        for old, held in enumerate(word):
            if held:
                digest = bytes(table[old * WIDTH : (old + 1) * WIDTH])
                slot = self._slot(digest)[0]
                self._table[slot * WIDTH : (slot + 1) * WIDTH] = digest
                self._word[slot] = held

    def __len__(self) -> int:
        return self._count + len(self._others)

    def __iter__(self) -> Iterator[str]:
        """The keys, sorted."""
        return (key for key, _ in self.sorted_items())

    def sorted_items(self) -> Iterator[tuple[str, str]]:
        """(key, word) for every key, sorted by key, each key's text made as it is read."""
        table, word, words = self._table, self._word, self._words
        packed = (
            (f"{KEY_PREFIX}{table[slot * WIDTH : (slot + 1) * WIDTH].hex()}", words[word[slot] - 1])
            for slot in self._order()
        )
        return heapq.merge(packed, sorted(self._others.items()))

    def _order(self) -> Iterator[int]:
        """The held slots in their digests' byte order."""
        table, word = self._table, self._word
        if self._count <= SORT_IN_NUMPY_AT:
            held = [slot for slot, taken in enumerate(word) if taken]
            return iter(sorted(held, key=lambda slot: table[slot * WIDTH : (slot + 1) * WIDTH]))
        import numpy  # (only for a large stage: its import is not every command's)

        halves = numpy.frombuffer(table, dtype=">u8").reshape(-1, 2)  # big-endian: the bytes' order
        taken = numpy.flatnonzero(numpy.frombuffer(word, dtype=numpy.uint8))
        slots = taken[numpy.lexsort((halves[taken, 1], halves[taken, 0]))]
        del halves  # (no view of the table is left)
        return (int(slot) for slot in slots)
