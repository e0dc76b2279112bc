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

A session is built in three layers, each one idea: where a stored reply is found, verified, and in
which order (pipeline.llm.stored_replies, which says why nothing is served unverified); what is done
with each call served: logged, counted, recorded, shown (pipeline.llm.served_calls); and here, the
model: a miss asked once however many threads ask it, and the session opened and closed.

The backend is built lazily: a stage whose calls all hit never loads the model or opens a
connection, and in replay mode the model's identity comes from the recordings, not the server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path

from pipeline.errors import CorruptRecordError, ReplayIncompleteError, ReplayMissError
from pipeline.llm.arenas import limit_arenas
from pipeline.llm.asking import ModelAsker
from pipeline.llm.cache.store import CallStore
from pipeline.llm.closing import each_step
from pipeline.llm.key_table import KeyTable
from pipeline.llm.keys import request_key
from pipeline.llm.latency import BACKEND_TOTAL, WALL
from pipeline.llm.model_identity import resolve_identity
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.run_summary import RunStats, stats_summary, write_summary
from pipeline.llm.scheduling import RankedGate
from pipeline.llm.served_calls import ServedCalls
from pipeline.llm.settings import CacheMode, EngineSettings, TooLong, in_flight
from pipeline.llm.types import Backend, CallContext, ChatRequest, ModelIdentity
from pipeline.llm.why_missing import why_missing

__all__ = ["RUNS_DIR", "LLMSession", "RecordingIndex", "RunStats", "open_session", "resolve_identity"]

log = logging.getLogger(__name__)

RUNS_DIR = "runs"


class LLMSession(ServedCalls):
    """One stage's access to the model (this module's docstring)."""

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
        super().__init__(
            stage=stage, mode=mode, store=store, index=index, recordings_dir=recordings_dir, dry_run=dry_run
        )
        self.runs_dir = runs_dir
        self._identity_factory, self._backend_factory = identity, backend
        self._identity: ModelIdentity | None = None
        self._backend: Backend | None = None
        self._gate: RankedGate | None = None
        self._inflight: dict[str, Future[CallRecord]] = {}
        # Keys this session resolved past the cache (sent, unless replay), packed (issue 33).
        self._asked = KeyTable()
        self.recorded_total: int | None = None  # the calls the stage's recording held once written
        self._recorded_this_run: int | None = None  # set when written: the file adds earlier calls
        self._asker = ModelAsker(stage=stage, too_long=too_long, lock=self._lock, stats=self.stats)

    @property
    def too_long(self) -> TooLong:
        """What a prompt too long for the context window does (pipeline.llm.asking)."""
        return self._asker.too_long

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
