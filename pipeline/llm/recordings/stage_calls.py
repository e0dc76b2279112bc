"""A stage's calls gathered as it runs, each held by its line's place, and read back in order.

A call's line is made when the call is added, by the thread that made it, and spooled
(pipeline.llm.recordings.spool); only its place is kept (pipeline.llm.recordings.call_places). A
cache hit that the stage's own recording holds as it is keeps that line instead. When the recording
is written (pipeline.llm.recordings.stage_writer), the lines are read back from where they lie, in
the recording's order: all at once for a small stage, a shard at a time for a large one.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from pipeline.llm.recordings import unchanged
from pipeline.llm.recordings.call_places import (
    SHARDS,
    CallPlaces,
    Source,
    Where,
    kept_line,
    kept_source,
    packed,
    shard_number,
    unpacked,
)
from pipeline.llm.recordings.line_format import blob_collision, blob_line, call_to_line, line_safe
from pipeline.llm.recordings.spool import BlockLines, Spool
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_index import StageIndex


RECENT_CHARS = 8 * 2**20


class StageCalls:
    """One stage's recording, built a call at a time, its lines on disk until it is written (Spool).

    A call's line is made when the call is added, by the thread that made it, and spooled; only its
    place is kept. A cache hit that the stage's own recording holds as it is (context and record:
    StageIndex.verbatim_at) keeps that line instead, by its number: packing a 20 kB prompt into blocks
    costs ten times the hit itself, and the same call gives the same line. The same call (context and
    key) added twice is one line; a line made for it wins over one kept.
    """

    def __init__(self) -> None:
        self._spool = Spool()
        # Each call's line, made here (in the spool) or kept (of `_recorded`), by its Where, held as
        # its hash (CallPlaces: issue 33); a line made here that UTF-8 cannot hold, as its text.
        self._calls = CallPlaces()
        self._text: dict[Where, str] = {}
        self._blobs = BlockLines()  # blob id -> its blob line, in the spool
        self._recorded: StageIndex | None = None
        # The Where of each line of `_recorded` kept, by its number there (unchanged.WHERES_HELD lines
        # at most): the order `unchanged` checks, without parsing a line again.
        self._kept_wheres: dict[int, Where] = {}
        self._labels: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        # The texts of the blocks added last (RECENT_CHARS at most): an item's calls share its
        # blocks, which `_refuse_collisions` then compares without reading them back from the spool.
        self._recent: dict[str, str] = {}
        self._recent_chars = 0
        self._lock = threading.Lock()

    def add(self, call: RecordedCall, *, recorded: StageIndex | None = None, key: str | None = None) -> None:
        """Add a call; `recorded`: the stage's own recording as read for this run, whose line this
        call keeps if it records this very call; `key`: its record's key, as a string the caller holds
        anyway (held here in place of the record's own copy)."""
        where = self._where(call, call.record.key if key is None else key)
        if call.cache_hit:
            with self._lock:
                if where in self._text or self._holds(where):
                    return
            if self._keeps(where, call, recorded):
                return
        blobs: dict[str, str] = {}
        place = self._spool.put(call_to_line(call, blobs))
        with self._lock:
            new = [blob for blob in blobs if blob not in self._blobs]
        self._refuse_collisions(blobs, recorded or self._recorded)
        blob_places = {blob: self._spool.put(blob_line(blob, blobs[blob])) for blob in new}
        with self._lock:
            if isinstance(place, str):
                self._text[where] = place
            else:  # the line made last wins
                self._text.pop(where, None)
                self._calls.set(where, packed(place, where[-1]), self._where_of)
            for blob, blob_place in blob_places.items():
                self._blobs.setdefault(blob, blob_place)

    def _refuse_collisions(self, blobs: dict[str, str], recorded: StageIndex | None) -> None:
        """CacheError where a block held under one of a call's blob ids has another text than the
        call's (`blobs`): a block an earlier call spooled, or one of the recording read (`recorded`,
        whose blocks a kept line refers to). Such a pair was made to share one 64-bit id
        (line_format.blob_collision); written as one, the calls of the other text would fail their
        check on every read ("request edited"). Two calls adding such a pair at the same instant,
        from two threads, are not caught here; the recording's reader still refuses the call whose
        text was not kept, so nothing else is ever served."""
        for blob, text in blobs.items():
            held = self._recent.get(blob)
            if held is None:
                held = self._held_text(blob, recorded)
            if held is not None and held != text:
                raise blob_collision(blob)
        with self._lock:
            if self._recent_chars > RECENT_CHARS:
                self._recent, self._recent_chars = {}, 0
            self._recent.update(blobs)
            self._recent_chars += sum(map(len, blobs.values()))

    def _held_text(self, blob: str, recorded: StageIndex | None) -> str | None:
        """The text held under `blob`: spooled (None for a line UTF-8 cannot hold, which the write
        refuses, naming its line), or a block of `recorded`; None where neither holds it."""
        with self._lock:
            place = self._blobs.get(blob)
        if place is not None:
            line = self._spool.get(place)
            return None if isinstance(line, str) else str(orjson.loads(line)["text"])
        if recorded is not None and blob in recorded.blobs:
            return recorded.blobs[blob]
        return None

    def _where(self, call: RecordedCall, key: str) -> Where:
        return self._where_in(call.context, key)

    def _where_in(self, context: CallContext, key: str) -> Where:
        """The call's place in the order, its labels' tuple shared with every call of the same labels
        (a stage has a few: held once each, not once a call; issue 33)."""
        *head, labels, attempt = context.sort_key()
        labels = self._labels.setdefault(labels, labels)  # one step (tuples of str), so thread-safe
        return (*head, labels, attempt, key)

    def _where_of(self, number: int) -> Where:
        """The Where of the call whose line CallPlaces holds as `number`, read back from that line."""
        raw = orjson.loads(self._raw(unpacked(number)[0]))
        return self._where_in(CallContext.model_validate(raw["context"]), raw["key"])

    def unchanged(self, directory: Path) -> bool:
        """(under the lock) Whether the recording in `directory` is the file this one would write,
        byte for byte: every call a line of the stage's own recording kept as read, in its order,
        with its blocks, nothing added or dropped, and the file there still the one read
        (pipeline.llm.recordings.unchanged)."""
        recorded = self._recorded
        if recorded is None or self._text or len(self._blobs):
            return False
        count = len(self._calls)
        numbers = self._calls.numbers()
        return unchanged.unchanged_file(
            recorded, directory, numbers, count, self._kept_wheres, self._where_of
        )

    def _holds(self, where: Where) -> bool:
        """Whether a line made here in the spool, or kept, is held for the call."""
        return self._calls.get(where, self._where_of) is not None

    def keep(self, context: CallContext, key: str, checksum: str, recorded: StageIndex) -> bool:
        """Add a cache hit held by its line of `recorded` alone, its record not built (a call the
        stage adopts from its dry run: LLMSession.serve): the line of this key and context that opens
        with `checksum` (StageIndex.kept_at), as `add` keeps it. False, holding nothing new, where no
        line opens so: the caller then adds the call with its record (`add` may still find its line
        in another form, or makes one)."""
        where = self._where_in(context, key)
        with self._lock:
            if where in self._text or self._holds(where):
                return True  # the same call added before: one line (as `add` leaves it)
        return self._kept(where, recorded.kept_at(key, checksum, context), recorded)

    def _keeps(self, where: Where, call: RecordedCall, recorded: StageIndex | None) -> bool:
        """Whether the call is kept as its line in `recorded` (then noted), not made again."""
        return self._kept(where, None if recorded is None else recorded.verbatim_at(call), recorded)

    def _kept(self, where: Where, found: int | None, recorded: StageIndex | None) -> bool:
        """Whether the line at `found` in `recorded` is kept for the call at `where` (then noted)."""
        with self._lock:
            if found is None or recorded is None or self._recorded not in (None, recorded):
                return False
            self._recorded = recorded
            if where not in self._text:
                self._calls.setdefault(where, packed(kept_source(found), where[-1]), self._where_of)
            if len(recorded.lines) <= unchanged.WHERES_HELD:  # for `unchanged`: its Wheres, held
                self._kept_wheres.setdefault(found, where)
            return True

    def close(self) -> None:
        """Let go of the spooled lines (the recording is not written after this)."""
        self._spool.close()

    def __len__(self) -> int:
        """How many calls it holds: one for each context and key, as its file will."""
        with self._lock:
            return self._count()

    def _count(self) -> int:
        """The calls held, each once (a line as text wins over the same call's line kept: about never)."""
        return len(self._calls) + sum(1 for where in self._text if not self._holds(where))

    def _by_shard(self) -> dict[int, array[int]]:
        """Each call's number (as CallPlaces holds it), by its shard's number (a shard that holds only
        lines as text among them)."""
        calls: dict[int, array[int]] = {shard_number(where): array("Q") for where in self._text}
        for number in self._calls.numbers():
            calls.setdefault(number % SHARDS, array("Q")).append(number)
        return calls

    def _ordered(self, numbers: Iterable[int], shard: int | None = None) -> list[tuple[Where, Source]]:
        """Calls (numbers as CallPlaces holds them) with their Wheres, read back from their lines, and
        the lines made here as text (of `shard`, or all), in the recording's order; a line made here
        wins over one kept (a Where held both ways, as text and as kept)."""
        order: list[tuple[Where, Source]] = [
            (where, text) for where, text in self._text.items() if shard in (None, shard_number(where))
        ]
        for number in numbers:
            where = self._where_of(number)
            if where not in self._text:
                order.append((where, unpacked(number)[0]))
        order.sort(key=_first)
        return order

    def _raw(self, source: Source) -> str | bytes:
        """A line without its "\\n": the recording's line kept, or the spool's."""
        kept = kept_line(source)
        if kept is not None:
            assert self._recorded is not None
            return line_safe(self._recorded.line(kept))
        return self._spool.get(source)

    def _kept_blob(self, number: int) -> str:
        assert self._recorded is not None
        blob = f"{number:016x}"
        return blob_line(blob, self._recorded.blobs[blob])

    def _line(self, source: Source) -> bytes:
        line = self._raw(source)
        return (line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n"

    def _blob_bytes(self, number: int) -> bytes:
        place = self._blobs.at(number)
        if place is not None:
            return self._line(place)
        return (self._kept_blob(number) + "\n").encode("utf-8")


def _first(pair: tuple[Where, Source]) -> Where:
    return pair[0]
