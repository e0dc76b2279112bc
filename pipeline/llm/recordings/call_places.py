"""The calls of a recording being made, each held as 16 to 48 bytes, not as its place in the order (issue 33).

A stage's recording is written in its calls' order (pipeline.llm.recordings.text.Where: the context's
sort key, then the key), one line a call, the same call (context and key) once. Holding each call's
Where as a tuple in a dict, with its line's place, cost about 190 bytes a call: at a million calls
the largest thing left that a recording run held per call. A call's Where can always be read back
from its line (its context and its key are in it), and that line is on disk already (the spool, or
the stage's own recording for a line kept as it is). So CallPlaces holds only a 64-bit hash of each
Where, in a packed table (pipeline.llm.recordings.id_table.IdTable), with a number that says where
its line is; the Where itself is read back from the line when it is needed: to tell two calls of
one hash apart (a hash found again is checked against the line before it counts as the same call),
and to sort a shard's calls at the write (a shard at a time, so what the write holds is a shard's
Wheres, a sixteenth of the stage's).

Python's hash of a Where (a tuple of str and int) is 64 bits and the same for equal Wheres within a
process, which is all the table needs: nothing hashed here leaves the process. Two different Wheres
of one hash (about one chance in 10^7 at a million calls) are both kept, the second in a dict.

The Where is read back by a function its owner passes to each call that may need it (`where_of`),
not one it keeps: kept, a bound method of its owner made a cycle (owner -> CallPlaces -> owner), so
that a recording let go of (a dry run's, in status or batch export) held its calls until the cyclic
GC ran.

Not thread-safe: its owner (StageRecording, under its lock) takes turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pipeline.llm.recordings.id_table import IdTable

Where = tuple[Any, ...]  # (pipeline.llm.recordings.text.Where)

_MASK64 = 2**64 - 1


WhereOf = Callable[[int], Where]  # the Where of the call whose line a number names, read from that line


class CallPlaces:
    """Where -> a number (at or above 0) naming its line, holding each Where as its hash; `where_of`
    (given to each call that may need it) reads a Where back from the number held for it."""

    def __init__(self) -> None:
        self._table = IdTable()  # the Where's hash -> its number
        self._others: dict[Where, int] = {}  # Wheres whose hash a different Where holds in _table

    def _hash(self, where: Where) -> int:
        return hash(where) & _MASK64

    def _held(self, where: Where, digest: int, where_of: WhereOf) -> int | None:
        """The number `_table` holds for `where` itself, or None (its hash free, or another Where's)."""
        number = self._table.get(digest)
        if number is None or where_of(number) != where:
            return None
        return number

    def get(self, where: Where, where_of: WhereOf) -> int | None:
        digest = self._hash(where)
        if digest not in self._table:
            return None
        held = self._held(where, digest, where_of)
        return held if held is not None else self._others.get(where)

    def __len__(self) -> int:
        return len(self._table) + len(self._others)

    def set(self, where: Where, number: int, where_of: WhereOf) -> None:
        """Hold `number` for `where`, replacing any it had."""
        digest = self._hash(where)
        if digest not in self._table or self._held(where, digest, where_of) is not None:
            self._table[digest] = number
        else:
            self._others[where] = number

    def setdefault(self, where: Where, number: int, where_of: WhereOf) -> None:
        """Hold `number` for `where` unless it has one already."""
        if self.get(where, where_of) is None:
            self.set(where, number, where_of)

    def numbers(self) -> Iterator[int]:
        """The number held for each Where, in no particular order."""
        yield from self._table.values()
        yield from self._others.values()
