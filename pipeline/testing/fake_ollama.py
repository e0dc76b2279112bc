"""A fake Ollama server on real loopback HTTP, for tests and benchmarks.

It follows the protocol notes (shared/notes/ollama-protocol.md), not any client's expectations:
`stream` is true when absent, unknown keys are ignored, an unknown model is a 404, a wrongly typed
option a 500, and a prompt longer than num_ctx is cut silently (200, prompt_eval_count == num_ctx).
It also serves Ollama's OpenAI-compatible /v1/models and /v1/chat/completions (no streaming there).

Tokens are approximated as len(text) // 4: close enough to real tokenizers for English that
truncation and num_predict behave at realistic sizes, and needs no tokenizer.

    with FakeOllama(latency_s=0.1, parallel_slots=2) as server:
        server.inject(Fault.status(503), Fault.reset)
        ... OllamaBackend(LLMSettings(base_url=server.url, model="test-model")) ...
        server.requests_total, server.max_in_flight, server.received[-1].body
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pipeline.testing.ollama_wire import OllamaHandler, Received, WireServer, full_tag

# Gets the chat request as Ollama sees it ({"model", "messages", "options", "format"?, ...}; /v1
# requests are translated to that shape first) and returns the reply text.
Responder = Callable[[dict[str, Any]], str]
FaultKind = Literal["status", "reset", "disconnect", "stream_error", "hang"]
DEFAULT_MODELS = {"test-model:latest": hashlib.sha256(b"test-model").hexdigest()}
_MESSAGES = {
    400: "invalid request",
    500: "llama runner process has terminated: exit status 2",
    503: "server busy, please try again.  maximum pending requests exceeded",
}


@dataclass(frozen=True)
class Fault:
    """What the server does to one request instead of (or before) answering it."""

    kind: FaultKind
    code: int = 200
    message: str = "llama runner process has terminated: unexpected EOF"
    seconds: float = 0.0
    retry_after: str | None = None  # a status fault's Retry-After header, as the server writes it

    reset: ClassVar[Fault]  # TCP RST after reading the request: the client sees ECONNRESET
    disconnect: ClassVar[Fault]  # clean close with no reply: "server disconnected"
    # 200, one NDJSON chunk, then an {"error": ...} line, whatever the request's `stream` said, so
    # that a client's handling of an error on a 200 gets exercised (/v1: a 200 {"error": {...}}).
    stream_error: ClassVar[Fault]

    @classmethod
    def status(cls, code: int, message: str | None = None, *, retry_after: str | None = None) -> Fault:
        return cls("status", code, message or _MESSAGES.get(code, f"HTTP {code}"), retry_after=retry_after)

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Answer normally, but only after `seconds`: longer than the client's read timeout."""
        return cls("hang", seconds=seconds)


Fault.reset = Fault("reset")
Fault.disconnect = Fault("disconnect")
Fault.stream_error = Fault("stream_error")


@dataclass(frozen=True)
class Generation:
    text: str
    done_reason: str
    prompt_eval_count: int
    eval_count: int
    metrics: dict[str, int]  # the four *_duration fields, in nanoseconds, and both counts


def approx_tokens(text: str) -> int:
    return len(text) // 4


def default_responder(request: dict[str, Any]) -> str:
    """Same request, same reply; a change to messages, options or format changes it (as with a
    real model), a change to anything the server ignores (a top-level `seed`) does not."""
    seen = {k: request.get(k) for k in ("messages", "options", "format")}
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:16]
    return json.dumps({"reply": digest}) if request.get("format") is not None else f"reply {digest}"


class FakeOllama:
    def __init__(
        self,
        *,
        models: Mapping[str, str] | None = None,
        responder: Responder = default_responder,
        latency_s: float = 0.0,
        parallel_slots: int | None = None,
        fail_next: Sequence[Fault] = (),
        default_num_ctx: int = 2048,
        version: str = "0.12.0",
    ) -> None:
        self.models = {full_tag(k): v.removeprefix("sha256:") for k, v in (models or DEFAULT_MODELS).items()}
        self.responder, self.latency_s, self.version = responder, latency_s, version
        # 2048 is what old servers default to; newer ones pick 4096+ by VRAM. Clients pin num_ctx.
        self.default_num_ctx = default_num_ctx
        self._cond = threading.Condition()
        self._slots, self._busy = parallel_slots, 0
        self._faults = list(fail_next)
        self._closing = threading.Event()
        self.requests_total, self.in_flight, self.max_in_flight = 0, 0, 0
        self._by_path: Counter[str] = Counter()
        self._received: list[Received] = []
        self._server: WireServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> FakeOllama:
        server = WireServer(("127.0.0.1", 0), OllamaHandler)
        server.fake = self
        self._server = server
        # shutdown() waits for the next poll; a short one keeps every test teardown quick.
        self._thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        with self._cond:
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeOllama is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- knobs, safe to turn while it runs -------------------------------------------------------
    def inject(self, *faults: Fault) -> None:
        with self._cond:
            self._faults.extend(faults)

    @property
    def pending_faults(self) -> list[Fault]:
        with self._cond:
            return list(self._faults)

    @property
    def parallel_slots(self) -> int | None:
        return self._slots

    @parallel_slots.setter
    def parallel_slots(self, slots: int | None) -> None:
        with self._cond:
            self._slots = slots
            self._cond.notify_all()

    # -- what it saw -----------------------------------------------------------------------------
    @property
    def received(self) -> list[Received]:
        with self._cond:
            return list(self._received)

    def requests_to(self, path: str) -> int:
        with self._cond:
            return self._by_path[path]

    def reset_counters(self) -> None:
        with self._cond:
            self.requests_total, self.max_in_flight = 0, self.in_flight
            self._by_path.clear()
            self._received.clear()

    # -- used by the handler ---------------------------------------------------------------------
    def knows(self, model: str) -> bool:
        return full_tag(model) in self.models

    def arrive(self, seen: Received) -> Fault | None:
        with self._cond:
            self.requests_total += 1
            self._by_path[seen.path] += 1
            self._received.append(seen)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self._faults.pop(0) if self._faults else None

    def leave(self) -> None:
        with self._cond:
            self.in_flight -= 1

    def pause(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)

    @contextmanager
    def _slot(self) -> Iterator[None]:
        """Like OLLAMA_NUM_PARALLEL: K generations at once, the rest wait their turn."""
        with self._cond:
            while self._slots is not None and self._busy >= self._slots and not self._closing.is_set():
                self._cond.wait()
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def generate(self, request: dict[str, Any], messages: list[Any], options: dict[str, Any]) -> Generation:
        """Ask the responder, then shape the reply as the runner would: cut to num_ctx, num_predict."""
        with self._slot():
            self.pause(self.latency_s)
            text = self.responder(request)
        prompt = "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        num_ctx = int(options.get("num_ctx", self.default_num_ctx))
        prompt_tokens = min(approx_tokens(prompt), num_ctx)  # the silent truncation
        num_predict, done_reason = int(options.get("num_predict", -1)), "stop"
        if 0 <= num_predict < approx_tokens(text):
            text, done_reason = text[: num_predict * 4], "length"
        eval_count = max(1, approx_tokens(text))
        metrics = {
            "total_duration": int(self.latency_s * 1e9) + 2_000_000 + eval_count * 1_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": 1_000_000 + prompt_tokens * 10_000,
            "eval_count": eval_count,
            "eval_duration": eval_count * 1_000_000,
        }
        return Generation(text, done_reason, prompt_tokens, eval_count, metrics)
