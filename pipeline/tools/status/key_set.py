"""A set of cache keys held as their digests' bytes: about 32 bytes a key, not a str in a set (issue 33).

A prediction counts each key the model will be asked once (pipeline.tools.status.planned): every
planned call's key is held until the prediction ends. As str in a set that is about 120 bytes a key
(a million calls: 120 MB); a key is KEY_PREFIX and an xxh3-128 digest in hex, so its 16 bytes in
an open-addressed table are the same key exactly, in 21 to 43 bytes (the table doubles past three
quarters full). A key of another form (none is made today) is held as it is, in a set beside.
"""

from __future__ import annotations

from typing import Protocol

from pipeline.llm.keys import KEY_PREFIX

WIDTH = 16  # an xxh3-128 digest
_HEX = len(KEY_PREFIX) + 2 * WIDTH
_EMPTY = bytes(WIDTH)


class Counted(Protocol):
    """What a prediction asks of the keys it counted: a set[str] will do, or a KeySet."""

    def __contains__(self, key: object) -> bool: ...

    def add(self, key: str) -> None: ...


def _digest(key: str) -> bytes | None:
    """The key's 16 bytes, or None where it is not KEY_PREFIX and 32 lower-case hex digits (or its
    digest is all zeros, the table's mark of an empty slot)."""
    if len(key) != _HEX or not key.startswith(KEY_PREFIX):
        return None
    tail = key[len(KEY_PREFIX) :]
    if tail != tail.lower():
        return None
    try:
        digest = bytes.fromhex(tail)
    except ValueError:
        return None
    return None if digest == _EMPTY else digest


class KeySet:
    """Cache keys, counted once each (not thread-safe: a prediction adds them from one thread)."""

    def __init__(self) -> None:
        self._table = bytearray(WIDTH * 1024)
        self._mask = 1023
        self._count = 0
        self._other: set[str] = set()

    def __len__(self) -> int:
        return self._count + len(self._other)

    def _slot(self, digest: bytes) -> tuple[int, bool]:
        """Where `digest` is (True), or the empty slot where it would go (False)."""
        table, mask = self._table, self._mask
        slot = int.from_bytes(digest[:8], "little") & mask
        while True:
            at = slot * WIDTH
            held = table[at : at + WIDTH]
            if held == digest:
                return slot, True
            if held == _EMPTY:
                return slot, False
            slot = (slot + 1) & mask

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        digest = _digest(key)
        if digest is None:
            return key in self._other
        return self._slot(digest)[1]

    def add(self, key: str) -> None:
        digest = _digest(key)
        if digest is None:
            self._other.add(key)
            return
        slot, there = self._slot(digest)
        if there:
            return
        self._table[slot * WIDTH : (slot + 1) * WIDTH] = digest
        self._count += 1
        if 4 * self._count > 3 * (self._mask + 1):
            self._grow()

    def _grow(self) -> None:
        old = self._table
        self._mask = 2 * self._mask + 1
        self._table = bytearray(WIDTH * (self._mask + 1))
        for at in range(0, len(old), WIDTH):
            digest = bytes(old[at : at + WIDTH])
            if digest != _EMPTY:
                slot = self._slot(digest)[0]
                self._table[slot * WIDTH : (slot + 1) * WIDTH] = digest
