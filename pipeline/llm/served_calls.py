"""What a session does with each call it serves (the base of pipeline.llm.session's LLMSession, above
pipeline.llm.stored_replies): logs it (`served`, on disk), counts it in the run's statistics, records
it (the stage's recording, pipeline.llm.recordings.stage_writer) and shows it to its observers; and
serves a stored call by its key alone, for a dry run's calls the stage adopts (`serve`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pipeline.errors import CorruptRecordError, ReplayMissError
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recent import RECENT, Recent
from pipeline.llm.recordings import stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.records import CallRecord, RecordedCall, ServedCall
from pipeline.llm.run_summary import RunStats
from pipeline.llm.served_log import ServedLog
from pipeline.llm.settings import CacheMode
from pipeline.llm.stored_replies import StoredReplies
from pipeline.llm.types import CallContext


class ServedCalls(StoredReplies):
    """A session's served calls: logged, counted, recorded and shown; served by key when adopted."""

    def __init__(
        self,
        *,
        stage: str,
        mode: CacheMode,
        store: CallStore | None,
        index: RecordingIndex,
        recordings_dir: Path,
        dry_run: bool,
    ) -> None:
        super().__init__(stage=stage, mode=mode, store=store, index=index, recordings_dir=recordings_dir)
        # A dry run (pipeline.tools.status.probe) is never recorded, leaves no run statistics and
        # is asked by no one which keys it sent, so it keeps none of that bookkeeping of its calls:
        # no key in `stats.keys` or `asked`, no call in its recording (issue 33: about 500 bytes a
        # call, held to the dry run's end). Its calls are the dry run's own log's (probe.DryLog).
        self.dry_run = dry_run
        self._lock = threading.Lock()
        # By the model, in this session: all of them where nothing else holds them (no store, or
        # mode off), else the latest (a record is read back from the store when asked for). A dry
        # run keeps the latest too: its "model" answers a placeholder again as asked, and the
        # planned calls are kept by the dry run's own log (pipeline.tools.status.planned), not here.
        held = (store is None and not dry_run) or mode == "off"
        self._answered: Recent[CallRecord] = Recent(None if held else RECENT)
        self.served = ServedLog()  # every call served, on disk (see `calls`)
        self.recording = stage_writer.StageRecording()  # (a dry run's stays empty)
        self.stats = RunStats()
        self._observers: list[Callable[[RecordedCall], None]] = []
        self._served_observers: list[Callable[[ServedCall], None]] = []

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call this session served, in order, each with its record: read back (from this
        session's answers, the recordings or the local cache, verified as when served) now, for a
        caller that needs the records; `served` has each call's context and key without them."""
        with self._lock:
            served = list(self.served)
        return [
            RecordedCall(context=s.context, record=self.record_of(s.key), cache_hit=s.cache_hit)
            for s in served
        ]

    def record_of(self, key: str) -> CallRecord:
        """The record this session served under `key`, read back as `lookup` finds it."""
        record = self._answered.get(key) or self.lookup(key)
        if record is None:  # served once, so stored or recorded: gone only if deleted meanwhile
            raise CorruptRecordError(f"stage {self.stage}: the call {key} it served is no longer stored")
        return record

    def observe(self, observer: Callable[[RecordedCall], None]) -> None:
        """Call `observer` with every call as it completes, its record with it, from its thread. A
        call a stage adopts is then served with its record built (`serve`): an observer that reads
        only the call's context, key and whether it hit takes `observe_served`."""
        self._observers.append(observer)

    def observe_served(self, observer: Callable[[ServedCall], None]) -> None:
        """Call `observer` with every call as it completes, without its record (a progress display),
        from its thread."""
        self._served_observers.append(observer)

    def serve(self, key: str, context: CallContext) -> None:
        """A stored call served by its key, as `chat` serves a hit (for a dry run's calls that the
        stage adopts, stages.runner.adopt: the key is known, the request need not be held): logged,
        counted, recorded, seeded and shown; ReplayMissError when nothing stored has it. Where the
        stage's own recording holds it, it is served from its line, its record not built
        (`_served_by_line`)."""
        try:
            if self._served_by_line(key, context):
                return
            record = self.lookup(key)
        except CorruptRecordError as exc:
            raise type(exc)(f"{context.describe()} key {key}: {exc.message}") from exc
        if record is None:
            miss = ReplayMissError(key, context)
            with self._lock:  # counted as `chat`'s miss is: in the run's summary and its misses
                self.stats.misses.append(miss)
            raise miss
        self._log(RecordedCall(context=context, record=record, cache_hit=True))

    def _served_by_line(self, key: str, context: CallContext) -> bool:
        """Whether the call was served from its line in the stage's own recording, the recording this
        session writes, without its record (issue 33: a 20 kB request rebuilt from its blocks and its
        line parsed, ~180 us a call): the line read back against the digest taken when the recording
        was verified, its checksum the one `lookup` serves (`served_checksum`), then kept as the
        recording's line for the call (StageCalls.keep: one opening with that checksum and this
        context), counted and shown as `_log` does, and seeded to the local cache as `lookup` seeds
        it, its record built only if the cache lacks the key (CallStore.seed_later). False, having
        done nothing, where the record is needed: an observer of records, a record served already
        (cheaper as held), or no line that opens so (then `lookup` and `_log` as for any hit)."""
        if self.dry_run or self._observers or self.mode not in ("auto", "replay"):
            return False
        if self._served.get(key) is not None:
            return False
        checksum = self.index.own_checksum(key, self.stage)
        own = self._own_recording()
        if checksum is None or own is None or not self.recording.keep(context, key, checksum, own):
            return False
        if self.store is not None:  # before it is counted: a seed's failure is the call's, as in lookup
            self.store.seed_later(key, partial(self._seed_of, key))
        self._count(ServedCall(context, key, cache_hit=True))
        return True

    def _log(self, call: RecordedCall) -> RecordedCall:
        served = ServedCall(call.context, call.record.key, call.cache_hit)
        with self._lock:
            self._note(served)
        if not self.dry_run:
            # A hit the stage's own recording holds keeps its line there
            # (pipeline.llm.recordings.stage_writer).
            own = self._own_recording() if call.cache_hit else None
            self.recording.add(call, recorded=own, key=served.key)
        for observer in self._observers:
            observer(call)
        for served_observer in self._served_observers:
            served_observer(served)
        return call

    def _count(self, served: ServedCall) -> None:
        """A call served without its record, logged, counted and shown as `_log` does (recorded
        by its caller)."""
        with self._lock:
            self._note(served)
        for observer in self._served_observers:
            observer(served)

    def _note(self, served: ServedCall) -> None:
        """(under the lock) The call in the served log and the run's statistics."""
        self.served.append(served)
        if served.cache_hit:
            self.stats.hits += 1
        else:
            self.stats.model_calls += 1
        if not self.dry_run:
            self.stats.keys.setdefault(served.key, "hit" if served.cache_hit else "miss")
