"""A fake Ollama server on real loopback HTTP, for tests and benchmarks.

It follows the protocol notes (shared/notes/ollama-protocol.md), not any client's expectations:
`stream` is true when absent, unknown keys are ignored, an unknown model is a 404, a wrongly typed
option a 500. It also serves Ollama's OpenAI-compatible /v1/models and /v1/chat/completions (no
streaming there).

A chat longer than num_ctx goes as in Ollama (server/prompt.go chatPrompt, the runners' NewSequence
and processBatch): unless the request says `truncate: false`, the oldest non-system messages are
dropped until the rest fits (the responder sees only what is kept), and a last message that still
does not fit is cut to num_ctx tokens, all with a 200; with `truncate: false` it is a 400 {"error":
"the input length exceeds the context length"}. A reply that would outgrow the window ends with
done_reason "length" under `shift: false`, and otherwise goes on (Ollama shifts the prompt out).
A `version` older than 0.12.6 emulates a server that predates both keys and ignores them.

`format` ("json" or a JSON Schema) is honoured as Ollama's grammar would: the responder's text goes
through the fake constrained decoder (pipeline.llm.backends.fake_decoding) before num_predict cuts it, so a
long reply under a schema is truncated JSON with done_reason "length". `logprobs: true` with
`top_logprobs: k` (honoured from 0.12.11, the default version here) adds deterministic fake
log-probabilities, one entry per fake token: `logprobs` on the reply, or on each streamed chunk.

Tokens are approximated as len(text) // 4: close enough to real tokenizers for English that
truncation and num_predict behave at realistic sizes, and needs no tokenizer.

    with FakeOllama(latency_s=0.1, parallel_slots=2) as server:
        server.inject(Fault.status(503), Fault.reset, Fault.empty_reply)
        ... OllamaBackend(LLMSettings(base_url=server.url, model="test-model")) ...
        server.repull("test-model", "sha256:..."), a new digest in /api/tags from now on
        server.requests_total, server.max_in_flight, server.received[-1].body

`latency` (a function of the chat request, seconds) replaces the fixed `latency_s` where a
benchmark needs a distribution; `busy_s` adds up the generation time the slots were busy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pipeline.llm.backends.fake_decoding import constrain, fake_logprobs, request_seed, wire_logprobs
from pipeline.testing.loopback import LoopbackServer, Received
from pipeline.testing.ollama_wire import ContextOverflow, OllamaHandler, full_tag

# The first release that honours `truncate` and `shift` (ollama/ollama#12582).
TRUNCATE_SINCE = (0, 12, 6)
# The first release that answers `logprobs` / `top_logprobs`.
LOGPROBS_SINCE = (0, 12, 11)
# The runner's words when `truncate: false` meets a prompt longer than num_ctx.
INPUT_TOO_LONG = "the input length exceeds the context length"

# Gets the chat request as Ollama sees it ({"model", "messages", "options", "format"?, ...}; /v1
# requests are translated to that shape first) and returns the reply text.
Responder = Callable[[dict[str, Any]], str]
FaultKind = Literal["status", "reset", "disconnect", "stream_error", "hang", "empty_reply", "no_content"]
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
    path: str | None = None  # only a request to this path meets it (None: the next request, any path)

    reset: ClassVar[Fault]  # TCP RST after reading the request: the client sees ECONNRESET
    disconnect: ClassVar[Fault]  # clean close with no reply: "server disconnected"
    # 200, one NDJSON chunk, then an {"error": ...} line, whatever the request's `stream` said, so
    # that a client's handling of an error on a 200 gets exercised (/v1: a 200 {"error": {...}}).
    stream_error: ClassVar[Fault]
    # 200 with a body that is no answer: `{}`; or a reply whose message has no `content` (/v1: a
    # choice whose message has none), as a proxy or a crashed runner can send.
    empty_reply: ClassVar[Fault]
    no_content: ClassVar[Fault]

    @classmethod
    def status(cls, code: int, message: str | None = None, *, retry_after: str | None = None) -> Fault:
        return cls("status", code, message or _MESSAGES.get(code, f"HTTP {code}"), retry_after=retry_after)

    def on(self, path: str) -> Fault:
        """This fault, for the next request to `path` only (e.g. "/api/chat", not the tags)."""
        return dataclasses.replace(self, path=path)

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Answer normally, but only after `seconds`: longer than the client's read timeout."""
        return cls("hang", seconds=seconds)


Fault.reset = Fault("reset")
Fault.disconnect = Fault("disconnect")
Fault.stream_error = Fault("stream_error")
Fault.empty_reply = Fault("empty_reply")
Fault.no_content = Fault("no_content")


@dataclass(frozen=True)
class Generation:
    text: str
    done_reason: str
    prompt_eval_count: int
    eval_count: int
    metrics: dict[str, int]  # the four *_duration fields, in nanoseconds, and both counts
    logprobs: list[dict[str, Any]] | None = None  # OpenAI-shaped entries, when asked for


def approx_tokens(text: str) -> int:
    return len(text) // 4


def prompt_tokens(messages: Sequence[Any]) -> int:
    """The rendered prompt's size: the fake's template is the messages' contents, back to back."""
    return approx_tokens("".join(str(m.get("content", "")) for m in messages if isinstance(m, dict)))


def fit_history(messages: list[Any], num_ctx: int) -> list[Any]:
    """chatPrompt with truncation on: drop messages from the front until the rest fits, keeping the
    system messages among those dropped and always the last message."""
    for start in range(len(messages)):
        system = [m for m in messages[:start] if isinstance(m, dict) and m.get("role") == "system"]
        kept = system + messages[start:]
        if prompt_tokens(kept) <= num_ctx or start == len(messages) - 1:
            return kept
    return messages


def parse_version(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-")[0].split(".")[:3])


def default_responder(request: dict[str, Any]) -> str:
    """Same request, same reply; a change to messages, options or format changes it (as with a
    real model), a change to anything the server ignores (a top-level `seed`) does not."""
    seen = {k: request.get(k) for k in ("messages", "options", "format")}
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:16]
    return json.dumps({"reply": digest}) if request.get("format") is not None else f"reply {digest}"


class FakeOllama(LoopbackServer):
    handler = OllamaHandler

    def __init__(
        self,
        *,
        models: Mapping[str, str] | None = None,
        responder: Responder = default_responder,
        latency_s: float = 0.0,
        latency: Callable[[dict[str, Any]], float] | None = None,
        parallel_slots: int | None = None,
        fail_next: Sequence[Fault] = (),
        default_num_ctx: int = 2048,
        version: str = "0.12.11",
    ) -> None:
        super().__init__()
        self.models = {full_tag(k): v.removeprefix("sha256:") for k, v in (models or DEFAULT_MODELS).items()}
        self.responder, self.latency_s, self.version = responder, latency_s, version
        self.latency, self.busy_s = latency, 0.0
        # 2048 is what old servers default to; newer ones pick 4096+ by VRAM. Clients pin num_ctx.
        self.default_num_ctx = default_num_ctx
        self._slots, self._busy = parallel_slots, 0
        self._faults = list(fail_next)
        self._closing = threading.Event()
        self.in_flight, self.max_in_flight = 0, 0
        self._by_path: Counter[str] = Counter()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, port: int = 0) -> FakeOllama:
        self._closing.clear()  # started again after a close: a server that came back
        super().start(port)
        return self

    def stopping(self) -> None:
        self._closing.set()
        with self._cond:
            self._cond.notify_all()

    # -- knobs, safe to turn while it runs -------------------------------------------------------
    def inject(self, *faults: Fault) -> None:
        with self._cond:
            self._faults.extend(faults)

    @property
    def pending_faults(self) -> list[Fault]:
        with self._cond:
            return list(self._faults)

    def repull(self, model: str, digest: str) -> None:
        """`ollama pull` of new weights under the same tag: /api/tags reports the new digest."""
        with self._cond:
            self.models[full_tag(model)] = digest.removeprefix("sha256:")

    def listed_models(self) -> dict[str, str]:
        with self._cond:
            return dict(self.models)

    @property
    def parallel_slots(self) -> int | None:
        return self._slots

    @parallel_slots.setter
    def parallel_slots(self, slots: int | None) -> None:
        with self._cond:
            self._slots = slots
            self._cond.notify_all()

    # -- what it saw -----------------------------------------------------------------------------
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
            self.record(seen)
            self._by_path[seen.path] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            for index, fault in enumerate(self._faults):
                if fault.path is None or fault.path == seen.path:
                    return self._faults.pop(index)
            return None

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

    @property
    def knows_truncate(self) -> bool:
        """Whether this server honours `truncate` and `shift`; an older one ignores them."""
        return parse_version(self.version) >= TRUNCATE_SINCE

    def generate(self, request: dict[str, Any], messages: list[Any], options: dict[str, Any]) -> Generation:
        """Fit the prompt to num_ctx as Ollama would, ask the responder, then shape the reply as the
        runner would: num_predict, and the window's end."""
        num_ctx = int(options.get("num_ctx", self.default_num_ctx))
        truncate = request.get("truncate") is not False or not self.knows_truncate
        shift = request.get("shift") is not False or not self.knows_truncate
        kept = fit_history(messages, num_ctx) if truncate else messages
        prompt = prompt_tokens(kept)
        if prompt > num_ctx:
            if not truncate:
                raise ContextOverflow(INPUT_TOO_LONG)
            prompt = num_ctx  # the runner keeps num_keep tokens and the tail: the silent cut
        seen = request if len(kept) == len(messages) else {**request, "messages": kept}
        seconds = self.latency(request) if self.latency is not None else self.latency_s
        with self._slot():
            self.pause(seconds)
            text = constrain(self.responder(seen), request.get("format"))
        with self._cond:
            self.busy_s += seconds
        num_predict, done_reason = int(options.get("num_predict", -1)), "stop"
        if 0 <= num_predict < approx_tokens(text):
            text, done_reason = text[: num_predict * 4], "length"
        room = num_ctx - prompt + 1  # every generated token but the last is fed back into the window
        if not shift and approx_tokens(text) > room:
            text, done_reason = text[: room * 4], "length"
        eval_count = max(1, approx_tokens(text))
        metrics = {
            "total_duration": int(seconds * 1e9) + 2_000_000 + eval_count * 1_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": 1_000_000 + prompt * 10_000,
            "eval_count": eval_count,
            "eval_duration": eval_count * 1_000_000,
        }
        logprobs = None
        if request.get("logprobs") is True and parse_version(self.version) >= LOGPROBS_SINCE:
            top = int(request.get("top_logprobs") or 0)
            logprobs = wire_logprobs(fake_logprobs(text, top, request_seed(kept)))
        return Generation(text, done_reason, prompt, eval_count, metrics, logprobs)
