"""The calls a dry run plans for the model, kept on disk in the experiment's order (issue 33).

A dry run answers every call it cannot look up with a placeholder: a model call the real run makes.
`judgeloop status -v` lists them and `judgeloop batch export` writes each one's request, so they
are kept whole; held as RecordedCalls until the export was written, a million 2-20 kB prompts were
2-20 GB. Here each one is written, as it is answered, as one JSON line (its key, its context's
fields as given, the model and the request as the manifest writes them) to an unnamed temporary
file (pipeline.llm.line_file.LineFile: 8 bytes a line in memory), and only its place in the
experiment's order is sorted: in memory RUN places at a time, each run spilled to a temporary file
of its own, the runs merged (an external sort). The merged order is that of `sorted()` over the
places held in memory (a place is the context's sort_key and the key; two answers at one place
keep the first to arrive, as a dict's setdefault did), and a call counts as a model call at the
first place its key takes, once in the whole prediction (`counted`): later ones are repeats, which
the real run finds in its cache. What is held per planned call is the line's end and its number in
the order, 16 bytes, and its key counted (pipeline.llm.key_table: about 32); a call is read
back, and its request built again, as it is iterated.
"""

from __future__ import annotations

import heapq
import os
import tempfile
import threading
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Protocol

import orjson

from pipeline.llm.line_file import LineFile
from pipeline.llm.records import RecordedCall
from pipeline.llm.served_log import given_fields
from pipeline.llm.types import CallContext, ChatRequest, ModelIdentity

RUN = 1 << 15  # places sorted in memory at a time (about 300 bytes each), then spilled
READ_AT_ONCE = 1 << 16  # bytes of a run read in one pread while merging
BATCH = 256  # planned calls read back from the file in one read


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A call the next run sends to the model: where, under which key, for which model, the request
    (as a ChatRequest, and as the JSON object it was dumped to when planned: a manifest writes
    those very bytes)."""

    context: CallContext
    key: str
    model: ModelIdentity
    request: ChatRequest
    request_json: dict[str, Any]

    @classmethod
    def of_line(cls, line: bytes) -> PlannedCall:
        key, given, model, request = orjson.loads(line)
        return cls(
            CallContext(**given),
            key,
            ModelIdentity.model_validate(model),
            ChatRequest.model_validate(request),
            request,
        )


def _line(call: RecordedCall) -> bytes:
    record = call.record
    return orjson.dumps(
        [
            record.key,
            given_fields(call.context),
            record.model.model_dump(mode="json"),
            record.request.model_dump(mode="json"),
        ]
    )


class Counted(Protocol):
    """What a prediction asks of the keys it counted: a set[str] will do, or a KeyTable (packed)."""

    def __contains__(self, key: object) -> bool: ...

    def add(self, key: str) -> None: ...


Place = tuple[Any, ...]  # a context's sort_key and the key (lists, once read back from a run)


class PlannedCalls:
    """The model calls of one stage's dry run, in the experiment's order: len() without reading
    them, each read back from disk (PlannedCall) as it is iterated, as often as asked."""

    def __init__(self, lines: LineFile | None = None, order: array[int] | None = None) -> None:
        self._lines = lines
        self._order = order if order is not None else array("Q")  # line numbers, in order

    def __len__(self) -> int:
        return len(self._order)

    def __bool__(self) -> bool:
        return bool(self._order)

    def __iter__(self) -> Iterator[PlannedCall]:
        if self._lines is None:
            return
        lines = self._lines
        for first in range(0, len(self._order), BATCH):
            numbers = self._order[first : first + BATCH]
            start, end = min(numbers), max(numbers) + 1
            if end - start <= 2 * BATCH:  # nearly in file order (an item's calls arrive together)
                read = lines.read(start, end)
                yield from (PlannedCall.of_line(read[n - start]) for n in numbers)
            else:
                yield from (PlannedCall.of_line(lines.line(n)) for n in numbers)

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()


class PlanLog:
    """A stage's placeholder answers as they come (from any of its threads), then, at `done`, its
    PlannedCalls: sorted on disk, each key counted once (see the module's docstring)."""

    def __init__(self) -> None:
        self._lines = LineFile(prefix="judgeloop-plan-")
        self._places: list[tuple[Place, int]] = []  # (place, line number) not yet spilled
        self._runs: list[IO[bytes]] = []
        self._lock = threading.Lock()

    def add(self, call: RecordedCall) -> None:
        line = _line(call)
        place = (*call.context.sort_key(), call.record.key)
        with self._lock:
            self._places.append((place, self._lines.append(line)))
            if len(self._places) >= RUN:
                self._spill()

    def _spill(self) -> None:
        run = tempfile.TemporaryFile(prefix="judgeloop-plan-run-")  # noqa: SIM115 (closed by done)
        self._places.sort()
        run.write(b"".join(orjson.dumps(entry) + b"\n" for entry in self._places))
        run.flush()
        self._places = []
        self._runs.append(run)

    def _in_order(self) -> Iterable[tuple[Place, int]]:
        """Every (place, line number), sorted: in memory where no run was spilled; else every run,
        the last one too, merged (their places are lists, compared as the tuples were)."""
        if not self._runs:
            return sorted(self._places)
        if self._places:
            self._spill()
        return heapq.merge(*(_entries(run) for run in self._runs))

    def done(self, counted: Counted) -> tuple[PlannedCalls, int]:
        """The model calls in order, and the repeats: answers whose key was counted before (at an
        earlier place, or by an earlier stage: `counted`, which gains this stage's keys)."""
        order: array[int] = array("Q")
        repeats = 0
        with self._lock:
            try:
                for place, number in self._in_order():
                    key = place[-1]
                    if key in counted:
                        repeats += 1
                    else:
                        counted.add(key)
                        order.append(number)
            finally:
                for run in self._runs:
                    run.close()
                self._runs, self._places = [], []
        return PlannedCalls(self._lines, order), repeats


def _entries(run: IO[bytes]) -> Iterator[tuple[Place, int]]:
    """A run's (place, line number) entries, read a block at a time by position (so that the runs
    can be read side by side from their descriptors)."""
    size = run.seek(0, os.SEEK_END)
    fd, at, rest = run.fileno(), 0, b""
    while at < size:
        block = os.pread(fd, min(READ_AT_ONCE, size - at), at)
        at += len(block)
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        for raw in lines:
            place, number = orjson.loads(raw)
            yield place, number
