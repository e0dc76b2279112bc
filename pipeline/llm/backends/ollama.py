"""The Ollama backend: POST /api/chat, one JSON reply, identity pinned by the manifest digest.

Every option is sent, defaults included: Ollama fills a missing option from the model's Modelfile
and then from its own defaults (temperature 0.8, seed -1, ...), so an omitted option would let the
server pick a value the cache key knows nothing about.

A prompt that does not fit num_ctx is never answered silently (pipeline.llm.backends.context_overflow):
every request says `truncate: false, shift: false`, so an Ollama that knows these fields (0.12.6
and later) refuses it with a 400, and the reply counts catch what an older server cuts.

`format` carries "json" or a JSON Schema, which Ollama enforces with a grammar; the schema is sent
as its cache key holds it (pipeline.llm.schema_order), since the grammar writes a reply's properties
in the order sent. A request that
asks for log-probabilities sends `logprobs: true, top_logprobs: k` (Ollama 0.12.11 and later;
an older server ignores both, and the reply then has none).

A 200 whose body has no `message`, a message without `content`, or content that is empty or only
whitespace is a failed call (EmptyReplyError), retried like a dropped connection: stored, it would
be served as the model's answer, and no judge can read a score in it. So is a body holding a lone
surrogate (an escape "\\ud800" the json module reads), which no record can hold.

The model can change under a run: `ollama pull` of the same tag replaces the weights, and the
replies that follow would be stored under the old digest's keys. So no reply is returned (and
stored) until a read of the digest from /api/tags that began after the reply arrived finds the
digest the run started with; once it differs, this call and every later one fail with
ModelChangedError, and the session stores none of their replies. One read confirms every reply
that arrived before it: calls answered side by side wait for one check, not one each. (Checking
every tenth call, as before, stored up to nine replies of the new weights under the old digest.)
"""

from __future__ import annotations

import difflib
import itertools
import logging
import threading
from pathlib import Path
from typing import Any

import httpx

from pipeline.errors import (
    ConfigError,
    EmptyReplyError,
    JudgeloopError,
    ModelChangedError,
    ModelNotFoundError,
    TransientBackendError,
)
from pipeline.llm.backends import context_overflow
from pipeline.llm.backends.context_overflow import overflowed
from pipeline.llm.backends.http_errors import (
    RetryPolicy,
    Wait,
    body_error,
    check_status,
    error_text,
    json_body,
    json_loads,
    make_client,
    refuse_unreadable,
    refuse_unrecordable,
    send,
    shaped_reply,
)
from pipeline.llm.logprobs import read_wire_logprobs
from pipeline.llm.redact import redact_url
from pipeline.llm.schema_order import schema_as_keyed
from pipeline.llm.settings import LLMSettings, in_flight
from pipeline.llm.types import ChatReply, ChatRequest, ModelIdentity

log = logging.getLogger(__name__)

_META_KEYS = (
    "model",
    "created_at",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


def full_tag(name: str) -> str:
    """`llama3` and `llama3:latest` are one model to Ollama; a registry host:port is not a tag."""
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def normalize_digest(digest: str) -> str:
    return digest if digest.startswith("sha256:") else "sha256:" + digest


def closest_first(wanted: str, names: list[str]) -> list[str]:
    """`names` ordered by likeness to `wanted`, case ignored (gemma3:27B finds gemma3:27b first)."""
    key = wanted.lower()
    return sorted(names, key=lambda n: (-difflib.SequenceMatcher(None, key, n.lower()).ratio(), n))


class OllamaBackend:
    kind = "ollama"

    def __init__(
        self,
        settings: LLMSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        wait: Wait | None = None,
    ) -> None:
        self.settings = settings
        self.parallelism = settings.parallelism
        self._client = make_client(settings, transport)
        self._retry = RetryPolicy.from_settings(settings, wait)
        # Ollama queues what exceeds OLLAMA_NUM_PARALLEL, and a queued request's wait counts
        # against our read timeout: the bound is held here, a queue's worth past the slots.
        self._slots = threading.BoundedSemaphore(in_flight(settings.parallelism))
        self._identity: ModelIdentity | None = None
        self._identity_lock = threading.Lock()
        # Replies are numbered as they arrive, and so are digest checks as they begin: a check
        # confirms every reply numbered below it. A check is one GET /api/tags, a few milliseconds
        # against generations of seconds.
        self._arrivals = itertools.count(1)
        self._confirmed = 0  # the number of the last check that found the run's digest
        self._changed: ModelChangedError | None = None
        self._version: tuple[int, int, int] | None = None
        self._version_asked = False
        self._version_lock = threading.Lock()

    def _not_found(self, have: list[str] | None = None) -> str:
        m = self.settings.model
        said = f"model '{m}' not found at {self.settings.base_url} — run: ollama pull {m}"
        if have:  # the server's tags, the closest to the one asked for first (a case slip, say)
            said += f", or use one it has: {', '.join(closest_first(m, have)[:8])}"
            said += f"{' ...' if len(have) > 8 else ''} (llm.model)"
        elif have is not None:
            said += " (the server has no model yet)"
        return said

    def _exchange(self, method: str, path: str, body: Any = None, *, num_ctx: int = 0) -> dict[str, Any]:
        with self._slots:
            response = send(self._client, method, path, json=body)
        if response.status_code == 400 and overflowed(refusal := error_text(response)):
            raise context_overflow.refused(num_ctx, refusal)
        check_status(response, not_found=self._not_found())
        data = parse_body(response)
        if not isinstance(data, dict):
            raise TransientBackendError(
                f"{response.request.method} {response.request.url}: not a JSON object"
            )
        if (said := body_error(data)) is not None:
            if overflowed(said):  # a proxy that streamed anyway: the refusal is a line
                raise context_overflow.refused(num_ctx, said)
            # A 200 that carries an error: the runner failed after the reply had started.
            raise TransientBackendError(f"{response.request.method} {response.request.url}: {said}")
        return data

    def identity(self) -> ModelIdentity:
        with self._identity_lock:
            if self._identity is None:
                self._identity = self._fetch_identity()
            return self._identity

    def _fetch_identity(self) -> ModelIdentity:
        digest = self._fetch_digest()
        pinned = self.settings.digest
        if pinned is not None and normalize_digest(pinned) != digest:
            m = self.settings.model
            raise ConfigError(
                f"model '{m}' at {self.settings.base_url} is {digest}, but llm.digest pins "
                f"{normalize_digest(pinned)}: the weights changed under the tag. Fix: if this machine "
                f"has an old copy, run `ollama pull {m}`; if the new weights are intended, re-pin "
                f"with llm.digest: {digest} (replies cached for the old weights will not be reused)."
            )
        return ModelIdentity(backend=self.kind, name=self.settings.model, digest=digest)

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        options = request.options.model_dump(mode="json")
        if not request.options.stop:
            del options["stop"]
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [m.model_dump(mode="json") for m in request.messages],
            "options": options,
            "stream": False,
            # Refuse rather than cut (see pipeline.llm.backends.context_overflow); keys an old server ignores.
            "truncate": False,
            "shift": False,
        }
        if request.format is not None:
            # The schema as the key holds it: Ollama's grammar writes properties in the order sent.
            body["format"] = (
                schema_as_keyed(request.format) if isinstance(request.format, dict) else request.format
            )
        if request.logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = request.logprobs
        return body

    def _answer(self, body: dict[str, Any], num_ctx: int) -> tuple[dict[str, Any], str]:
        """One exchange: the reply and its message's text (EmptyReplyError when there is none)."""
        data = self._exchange("POST", "/api/chat", body, num_ctx=num_ctx)
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise EmptyReplyError(
                f"POST {self.settings.base_url}/api/chat: a 200 reply without a message's content "
                f"({str(data)[:200]}): a protocol error, not an answer"
            )
        if not content.strip():
            raise EmptyReplyError(
                f"POST {self.settings.base_url}/api/chat: an empty reply ({content!r}): a failed call, "
                "not an answer"
            )
        refuse_unrecordable(data, f"POST {self.settings.base_url}/api/chat")
        return data, content

    def _confirm(self, arrived: int) -> None:
        """Return only once a digest check that began after reply number `arrived` found the digest
        the run started with; fail this call, and every later one, once it differs: the reply may
        come from the new weights."""
        with self._identity_lock:
            if self._changed is None and self._confirmed <= arrived:
                started = self._identity
                if started is not None:
                    check = next(self._arrivals)
                    now = self._fetch_digest()
                    self._confirmed = check
                    if now != started.digest:
                        m = self.settings.model
                        self._changed = ModelChangedError(
                            f"model '{m}' at {self.settings.base_url} changed during the run: its digest was "
                            f"{started.digest} when the run started and is {now} now (pulled again under "
                            "the same tag?). The stage stopped; no reply after the change was seen is "
                            "stored. Fix: run the stage again, under the new weights (their replies are new "
                            "cache entries); or, to keep the old ones, restore them on the server and pin "
                            f"llm.digest: {started.digest}."
                        )
            if self._changed is not None:
                raise self._changed

    def _fetch_digest(self) -> str:
        tags = self._retry.call(lambda: self._exchange("GET", "/api/tags"), "GET /api/tags")
        refuse_unreadable(tags, f"GET {self.settings.base_url}/api/tags")  # its digest enters every key
        wanted = full_tag(self.settings.model)
        have = []
        models = tags.get("models")
        for entry in models if isinstance(models, list) else []:
            if not isinstance(entry, dict):  # names no model
                continue
            names = {full_tag(str(entry.get(k, ""))) for k in ("name", "model")}
            if wanted in names and entry.get("digest"):
                return normalize_digest(str(entry["digest"]))
            have.append(str(entry.get("name") or entry.get("model") or ""))
        raise ModelNotFoundError(self._not_found(sorted(filter(None, set(have)))))

    def chat(self, request: ChatRequest) -> ChatReply:
        # The digest the checks compare with is the one identity() gave the session (for its keys).
        with self._identity_lock:
            if self._changed is not None:
                raise self._changed
        body = self.request_body(request)
        num_ctx = request.options.num_ctx
        reply = self._retry.call(lambda: self._reply(request, body, num_ctx), "POST /api/chat")
        self._confirm(next(self._arrivals))
        context_overflow.check_counts(request, reply, self._may_drop_history)
        return reply

    def _reply(self, request: ChatRequest, body: dict[str, Any], num_ctx: int) -> ChatReply:
        """One exchange's reply; one whose values are of another shape is a failed call, retried
        (shaped_reply), as an empty one is."""
        data, text = self._answer(body, num_ctx)
        with shaped_reply(f"POST {self.settings.base_url}/api/chat"):
            return ChatReply(
                text=text,
                done_reason=data.get("done_reason"),
                prompt_tokens=data.get("prompt_eval_count"),
                completion_tokens=data.get("eval_count"),
                meta={k: data[k] for k in _META_KEYS if k in data},
                logprobs=read_wire_logprobs(data.get("logprobs")) if request.logprobs is not None else None,
            )

    def _may_drop_history(self) -> bool:
        return context_overflow.may_drop_history(self.server_version())

    def server_version(self) -> tuple[int, int, int] | None:
        """GET /api/version, once, and only when a reply needs it: cache hits never ask, and a
        failure leaves the version unknown rather than failing a call that did succeed."""
        with self._version_lock:
            if not self._version_asked:
                self._version_asked = True
                self._version = self._fetch_version()
            return self._version

    def _fetch_version(self) -> tuple[int, int, int] | None:
        url = redact_url(self.settings.base_url)
        try:
            said = str(self._exchange("GET", "/api/version").get("version", ""))
        except JudgeloopError as exc:
            said = ""
            log.debug("GET %s/api/version failed: %s", url, exc)
        version = context_overflow.parse_version(said)
        if (warning := context_overflow.old_server_warning(url, said, version)) is not None:
            log.warning("%s", warning)
        return version

    def close(self) -> None:
        self._client.close()


def parse_body(response: httpx.Response) -> Any:
    """One JSON object, or NDJSON if the server streamed anyway (a proxy dropping "stream")."""
    try:
        return json_body(response)
    except ValueError:
        pass
    where = f"{response.request.method} {response.request.url}"
    chunks = _streamed_chunks(response.text, where)
    for chunk in chunks:
        if "error" in chunk:
            return chunk
    last = dict(chunks[-1])
    if not last.get("done"):
        raise TransientBackendError(f"{where}: stream cut short")
    if not all(_chunk_shaped(c) for c in chunks):
        problem = "a streamed chunk's message or logprobs are not a chat reply's (an object and a list)"
        raise TransientBackendError(f"{where}: {problem}")
    content = "".join(str((c.get("message") or {}).get("content") or "") for c in chunks)
    last["message"] = {"role": "assistant", "content": content}
    if any("logprobs" in c for c in chunks):  # each chunk carries its own tokens'
        last["logprobs"] = [entry for c in chunks for entry in c.get("logprobs") or ()]
    return last


def _streamed_chunks(text: str, where: str) -> list[dict[str, Any]]:
    """The JSON objects of an NDJSON body, one a line; TransientBackendError where it is not one.
    Cut at "\n" alone: a chunk's text may hold U+0085, U+2028 or U+2029 as it is (JSON escapes
    neither), where str.splitlines() would cut it."""
    lines = [line for line in text.split("\n") if line.strip()]
    try:
        chunks = [json_loads(line) for line in lines]
    except ValueError as exc:
        raise TransientBackendError(f"{where}: reply is not JSON: {text[:200]!r}") from exc
    if not chunks or not all(isinstance(c, dict) for c in chunks):
        raise TransientBackendError(f"{where}: empty reply")
    return chunks


def _chunk_shaped(chunk: dict[str, Any]) -> bool:
    """Whether a streamed chunk's message is an object and its logprobs a list, where given (one of
    another shape gave AttributeError's or TypeError's traceback in place of a failed call)."""
    message, logprobs = chunk.get("message"), chunk.get("logprobs")
    return (not message or isinstance(message, dict)) and (not logprobs or isinstance(logprobs, list))


def build(settings: LLMSettings, cache_dir: Path) -> OllamaBackend:
    return OllamaBackend(settings)
