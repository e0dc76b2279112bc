"""Every call a session served, in order, kept on disk: 8 bytes a call in memory (issue 33).

A session keeps each call it served (its context, key and whether it was a hit) for the callers
that ask afterwards (LLMSession.calls, a design that replaces the items it served). Held as
ServedCall objects, a call's context is a pydantic model with its dict, its labels' dict and its
set of fields: about 1.5 kB a call, the largest thing a replay held per call (1.5 GB at a million
calls). The log writes each call as one JSON line to an unnamed temporary file instead, holding
only where its line ends, and builds the ServedCall again when it is read: the same context (its
fields as they were given: `model_fields_set`), key and flag. The file is this process's own (gone
with it), so what is read back is what was written.
"""

from __future__ import annotations

import os
import tempfile
import threading
from array import array
from collections.abc import Iterator
from typing import IO, Any

import orjson

from pipeline.llm.records import ServedCall
from pipeline.llm.types import CallContext

READ_AT_ONCE = 4096  # lines read back in one read


def _line(call: ServedCall) -> bytes:
    context = call.context
    given = {name: getattr(context, name) for name in context.model_fields_set}
    return orjson.dumps([call.key, call.cache_hit, given])


def _call(line: bytes) -> ServedCall:
    key, hit, given = orjson.loads(line)
    return ServedCall(CallContext(**given), key, hit)


class ServedLog:
    """The calls a session served, appended in order, read back in that order (thread-safe)."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._ends = array("Q")  # where each call's line ends in the file
        self._lock = threading.Lock()

    def append(self, call: ServedCall) -> None:
        line = _line(call)
        with self._lock:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="judgeloop-served-")  # noqa: SIM115 (closed by close)
            self._file.write(line)
            self._ends.append((self._ends[-1] if self._ends else 0) + len(line))

    def __len__(self) -> int:
        return len(self._ends)

    def __iter__(self) -> Iterator[ServedCall]:
        """The calls served until now, in order (calls served while this runs are not included)."""
        with self._lock:
            count = len(self._ends)
            if self._file is not None:
                self._file.flush()
            fd = None if self._file is None else self._file.fileno()
        for first in range(0, count, READ_AT_ONCE):
            yield from self._read(fd, first, min(count, first + READ_AT_ONCE))

    def _read(self, fd: Any, first: int, end: int) -> Iterator[ServedCall]:
        start = self._ends[first - 1] if first else 0
        data = os.pread(fd, self._ends[end - 1] - start, start)
        at = 0
        for index in range(first, end):
            length = self._ends[index] - start - at
            yield _call(data[at : at + length])
            at += length

    def close(self) -> None:
        """Let go of the file (the log reads as empty after this)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._ends = array("Q")
