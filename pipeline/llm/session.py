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

A prompt too long for the model's context window (PromptTruncatedError from the backend) is, by
default (`llm.too_long: unscored`), recorded as that call's reply: a refusal with no text, done_reason
`prompt_too_long` and the backend's words in its meta, logged with the item it belongs to. The
judges read it as a failure of kind `too_long` (no re-ask: a re-ask is longer still), so the item
is recorded unscored with the reason and counted, the stage goes on, and a replay takes the same
course. A refusal is no transport error: the same prompt never fits the same model and window, both
in its key. (An OpenAI-compatible server's context is not in the key: after serving the model with
a longer one, run with JUDGELOOP_CACHE_MODE=refresh.) `llm.too_long: fail` stops the stage at the
first such prompt instead, naming the item.

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
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import (
    ConfigError,
    CorruptRecordError,
    EmptyReplyError,
    PromptTruncatedError,
    ReplayIncompleteError,
    ReplayMissError,
    UnreadableReplyError,
)
from pipeline.llm.arenas import limit_arenas
from pipeline.llm.cache.store import CallStore
from pipeline.llm.key_table import KeyTable
from pipeline.llm.keys import request_key
from pipeline.llm.latency import BACKEND_TOTAL, WALL
from pipeline.llm.llama_pin import foreign_build
from pipeline.llm.recent import RECENT, Recent
from pipeline.llm.recordings import layouts, stage_folders, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import StageIndex
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall, ServedCall
from pipeline.llm.run_summary import write_summary
from pipeline.llm.scheduling import RankedGate
from pipeline.llm.served_log import ServedLog
from pipeline.llm.settings import CacheMode, EngineSettings, TooLong, in_flight
from pipeline.llm.terminal import shown
from pipeline.llm.types import Backend, CallContext, ChatReply, ChatRequest, ModelIdentity

__all__ = ["RUNS_DIR", "LLMSession", "RecordingIndex", "RunStats", "open_session", "resolve_identity"]

log = logging.getLogger(__name__)

RUNS_DIR = "runs"
# How many times a call whose reply is empty (or only whitespace) is asked in all, for a backend
# that returns one rather than raising EmptyReplyError itself (the HTTP backends retry within
# llm.max_retries): a sampling model may answer the next time; a greedy one never will.
EMPTY_REPLY_ATTEMPTS = 3


@dataclass
class RunStats:
    hits: int = 0
    model_calls: int = 0
    misses: list[ReplayMissError] = field(default_factory=list)
    keys: KeyTable = field(default_factory=KeyTable)  # key -> "hit" | "miss" (packed: issue 33)
    empty_replies: int = 0  # replies that were empty or only whitespace: failed, never stored
    unreadable_replies: int = 0  # replies holding a lone surrogate: failed, never stored


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
        self.too_long = too_long
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
        self._observers: list[Callable[[RecordedCall], None]] = []
        self._build_said = False  # a live call on another llama.cpp build is reported once

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
        """Call `observer` with every call as it completes (a progress display), from its thread."""
        self._observers.append(observer)

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
            return 8  # replay needs no server; hits are cheap, so let items run side by side
        return in_flight(max(1, self.backend.parallelism))

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

    def _stored(self, key: str, request: ChatRequest | None) -> CallRecord | None:
        if self.mode in ("auto", "replay"):
            record = self.index.own(key, self.stage, request)
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

    def serve(self, key: str, context: CallContext) -> RecordedCall:
        """A stored call served by its key, as `chat` serves a hit (for a dry run's calls that the
        stage adopts, stages.runner.adopt: the key is known, the request need not be held);
        ReplayMissError when nothing stored has it."""
        try:
            record = self.lookup(key)
        except CorruptRecordError as exc:
            raise type(exc)(f"{context.describe()} key {key}: {exc.message}") from exc
        if record is None:
            raise ReplayMissError(key, context)
        return self._log(RecordedCall(context=context, record=record, cache_hit=True))

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
            reply = self._answer(backend, request, context)
            elapsed = time.perf_counter_ns() - started
        if BACKEND_TOTAL not in reply.meta:
            # A backend that does not time itself: keep the call's wall time (latency budgets read
            # it back in replay; pipeline.llm.latency). Meta is not in the key.
            reply = reply.model_copy(update={"meta": {**reply.meta, WALL: elapsed}})
        self._check_build(reply)
        record = CallRecord.new(self.identity, request, reply)
        if self.store is not None and self.mode != "off":
            self.store.put(record)
        self._answered.put(key, record)
        return RecordedCall(context=context, record=record, cache_hit=False)

    def _check_build(self, reply: ChatReply) -> None:
        """Say once per run when a live call ran on another llama.cpp build than the pinned one:
        its replies may differ from the recordings' under the same key (pipeline.llm.llama_pin)."""
        if self._build_said:
            return
        differs = foreign_build(reply.meta)
        if differs is not None:
            self._build_said = True
            log.warning(
                "stage %s: this live call ran on another llama.cpp build than the pinned one: %s. Its "
                "replies may differ from the committed recordings' under the same keys (a new measurement, "
                "not a rerun); `make install` in a new environment installs the pinned build.",
                self.stage,
                differs,
            )

    def _answer(self, backend: Backend, request: ChatRequest, context: CallContext) -> ChatReply:
        """The backend's reply. One that is empty or only whitespace is a failed call, whichever
        backend gave it: asked again (EMPTY_REPLY_ATTEMPTS in all), counted, never stored or
        recorded; EmptyReplyError when no attempt gave text."""
        for attempt in range(1, EMPTY_REPLY_ATTEMPTS + 1):
            try:
                reply = backend.chat(request)
            except PromptTruncatedError as exc:
                return self._refused(exc, context)
            except UnreadableReplyError:
                self._count_unreadable()
                raise
            except EmptyReplyError:
                self._count_empty()
                raise
            if reply.text.strip() or reply.too_long is not None:
                return reply
            self._count_empty()
            where = shown(context.describe(), one_line=True)  # an item id comes from a data file
            log.warning("%s: the model's reply was empty (attempt %d)", where, attempt)
        raise EmptyReplyError(
            f"{context.describe()}: the model's reply was empty (or only whitespace) {EMPTY_REPLY_ATTEMPTS} "
            "times: a failed call, stored nowhere. Fix: check the model and its prompt (a greedy model "
            "answers the same every time); the stage resumes from the cache when run again."
        )

    def _count_empty(self) -> None:
        with self._lock:
            self.stats.empty_replies += 1

    def _count_unreadable(self) -> None:
        with self._lock:
            self.stats.unreadable_replies += 1

    def _refused(self, exc: PromptTruncatedError, context: CallContext) -> ChatReply:
        """A prompt too long for the context window: llm.too_long says whether that stops the
        stage, naming the item, or is recorded as this call's reply, a refusal without text, so
        the item is recorded unscored with the reason and a replay takes the same course."""
        said = exc.message.rstrip(". ") + "."
        if self.too_long == "fail":
            raise PromptTruncatedError(
                f"{context.describe()}: {said} The stage stopped at it (llm.too_long: fail); with "
                "llm.too_long: unscored such an item is recorded unscored, counted, and the others go on.",
                item=context.item,
            ) from exc
        log.warning("%s: %s Recorded unscored (llm.too_long: unscored).", context.describe(), said)
        return ChatReply.refused_as_too_long(exc.message)

    def _log(self, call: RecordedCall) -> RecordedCall:
        with self._lock:
            self.served.append(ServedCall(call.context, call.record.key, call.cache_hit))
            if call.cache_hit:
                self.stats.hits += 1
            else:
                self.stats.model_calls += 1
            key = call.record.key
            if not self.dry_run:
                self.stats.keys.setdefault(key, "hit" if call.cache_hit else "miss")
        if not self.dry_run:
            # A hit the stage's own recording holds keeps its line there
            # (pipeline.llm.recordings.stage_writer).
            self.recording.add(call, recorded=self._own_recording() if call.cache_hit else None, key=key)
        for observer in self._observers:
            observer(call)
        return call

    def _own_recording(self) -> StageIndex | None:
        """The stage's own recording as read for this run, where this session writes it."""
        return self.index.read_already(self.stage) if self.index.root == self.recordings_dir else None

    def raise_for_misses(self) -> None:
        if self.stats.misses:
            raise ReplayIncompleteError(
                self.stage, self.stats.misses, self.index.damaged(), self._why_missing()
            )

    def _why_missing(self) -> str | None:
        """Whether the stage never ran under this model (its recording holds none of its calls) or
        ran and these calls are new (a prompt or a param changed since), with the fix for each."""
        own = self.index.stage(self.stage)
        if own.error is not None or self._identity is None:
            return None
        wanted = self._identity
        recorded = {f"{m.backend}:{m.name}" for m in own.models}
        if not recorded:
            return (
                f"Cause: stage '{self.stage}' was never recorded here (no {self.recordings_dir}/"
                f"{self.stage}/). Fix: fetch the recordings/ folder it was run with, or run it "
                f"where the model is served: `./judgeloop repro {self.stage}`."
            )
        if f"{wanted.backend}:{wanted.name}" not in recorded:
            return (
                f"Cause: stage '{self.stage}' never ran under these params: its recording holds calls "
                f"by {', '.join(sorted(recorded))}, and llm names {wanted.backend}:{wanted.name}. "
                f"Fix: run it where that model is served (`./judgeloop repro {self.stage}`), or put "
                "the llm params back as they were when it ran (git checkout -- params.yaml)."
            )
        return (
            f"Cause: stage '{self.stage}' ran under this model, but these calls are new (a prompt, a "
            f"param or the data changed since). Fix: record them where the model is served: "
            f"`./judgeloop repro {self.stage}`."
        )

    def close(
        self, *, write_recording: bool = True, keep: Callable[[RecordedCall], bool] | None = None
    ) -> None:
        """Write the stage's recording (replacing it, or beside the calls `keep` accepts: see
        pipeline.llm.recordings.stage_writer) and the run's summary; release the backend and the store."""
        self._recorded_this_run = len(self.recording)
        if write_recording:
            directory = stage_folders.stage_dir(self.recordings_dir, self.stage)
            self.recorded_total = self.recording.write(directory, keep)
        self.recording.close()  # its spooled lines: written, or never to be
        if self.runs_dir is not None:
            summary = {
                "stage": self.stage,
                "mode": self.mode,
                "hits": self.stats.hits,
                "model_calls": self.stats.model_calls,
                "replay_misses": len(self.stats.misses),
                "keys": None,  # its place: every key served, sorted as it is written
            }
            if self.stats.empty_replies:  # absent when none: a summary reads as it always did
                summary["empty_replies"] = self.stats.empty_replies
            if self.stats.unreadable_replies:
                summary["unreadable_replies"] = self.stats.unreadable_replies
            write_summary(self.runs_dir / f"{self.stage}.json", summary, self.stats.keys)
        if self._backend is not None:
            self._backend.close()
        if self.store is not None:
            self.store.close()


def resolve_identity(
    params: EngineSettings, index: RecordingIndex, backend: Callable[[], Backend], stage: str | None = None
) -> ModelIdentity:
    """The model's identity: the backend's, or in replay mode the recordings' (read for it, `stage`'s
    own held for its lookups)."""
    llm = params.llm
    if params.cache.mode != "replay":
        return backend().identity()
    if llm.digest:
        return ModelIdentity(backend=llm.backend, name=llm.model, digest=llm.digest)
    recorded = index.identities(llm.backend, llm.model, hold_only=stage)
    if len(recorded) == 1:
        return next(iter(recorded))
    if not recorded:
        raise ConfigError(
            f"replay mode: no recorded call was made by {llm.backend} model '{llm.model}', so its identity "
            f"is unknown. Fix: check llm.backend/llm.model in params.yaml, or fetch the recordings/ folder."
        )
    digests = ", ".join(sorted(i.digest for i in recorded))
    raise ConfigError(
        f"replay mode: recordings hold several versions of '{llm.model}' ({digests}). "
        "Fix: pin the one to replay with llm.digest in params.yaml."
    )


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
