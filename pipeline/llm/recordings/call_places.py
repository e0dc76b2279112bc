"""The calls of a recording being made, each held as 16 to 48 bytes, not as its place in the order (issue 33).

A stage's recording is written in its calls' order (Where, below: the context's sort key, then the
key), one line a call, the same call (context and key) once. Holding each call's Where as a tuple
in a dict, with its line's place, cost about 190 bytes a call: at a million calls
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

Not thread-safe: its owner (StageCalls, under its lock) takes turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pipeline.llm.recordings import shards
from pipeline.llm.recordings.id_table import IdTable
from pipeline.llm.recordings.spool import Place

Where = tuple[Any, ...]  # a call's place in its recording's order: its context's sort key, then its key
# Where a written line comes from: a line made here (its Place in the spool: a number from 0, or
# text) or a line of the stage's own recording kept as it is (line n as -1 - n: spool numbers are
# never negative, and one int each is what a million sources cost least as).
Source = Place
SHARDS: int = 16**shards.SHARD_DIGITS


def kept_source(line: int) -> int:
    return -1 - line


def kept_line(source: Source) -> int | None:
    """The recording's line a source keeps, or None for a line made here."""
    return -1 - source if isinstance(source, int) and source < 0 else None


def packed(source: int, key: str) -> int:
    """A call's line (a spool number, or a kept line as kept_source gives it) and its shard as one
    number at or above 0, as CallPlaces holds it: made line n as 2n, kept line n as 2n + 1, times
    the shards, plus the shard's number."""
    line = kept_line(source)
    at = 2 * source if line is None else 2 * line + 1
    return at * SHARDS + int(shards.shard_of(key), 16)


def unpacked(number: int) -> tuple[Source, int]:
    """The line and the shard's number of a number packed made."""
    at, shard = divmod(number, SHARDS)
    return (kept_source(at >> 1) if at & 1 else at >> 1), shard


def shard_number(where: Where) -> int:
    """The number of the shard a call of this Where is written to (shards.shard_of its key)."""
    return int(shards.shard_of(where[-1]), 16)


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
