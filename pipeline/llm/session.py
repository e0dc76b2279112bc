"""One stage's access to the model: every call goes through the cache and is recorded.

    session = open_session(params, stage="judge")
    call = session.chat(request, CallContext(stage="judge", item="901", labels={"metric": "coherence"}))
    session.close()   # writes recordings/judge/ and the run's hit/miss stats

Cache modes (params `cache.mode`, env JUDGELOOP_CACHE_MODE):
    auto     serve the stage's own recording first, then the local cache, then the other recordings;
             on a miss call the model and store the reply
    replay   as auto, but never call a model: a miss is collected, and the stage fails listing every
             missing call
    refresh  call the model for every request and overwrite what was stored
    off      call the model for every request and store nothing locally (recordings still written)

A reply that is empty is re-asked, and a prompt too long for the model's context window refused
or recorded as a refusal (`llm.too_long`), as pipeline.llm.asking says; a replay's missing calls
are listed with what they say (pipeline.llm.why_missing).

Nothing is served unverified: a local hit is checked against its seal and key (pipeline.llm.cache.store),
a recorded one was verified in full when its stage's recording was read, and that recording
matched its pin in dvc.lock (pipeline.llm.recordings.index, pipeline.llm.recordings.pins). A damaged entry
stops the stage with an error naming the stage, item, key and the fix. The stage's own recording
comes before the local cache (in auto mode as in replay), so what a cache folder holds (someone
else's, say) cannot change what a locked recording replays or reruns.

The backend is built lazily: a stage whose calls all hit never loads the model or opens a
connection, and in replay mode the model's identity comes from the recordings, not the server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path

from pipeline.errors import CorruptRecordError, ReplayIncompleteError, ReplayMissError
from pipeline.llm.arenas import limit_arenas
from pipeline.llm.asking import ModelAsker
from pipeline.llm.blocks import Laid
from pipeline.llm.cache.store import CallStore
from pipeline.llm.closing import each_step
from pipeline.llm.key_table import KeyTable
from pipeline.llm.keys import request_key
from pipeline.llm.latency import BACKEND_TOTAL, WALL
from pipeline.llm.model_identity import resolve_identity
from pipeline.llm.recent import RECENT, Recent
from pipeline.llm.recordings import layouts, stage_folders, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import StageIndex
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall, ServedCall
from pipeline.llm.run_summary import RunStats, stats_summary, write_summary
from pipeline.llm.scheduling import RankedGate
from pipeline.llm.served_log import ServedLog
from pipeline.llm.settings import CacheMode, EngineSettings, TooLong, in_flight
from pipeline.llm.types import Backend, CallContext, ChatRequest, ModelIdentity
from pipeline.llm.why_missing import why_missing

__all__ = ["RUNS_DIR", "LLMSession", "RecordingIndex", "RunStats", "open_session", "resolve_identity"]

log = logging.getLogger(__name__)

RUNS_DIR = "runs"


class LLMSession:
    def __init__(
        self,
        *,
        stage: str,
        mode: CacheMode,
        store: CallStore | None,
        index: RecordingIndex,
        recordings_dir: Path,
        identity: Callable[[], ModelIdentity],
        backend: Callable[[], Backend],
        runs_dir: Path | None = None,
        too_long: TooLong = "unscored",
        dry_run: bool = False,
    ) -> None:
        limit_arenas()  # before the stage's threads allocate (pipeline.llm.arenas)
        self.stage, self.mode, self.store, self.index = stage, mode, store, index
        # A dry run (pipeline.tools.status.probe) is never recorded, leaves no run statistics and
        # is asked by no one which keys it sent, so it keeps none of that bookkeeping of its calls:
        # no key in `stats.keys` or `asked`, no call in its recording (issue 33: about 500 bytes a
        # call, held to the dry run's end). Its calls are the dry run's own log's (probe.DryLog).
        self.dry_run = dry_run
        self.recordings_dir, self.runs_dir = recordings_dir, runs_dir
        self._identity_factory, self._backend_factory = identity, backend
        self._identity: ModelIdentity | None = None
        self._backend: Backend | None = None
        self._gate: RankedGate | None = None
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[CallRecord]] = {}
        # By the model, in this session: all of them where nothing else holds them (no store, or
        # mode off), else the latest (a record is read back from the store when asked for). A dry
        # run keeps the latest too: its "model" answers a placeholder again as asked, and the
        # planned calls are kept by the dry run's own log (pipeline.tools.status.planned), not here.
        held = (store is None and not dry_run) or mode == "off"
        self._answered: Recent[CallRecord] = Recent(None if held else RECENT)
        self._served: Recent[CallRecord] = Recent(RECENT)  # looked up and verified, in this session
        # Keys this session resolved past the cache (sent, unless replay), packed (issue 33).
        self._asked = KeyTable()
        self.served = ServedLog()  # every call served, on disk (see `calls`)
        self.recording = stage_writer.StageRecording()  # (a dry run's stays empty)
        self.recorded_total: int | None = None  # the calls the stage's recording held once written
        self._recorded_this_run: int | None = None  # set when written: the file adds earlier calls
        self.stats = RunStats()
        self._asker = ModelAsker(stage=stage, too_long=too_long, lock=self._lock, stats=self.stats)
        self._observers: list[Callable[[RecordedCall], None]] = []
        self._served_observers: list[Callable[[ServedCall], None]] = []

    @property
    def too_long(self) -> TooLong:
        """What a prompt too long for the context window does (pipeline.llm.asking)."""
        return self._asker.too_long

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

    @property
    def identity(self) -> ModelIdentity:
        identity = self._identity  # set once, never changed: read without the lock on every call
        if identity is None:
            with self._lock:
                if self._identity is None:
                    self._identity = self._identity_factory()
                identity = self._identity
        return identity

    @property
    def backend(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = self._backend_factory()
            return self._backend

    @property
    def recorded_calls(self) -> int:
        """This run's calls as its recording holds them (and `judgeloop audit` lists them): one per
        context and key, however often the same call was served (a dry run records none: 0)."""
        return len(self.recording) if self._recorded_this_run is None else self._recorded_this_run

    @property
    def workers(self) -> int:
        """How many items a stage may have in progress at once: as many as calls it keeps at the
        server (pipeline.llm.settings.in_flight), so that each of those is an item's."""
        if self.mode == "replay":
            # One item at a time, in the stage's own thread (pipeline.llm.runner): every call is a
            # hit, served under the GIL, so items side by side ran no faster, and the threads'
            # handovers cost 5-22 % of a replay's CPU. What they could hide is a read waiting on the
            # disk; but a recording is read whole, in one thread, before its lines are read back one
            # by one, and those then find the page cache (bench/README.md, "A replay on one thread").
            return 1
        return in_flight(max(1, self.backend.parallelism))

    @property
    def calls_at_once(self) -> bool:
        """Whether an item's independent calls go out together (pipeline.llm.scheduling.side_by_side):
        where a model answers them, yes; a replay's hits one after another, for the reason it runs
        one item at a time (`workers`). A dry run too: it waits on no model, and it runs beside the
        real stage, whose calls hold the shared pool's threads while they wait at the model, so
        its calls queued behind them and its prediction (the progress line) came at the stage's
        end (bench/README.md: "judge's dry run ends with the stage")."""
        return self.mode != "replay" and not self.dry_run

    @property
    def gate(self) -> RankedGate:
        """The calls at the model at once, the earliest item's first (pipeline.llm.scheduling)."""
        if self._gate is None:
            workers = self.workers  # builds the backend, which takes the lock
            with self._lock:
                if self._gate is None:
                    self._gate = RankedGate(workers)
        return self._gate

    def asked(self, key: str) -> bool:
        """Whether this session went past its cache for `key` (to the model, or a replay miss):
        added before the request is sent, so before its reply can reach the store (a dry run keeps
        none: False)."""
        return key in self._asked

    def key_for(self, request: ChatRequest) -> str:
        return request_key(self.identity, request)

    def lookup(self, key: str, request: ChatRequest | None = None) -> CallRecord | None:
        """A stored reply, verified: the stage's own recording first, then the local cache, then
        the other recordings (which then seed the cache). The stage's recording is the experiment's
        truth (pinned in dvc.lock): a local entry with another reply for a call it holds is never
        served, in auto mode either (`judgeloop cache verify` names it, and how to drop it). A key
        served once in this session is served again from memory, as verified then (a loop repeats
        its prompts)."""
        record = self._served.get(key)
        if record is None:
            record = self._stored(key, request)
            if record is not None:
                self._served.put(key, record)
        return record

    def served_checksum(self, key: str) -> str | None:
        """The checksum of the record `lookup(key)` would serve, where that is one served already or
        the line of the stage's own recording (which `lookup` asks first in auto and replay mode):
        that line read back against its digest and parsed as JSON, its request not rebuilt from its
        blocks (issue 33: a stage adopting its dry run asks this of every call before serving any).
        None where only `lookup` can say. Raises CorruptRecordError as `lookup` does."""
        record = self._served.get(key)
        if record is not None:
            return record.checksum
        if self.mode not in ("auto", "replay"):
            return None
        return self.index.own_checksum(key, self.stage)

    def _stored(self, key: str, request: ChatRequest | None) -> CallRecord | None:
        if self.mode in ("auto", "replay"):
            record = self.index.own(key, self.stage, request, seed=self.store is not None)
            if record is not None:
                self._seed(record)
                return record
        if self.store is not None:
            record = self.store.get(key, request)
            if record is not None:
                return record
        record = self.index.lookup(key, self.stage)
        if record is not None:
            self._seed(record)
        return record

    def _seed(self, record: CallRecord) -> None:
        # Written in batches, not a write a call (pipeline.llm.cache.store), from the recording's own
        # blocks where its line was just parsed (pipeline.llm.recordings.layouts).
        layout = layouts.SERVED.take(record.request)
        if self.store is not None:
            self.store.seed(record, layout)

    def chat(self, request: ChatRequest, context: CallContext) -> RecordedCall:
        key = self.key_for(request)
        if self.mode in ("auto", "replay"):
            # The common case on a rerun, served before any in-flight bookkeeping.
            try:
                record = self.lookup(key, request)
            except CorruptRecordError as exc:
                raise type(exc)(f"{context.describe()} key {key}: {exc.message}") from exc
            if record is not None:
                return self._log(RecordedCall(context=context, record=record, cache_hit=True))
        with self._lock:
            pending = self._inflight.get(key)
            owner = pending is None
            if pending is None:
                pending = Future()
                self._inflight[key] = pending
                if not self.dry_run:
                    self._asked.add(key)
        if not owner:
            # The same request is already on its way: wait for that reply instead of sending it twice.
            return self._log(RecordedCall(context=context, record=pending.result(), cache_hit=True))
        try:
            call = self._resolve(key, request, context)
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        finally:
            with self._lock:
                self._inflight.pop(key, None)
        pending.set_result(call.record)
        return self._log(call)

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

    def _seed_of(self, key: str) -> tuple[CallRecord, list[Laid] | None]:
        """The record of `key` from the stage's own recording and its layout, as `_stored` seeds it."""
        record = self.index.own(key, self.stage)
        if record is None:  # served from that recording, so there unless read anew since
            raise CorruptRecordError(f"stage {self.stage}: the call {key} it served is no longer recorded")
        return record, layouts.SERVED.take(record.request)

    def _resolve(self, key: str, request: ChatRequest, context: CallContext) -> RecordedCall:
        if self.mode in ("auto", "replay"):
            # Another thread's identical call may have been answered since the fast path looked
            # (and left the in-flight table before this one entered it): this session's answers
            # are checked again; the store, a miss a moment ago, is not.
            record = self._answered.get(key)
            if record is not None:
                return RecordedCall(context=context, record=record, cache_hit=True)
            if self.mode == "replay":
                miss = ReplayMissError(key, context)
                with self._lock:
                    self.stats.misses.append(miss)
                raise miss
        backend = self.backend  # built (a model loaded) before the clock starts: not the call's time
        with self.gate.place():  # waiting for a turn is not the call's time either
            started = time.perf_counter_ns()
            reply = self._asker.answer(backend, request, context)
            elapsed = time.perf_counter_ns() - started
        if BACKEND_TOTAL not in reply.meta:
            # A backend that does not time itself: keep the call's wall time (latency budgets read
            # it back in replay; pipeline.llm.latency). Meta is not in the key.
            reply = reply.model_copy(update={"meta": {**reply.meta, WALL: elapsed}})
        self._asker.check_build(reply)
        record = CallRecord.new(self.identity, request, reply)
        if self.store is not None and self.mode != "off":
            self.store.put(record)
        self._answered.put(key, record)
        return RecordedCall(context=context, record=record, cache_hit=False)

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

    def _own_recording(self) -> StageIndex | None:
        """The stage's own recording as read for this run, where this session writes it."""
        return self.index.read_already(self.stage) if self.index.root == self.recordings_dir else None

    def raise_for_misses(self) -> None:
        if self.stats.misses:
            raise ReplayIncompleteError(
                self.stage,
                self.stats.misses,
                self.index.damaged(),
                why_missing(self.index, self.stage, self.recordings_dir, self._identity),
            )

    def close(
        self, *, write_recording: bool = True, keep: Callable[[RecordedCall], bool] | None = None
    ) -> None:
        """Write the stage's recording (replacing it, or beside the calls `keep` accepts: see
        pipeline.llm.recordings.stage_writer) and the run's summary; release the backend and the store."""
        self._recorded_this_run = len(self.recording)
        writes = (partial(self._write_recording, keep),) if write_recording else ()
        # Each step though one before it failed (a recording that cannot be written): the seeds
        # gathered are still written and the store closed; the first failure raised after the last.
        each_step(*writes, self.recording.close, self._write_summary, self._close_backend, self._close_store)

    def _write_recording(self, keep: Callable[[RecordedCall], bool] | None) -> None:
        directory = stage_folders.stage_dir(self.recordings_dir, self.stage)
        self.recorded_total = self.recording.write(directory, keep)

    def _write_summary(self) -> None:
        if self.runs_dir is not None:
            summary = stats_summary(self.stage, self.mode, self.stats)
            write_summary(self.runs_dir / f"{self.stage}.json", summary, self.stats.keys)

    def _close_backend(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def _close_store(self) -> None:
        if self.store is not None:
            self.store.close()


def open_session(
    params: EngineSettings,
    stage: str,
    *,
    root: Path = Path("."),
    backend_factory: Callable[[], Backend] | None = None,
) -> LLMSession:
    from pipeline.llm.backends import make_backend  # a backend may pull in heavy imports

    cache_dir = root / params.cache.dir
    recordings_dir = root / params.cache.recordings
    stage_folders.stage_dir(recordings_dir, stage)  # the stage names a folder: a plain name only
    built: list[Backend] = []

    def backend() -> Backend:
        if not built:
            built.append(backend_factory() if backend_factory else make_backend(params.llm, cache_dir))
        return built[0]

    index = RecordingIndex(recordings_dir, Pins(root, recordings_dir), VerifiedMemo.beside(cache_dir))
    store = CallStore(cache_dir) if params.cache.mode != "off" else None
    return LLMSession(
        stage=stage,
        mode=params.cache.mode,
        store=store,
        index=index,
        recordings_dir=recordings_dir,
        identity=lambda: resolve_identity(params, index, backend, stage),
        backend=backend,
        runs_dir=cache_dir.parent / RUNS_DIR,
        too_long=params.llm.too_long,
    )
