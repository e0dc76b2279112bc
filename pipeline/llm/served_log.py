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

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import orjson

from pipeline.llm.line_file import LineFile
from pipeline.llm.records import ServedCall
from pipeline.llm.types import CallContext

READ_AT_ONCE = 4096  # lines read back in one read


T = TypeVar("T")


def given_fields(context: CallContext) -> dict[str, Any]:
    """A context's fields as they were given (`model_fields_set`): CallContext(**them) is it again."""
    return {name: getattr(context, name) for name in context.model_fields_set}


def _line(call: ServedCall) -> list[Any]:
    return [call.key, call.cache_hit, given_fields(call.context)]


def _call(row: list[Any]) -> ServedCall:
    key, hit, given = row
    return ServedCall(CallContext(**given), key, hit)


class LineLog(Generic[T]):
    """Things appended in order, each kept as one JSON line on disk (`encode`: the thing as a list
    orjson writes; `decode`: that list, read back, as the thing), read back in that order
    (thread-safe; the lines are a pipeline.llm.line_file.LineFile). The dry run's calls are kept
    so as well (pipeline.tools.status.probe.DryLog)."""

    def __init__(self, encode: Callable[[T], list[Any]], decode: Callable[[list[Any]], T]) -> None:
        self._encode = encode
        self._decode = decode
        self._lines = LineFile(prefix="judgeloop-served-")

    def append(self, call: T) -> None:
        self._lines.append(orjson.dumps(self._encode(call)))

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[T]:
        """What was appended until now, in order (what is appended while this runs is not included)."""
        return map(self._decode, self.rows())

    def rows(self) -> Iterator[list[Any]]:
        """The same, each as the list it was written as (cheaper where a part of it is enough)."""
        count = len(self._lines)
        for first in range(0, count, READ_AT_ONCE):
            yield from map(orjson.loads, self._lines.read(first, min(count, first + READ_AT_ONCE)))

    def close(self) -> None:
        """Let go of the file (the log reads as empty after this)."""
        self._lines.close()


class ServedLog(LineLog[ServedCall]):
    """The calls a session served, appended in order, read back in that order (thread-safe)."""

    def __init__(self) -> None:
        super().__init__(_line, _call)
