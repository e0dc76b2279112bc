"""A pool of servers behind one backend (llm.servers): several Ollama or OpenAI-compatible servers
serving the same weights, each with its own slots, used as one.

    llm:
      backend: ollama
      model: gemma3:27b
      servers:
        - {base_url: http://gpu1:11434, parallelism: 4}
        - {base_url: http://gpu2:11434, parallelism: 4}
        - {base_url: http://gpu3:11434, parallelism: 2}

Each server is the registered backend of llm.backend's kind, built with that server's URL and
slots, so that every call to it is what a call to a lone server would be: the same request body,
retries, context checks, and (Ollama) the digest re-checked during the run. The pool adds three
things:

- Same weights or no run. Before the first call every server is asked which weights it serves
  (Ollama: the digest of /api/tags; OpenAI-compatible: the served model and its checkpoint, or
  llm.digest when pinned), and a pool whose servers differ is refused, naming each. The one
  identity they share is the pool's, so the cache key is the one a lone server gives: the pool
  never changes a key, and outputs are byte-identical with one server or three.
- Least-loaded dispatch. A call goes to the server with the smallest share of its slots in use,
  up to what judgeloop keeps at a server (pipeline.llm.settings.in_flight: a queue's worth past its
  slots), so a fast server takes more calls and no slot waits while a call is pending. The session
  runs as many items at once as the pool's slots call for (its `parallelism` is their sum).
- Failover. A server whose call fails after its own retries (refused, reset, timed out, 5xx) is set
  aside for a while (1 s, doubling to 30 s while it keeps failing) and the call moves to another
  server; when every server has failed the same call, its last error is raised. A server whose
  weights changed during the run (ModelChangedError), or that lost the model (404), gets no more
  calls: no reply of its after that is stored, and the others carry on. A request the server
  rejects (400, the context too short) fails at once: another server would reject it too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import (
    BackendError,
    ConfigError,
    ModelChangedError,
    ModelNotFoundError,
    ServerDownError,
    TransientBackendError,
)
from pipeline.llm.settings import LLMSettings, ServerSettings, in_flight
from pipeline.llm.types import Backend, ChatReply, ChatRequest, ModelIdentity

log = logging.getLogger(__name__)

FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 30.0


def _member_fault(exc: BackendError) -> str:
    """Why a member could not be asked, with one fix. A down server's own (point llm.base_url at
    another) is a lone server's: a pool member is started or removed."""
    if isinstance(exc, ServerDownError):
        cause = exc.message.split(" Fix: ")[0].rstrip(". ")
        return (
            f"{cause}. Fix: start it (for Ollama: `ollama serve`), or remove it from llm.servers (or "
            "JUDGELOOP_SERVERS); then run the stage again."
        )
    if " Fix: " in exc.message:
        return f"{exc.message} Or remove it from llm.servers."
    return f"{exc.message.rstrip('. ')}. Fix: start it, or remove it from llm.servers."


@dataclass(eq=False)
class Member:
    """One server of the pool, and what the dispatcher knows of it."""

    url: str
    slots: int
    backend: Backend
    active: int = 0  # calls sent and not answered
    answered: int = 0
    failures: int = 0  # in a row
    resting_until: float = 0.0  # set aside after a failure, until then
    retired: str | None = None  # why it gets no more calls

    @property
    def capacity(self) -> int:
        return in_flight(self.slots)

    def load(self) -> tuple[float, int]:
        return self.active / self.slots, -self.slots


class ServerPool:
    """A Backend over several servers of one kind (see the module's docstring)."""

    def __init__(
        self,
        kind: str,
        members: Sequence[Member],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not members:
            raise ConfigError("llm.servers is empty. Fix: list at least one server, or remove llm.servers.")
        self.kind = kind  # the servers' kind: the pool's keys are a lone server's
        self.members = list(members)
        self.parallelism = sum(m.slots for m in self.members)
        self._clock = clock
        self._cond = threading.Condition()
        self._identity: ModelIdentity | None = None
        self._identity_lock = threading.Lock()

    # -- identity: every server serves the same weights -----------------------------------------
    def identity(self) -> ModelIdentity:
        with self._identity_lock:
            if self._identity is None:
                self._identity = self._common_identity()
            return self._identity

    def _common_identity(self) -> ModelIdentity:
        found: list[tuple[Member, ModelIdentity]] = []
        for member in self.members:
            try:
                found.append((member, member.backend.identity()))
            except BackendError as exc:
                raise type(exc)(
                    f"llm.servers: {member.url} could not say which weights it serves, so the pool cannot "
                    f"check them: {_member_fault(exc)}"
                ) from exc
        identities = {identity for _, identity in found}
        if len(identities) > 1:
            listing = "; ".join(f"{m.url} serves {i.name} {i.digest}" for m, i in found)
            raise ConfigError(
                f"llm.servers do not all serve the same weights ({listing}), so their replies would be "
                "cached under different keys, or one under another's. Fix: serve the same model on "
                "every server (Ollama: `ollama pull` the same tag on each; vLLM: the same checkpoint), "
                "or remove the odd one from llm.servers."
            )
        return found[0][1]

    # -- dispatch --------------------------------------------------------------------------------
    def _pick(self, tried: set[int]) -> Member | None:
        """The least-loaded server this call has not tried, once one has room; None when every
        server has been tried or retired."""
        with self._cond:
            while True:
                candidates = [
                    (i, m) for i, m in enumerate(self.members) if i not in tried and m.retired is None
                ]
                if not candidates:
                    return None
                now = self._clock()
                awake = [(i, m) for i, m in candidates if m.resting_until <= now]
                free = [(i, m) for i, m in awake if m.active < m.capacity]
                if free:
                    _, member = min(free, key=lambda pair: (pair[1].load(), pair[0]))
                    member.active += 1
                    return member
                if awake:
                    self._cond.wait()  # a call ends: its server has room again
                else:
                    self._cond.wait(min(m.resting_until for _, m in candidates) - now)

    def _done(self, member: Member, *, failed: BaseException | None = None) -> None:
        with self._cond:
            member.active -= 1
            if failed is None:
                member.answered += 1
                member.failures = 0
            elif isinstance(failed, ModelChangedError | ModelNotFoundError):
                if member.retired is None:
                    member.retired = failed.message
                    log.warning("llm.servers: %s gets no more calls: %s", member.url, failed.message)
            else:
                member.failures += 1
                pause = min(LONGEST_PAUSE_S, FIRST_PAUSE_S * 2 ** (member.failures - 1))
                if member.resting_until <= self._clock():
                    log.warning(
                        "llm.servers: %s failed (%s); its calls go to the other servers for %.0f s",
                        member.url,
                        failed,
                        pause,
                    )
                member.resting_until = self._clock() + pause
            self._cond.notify_all()

    def chat(self, request: ChatRequest) -> ChatReply:
        self.identity()  # no call before every server's weights are checked
        tried: set[int] = set()
        last: BackendError | None = None
        while (member := self._pick(tried)) is not None:
            tried.add(self.members.index(member))
            try:
                reply = member.backend.chat(request)
            except (TransientBackendError, ModelChangedError, ModelNotFoundError) as exc:
                self._done(member, failed=exc)
                last = exc
                continue
            except BaseException:
                self._done(member)  # the request's own fault (400, context): not the server's
                raise
            self._done(member)
            return reply
        if last is None:
            reasons = "; ".join(f"{m.url}: {m.retired}" for m in self.members if m.retired)
            raise ModelChangedError(f"llm.servers: no server is left to answer ({reasons})")
        raise type(last)(f"every server of llm.servers failed this call; the last said: {last.message}")

    def close(self) -> None:
        for member in self.members:
            member.backend.close()


BackendFactory = Callable[[LLMSettings, Path], Backend]


def member_settings(settings: LLMSettings, server: ServerSettings) -> LLMSettings:
    """The settings of one server of the pool: llm's, with its URL and slots."""
    return settings.model_copy(
        update={"base_url": server.base_url, "parallelism": server.parallelism, "servers": []}
    )


def build_pool(settings: LLMSettings, cache_dir: Path, factory: BackendFactory) -> ServerPool:
    if settings.backend == "embedded":
        raise ConfigError(
            "llm.servers lists servers, but the embedded backend runs in this process. Fix: remove "
            "llm.servers, or set llm.backend to ollama or openai."
        )
    urls = [server.base_url for server in settings.servers]
    if len(set(urls)) != len(urls):
        raise ConfigError(f"llm.servers names a server twice ({', '.join(urls)}). Fix: list each once.")
    members = [
        Member(server.base_url, server.parallelism, factory(member_settings(settings, server), cache_dir))
        for server in settings.servers
    ]
    return ServerPool(members[0].backend.kind, members)
