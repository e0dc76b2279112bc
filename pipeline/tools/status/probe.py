"""Run one stage's experiment step without a model, to count the calls it would send to one.

The step runs exactly as the stage runs it (its design's LLMStep, pipeline.experiments.steps, in an
LLMSession in auto mode), with two stand-ins that make it a dry run:

* the session has no store, so nothing is written; it answers from the recordings;
* ProbeBackend is the "model" it asks for the rest. What the local cache holds it answers from
  there (read-only). Anything else is a model call the real run certainly makes when it gets this
  far; the probe answers it with a placeholder naming the call, and a request the real run sends
  twice (in two stages or two items) counts once, as it would hit the cache the second time. Any
  later request that contains a placeholder depends on a reply nobody knows yet: the probe raises
  DependentCall there, a ReplayMissError, so the runner drops that item and the others go on
  (pipeline.llm.runner).

A placeholder is never a usable reply (no score, no XML sections), so the pipeline always takes its
"ask again / iterate again" branch on it, and that branch always sends the placeholder back
(a re-ask carries the reply, the regeneration prompt carries the judge's explanation): every call
that depends on an unknown reply is caught. A step that takes a decision on a reply without
sending it back says so (LLMStep.decides_on_unknown: refine with refine.unscored_triggers=false
lets an unscored metric pass, so the loop may stop where a real reply would have continued), and
pipeline.tools.status.planner then counts the items holding a placeholder as a lower bound.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipeline.errors import ReplayMissError
from pipeline.experiments.steps import Output
from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import request_key
from pipeline.llm.records import RecordedCall
from pipeline.llm.served_log import LineLog, given_fields
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.types import Backend, CallContext, ChatReply, ChatRequest, ModelIdentity
from pipeline.tools.status.planned import Counted, PlanLog, PlannedCalls

MARK = "<judgeloop-status: reply not known yet"


def placeholder(key: str) -> str:
    return f"{MARK}, call {key}>"


class DependentCall(ReplayMissError):
    """A request that carries a reply not known yet: neither it nor what follows can be predicted."""


class ProbeBackend:
    """The "model" of a dry run: answers what the local cache holds, a placeholder for the rest."""

    kind = "probe"
    # Nothing is sent anywhere, so threads would only take turns at the interpreter: one item at
    # a time is the fastest dry run (half the time of eight, for the paper's judge at 133 items).
    parallelism = 1

    def __init__(
        self,
        identity: ModelIdentity,
        cache_dir: Path,
        *,
        asked: Callable[[str], bool] | None = None,
        model_call: threading.Event | None = None,
    ) -> None:
        self._identity = identity
        # Read-only: opened only if it exists, since creating an empty cache would be a side effect.
        self._local = CallStore(cache_dir) if cache_dir.is_dir() else None
        self.from_local: set[str] = set()
        self._lock = threading.Lock()
        # A stage that starts its calls while its dry run goes on (stages.runner): the keys it has
        # sent to the model were not in the local cache when it began, and are not to the dry run
        # either, whenever their replies land there; `model_call` is set at the dry run's first.
        self._asked = asked
        self._model_call = model_call

    def identity(self) -> ModelIdentity:
        return self._identity

    def chat(self, request: ChatRequest) -> ChatReply:
        key = request_key(self._identity, request)
        if any(MARK in message.content for message in request.messages):
            raise DependentCall(key, None)
        record = self._local.get(key, request) if self._local is not None else None
        if record is not None and self._asked is not None and self._asked(key):
            # Asked after the look-up's miss it may be, but a key is marked asked before it is
            # sent: a reply found now, and asked, was stored by the stage since it began.
            record = None
        if record is not None:
            with self._lock:
                self.from_local.add(key)
            return record.reply
        if self._model_call is not None:
            self._model_call.set()
        return ChatReply(text=placeholder(key), done_reason="not_yet_asked")

    def close(self) -> None:
        if self._local is not None:
            self._local.close()


R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class DryCall:
    """A call of the dry run as answered, without its request (a 20 kB prompt, say) or its reply: where,
    under which key, its record's checksum and a digest of the reply it was given, for the stage to
    check that it serves the same (stages.runner.served_alike); and whether that reply was a
    placeholder. Every call of a stage is kept until the stage adopts or runs, so the reply (a few
    hundred tokens, as a pydantic model) is kept as 16 bytes (bench/README, issue 33, mem-slope),
    and the calls themselves on disk, a JSON line each (DryLog: 8 bytes a call in memory)."""

    context: CallContext
    key: str
    checksum: str
    reply_digest: bytes
    unknown: bool  # answered with a placeholder: a model call the real run makes

    @classmethod
    def of(cls, call: RecordedCall) -> DryCall:
        reply = call.record.reply
        return cls(
            call.context, call.record.key, call.record.checksum, reply_digest(reply), MARK in reply.text
        )


def _dry_line(call: DryCall) -> list[Any]:
    return [call.key, call.checksum, call.reply_digest.hex(), call.unknown, given_fields(call.context)]


def _dry_call(row: list[Any]) -> DryCall:
    key, checksum, digest, unknown, given = row
    return DryCall(CallContext(**given), key, checksum, bytes.fromhex(digest), unknown)


class DryLog(LineLog[DryCall]):
    """A dry run's calls in the order they were answered, on disk (as LLMSession.served keeps a
    session's: a list of DryCalls held a CallContext, about 1.5 kB, a call)."""

    def __init__(self) -> None:
        super().__init__(_dry_line, _dry_call)

    def tally(self, from_local: set[str]) -> tuple[int, int]:
        """The calls answered with a known reply, and how many of those came from the local cache
        alone (their key in `from_local`), read back without building their contexts."""
        known = local = 0
        for key, _, _, unknown, _ in self.rows():
            if not unknown:
                known += 1
                local += key in from_local
        return known, local


def reply_digest(reply: ChatReply) -> bytes:
    """Equal digests mean equal replies: every field, as its JSON (two equal replies whose JSON
    differs, a dict's keys in another order, differ here, so the stage runs rather than adopts)."""
    return hashlib.blake2b(reply.model_dump_json().encode(), digest_size=16).digest()


@dataclass
class StageProbe(Generic[R]):
    stage: str
    results: list[R]  # every item that finished, known replies or not
    recorded: int = 0  # calls answered by the recordings or the local cache
    local_only: int = 0  # of those, in the local cache but not in the recordings (a clone lacks them)
    repeats: int = 0  # the same request as a model call counted earlier: a cache hit in the real run
    model_calls: PlannedCalls = field(default_factory=PlannedCalls)  # certain model calls, on disk
    stopped: list[str] = field(default_factory=list)  # items whose later calls depend on an unknown reply
    unknown_output: list[str] = field(default_factory=list)  # finished, but the output holds an unknown reply
    known: list[R] = field(default_factory=list)  # the results the next stage can be fed
    served: DryLog = field(default_factory=DryLog)  # every call of the dry run, as answered

    @property
    def calls(self) -> int:
        return self.recorded + self.repeats + len(self.model_calls)


def probe_stage(
    stage: str,
    work: Callable[[LLMSession], list[R]],
    items: Sequence[str],
    output: Output[R],
    *,
    identity: ModelIdentity,
    index: RecordingIndex,
    cache_dir: Path,
    counted: Counted,
    asked: Callable[[str], bool] | None = None,
    model_call: threading.Event | None = None,
) -> StageProbe[R]:
    """Run `work` with no model. `counted`: keys already counted as model calls by earlier stages
    of the same prediction; the real run would find those in its cache by then. `asked` and
    `model_call`: see ProbeBackend."""
    backend = ProbeBackend(identity, cache_dir, asked=asked, model_call=model_call)

    def make_backend() -> Backend:
        return backend

    session = LLMSession(
        stage=stage,
        mode="auto",
        # No store: the session would write to it. The recordings answer first, the probe the rest.
        store=None,
        index=index,
        recordings_dir=Path(),  # never written: closed with write_recording=False
        identity=lambda: identity,
        backend=make_backend,
        runs_dir=None,  # a dry run leaves no run statistics
        dry_run=True,
    )
    served = DryLog()
    # The calls the probe answered with a placeholder, whole (a batch exports their requests), on
    # disk, each one's place in the experiment's order kept for every time it was answered
    # (pipeline.tools.status.planned: a few bytes a call, not its request).
    planned = PlanLog()

    def note(call: RecordedCall) -> None:  # from the worker that made the call, as the session logs it
        dry = DryCall.of(call)
        served.append(dry)
        if dry.unknown:
            planned.add(call)

    session.observe(note)
    try:
        results = work(session)
    finally:
        session.close(write_recording=False)
    probe = StageProbe(stage, results, served=served)
    probe.recorded, probe.local_only = served.tally(backend.from_local)
    # In the order of the experiment, not of arrival: an item's independent calls run side by side.
    # (Only the placeholders' order counts: which of a request's answers is the model call.)
    probe.model_calls, probe.repeats = planned.done(counted)
    finished = {output.item_of(r) for r in results}
    probe.stopped = [item for item in items if item not in finished]
    unknown = {output.item_of(r) for r in results if MARK in output.text_of(r)}
    probe.unknown_output = sorted(unknown)
    probe.known = [r for r in results if output.item_of(r) not in unknown]
    return probe
