"""The OpenAI-compatible backend (vLLM, llama.cpp's llama-server, LM Studio, Ollama's /v1).

Sent: temperature, top_p, seed, max_tokens, stop and response_format from the chat-completions
API, and top_k and the repeat penalty as the extra body fields the local servers accept: `top_k`
(vLLM and llama-server), `repetition_penalty` (vLLM) and `repeat_penalty` (llama-server); each
server ignores the spelling it does not know. (vLLM's penalty counts prompt and reply tokens,
llama-server's the last 64: the same knob, not the same arithmetic.) The hosted OpenAI API refuses
these extra fields. num_ctx has no field anywhere, so the server's own context applies; it stays
in the cache key all the same. temperature is always sent: the API's default is 1.0, not greedy.

A JSON Schema `format` is sent in the first of these forms the server takes, "json" always as
`response_format: {"type": "json_object"}`:

    json_schema          response_format: {"type": "json_schema", "json_schema": {"name": "reply",
                         "schema": ..., "strict": true}}   the API's own; vLLM, llama.cpp's llama-server
    json_object_schema   response_format: {"type": "json_object", "schema": ...}
                         llama-cpp-python's server (`python -m llama_cpp.server`), which answers
                         json_schema with a 500 (its request model knows only text and json_object)
    guided_json          guided_json: ...   older vLLM

The API's own form is sent first. A refusal that names it (a 400, 422 or 500 whose message says
response_format, json_schema or guided_json) starts a probe of the other forms, in order: a tiny
request whose schema admits one answer only, `{"probe": "judgeloop-schema-probe"}`, which a server
that enforces the form returns and one that ignores it (llama-cpp-python's ignores guided_json,
vLLM's extra fields let `schema` inside json_object pass unread) almost surely does not. The first
form that enforces is used for the rest of the run (a warning says so) and the call is sent again
at once, not counted as a retry; when none does, a BadRequestError says so with the fix. The wire
form is not the request: the cache key is computed from the ChatRequest (its `format` is the
schema), so the same call has the same key whichever form the server took; the probes are neither
cached nor recorded. The schema itself is sent as that key holds it (pipeline.llm.schema_order): a
structured output writes a reply's properties in the order the schema lists them.
A request that asks for log-probabilities sends `logprobs: true, top_logprobs: k` and reads
`choices[0].logprobs.content`.

This API reports no weights digest, so unless llm.digest is pinned the identity is the served
model id, which does not change when the weights behind it do. Pin llm.digest (for example the
checkpoint's commit hash) when the replies must be reproducible.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

import httpx

from pipeline.errors import (
    BackendError,
    BadRequestError,
    EmptyReplyError,
    ModelNotFoundError,
    PromptTruncatedError,
    TransientBackendError,
)
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
    without_query,
)
from pipeline.llm.backends.ollama import full_tag
from pipeline.llm.logprobs import read_wire_logprobs
from pipeline.llm.redact import redact_url
from pipeline.llm.schema_order import schema_as_keyed
from pipeline.llm.settings import LLMSettings, in_flight
from pipeline.llm.types import ChatReply, ChatRequest, Message, ModelIdentity, Options

log = logging.getLogger(__name__)

# vLLM: "This model's maximum context length is 2048 tokens. However, you requested ..."
# llama_cpp.server the same words (its context_length_exceeded); llama-server "exceed_context_size".
_CONTEXT_WORDS = re.compile(r"context (length|window)|maximum context|too long", re.IGNORECASE)


def too_long(said: str) -> bool:
    """Whether a server's refusal says the prompt does not fit the context."""
    return _CONTEXT_WORDS.search(said) is not None or overflowed(said)


# The forms of a JSON Schema for the reply, in the order tried (see the module's docstring).
SCHEMA_DIALECTS = ("json_schema", "json_object_schema", "guided_json")
_FORM_REFUSED = re.compile(r"response_format|json_schema|guided_json", re.IGNORECASE)
PROBE_ANSWER = "judgeloop-schema-probe"
PROBE = ChatRequest(
    messages=(Message(role="user", content="Reply with a JSON object."),),
    options=Options(num_predict=32),
    format={
        "type": "object",
        "properties": {"probe": {"type": "string", "enum": [PROBE_ANSWER]}},
        "required": ["probe"],
        "additionalProperties": False,
    },
)


def api_root(base_url: str) -> str:
    """Accept both spellings users copy from server docs: http://host:8000 and http://host:8000/v1
    (a query string, such as a proxy's token, is kept)."""
    base, query = without_query(base_url)
    root = base.rstrip("/").removesuffix("/v1")
    return f"{root}?{query}" if query else root


def response_format(fmt: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """`format` in the API's own form (the first dialect)."""
    return format_fields(fmt, SCHEMA_DIALECTS[0]).get("response_format")


def format_fields(fmt: str | dict[str, Any] | None, dialect: str) -> dict[str, Any]:
    """The body fields that carry `format` in this dialect."""
    if fmt is None:
        return {}
    if fmt == "json" or not isinstance(fmt, dict):
        return {"response_format": {"type": "json_object"}}
    # The schema as the key holds it: a structured output writes properties in the order sent.
    fmt = schema_as_keyed(fmt)
    if dialect == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": fmt}}
    if dialect == "guided_json":
        return {"guided_json": fmt}
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": fmt, "strict": True},
        }
    }


class OpenAICompatBackend:
    kind = "openai"

    def __init__(
        self,
        settings: LLMSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        wait: Wait | None = None,
    ) -> None:
        self.settings = settings
        self.parallelism = settings.parallelism
        self.base_url = api_root(settings.base_url)
        self._client = make_client(settings.model_copy(update={"base_url": self.base_url}), transport)
        key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        if key:
            self._client.headers["Authorization"] = f"Bearer {key}"
        self._retry = RetryPolicy.from_settings(settings, wait)
        self._slots = threading.BoundedSemaphore(in_flight(settings.parallelism))  # see ollama.py
        self._identity: ModelIdentity | None = None
        self._identity_lock = threading.Lock()
        self.dialect = SCHEMA_DIALECTS[0]  # the form a JSON Schema goes in; moves on a refusal
        self._dialect_lock = threading.Lock()

    def _not_found(self) -> str:
        return (
            f"model '{self.settings.model}' not found at {self.base_url} — set llm.model to one of the "
            "ids its GET /v1/models lists (vLLM serves the name given to --served-model-name)"
        )

    def _exchange(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        with self._slots:
            response = send(self._client, method, path, json=body)
        if response.status_code == 400 and too_long(said := error_text(response)):
            # Not transient: the same prompt will never fit the same served context.
            raise PromptTruncatedError(
                f"the prompt does not fit the model's context length (server said: {said}). Fix: shorten "
                "the input, or serve the model with a longer context (vLLM: --max-model-len; llama-server "
                "and llama_cpp.server: --n_ctx)."
            )
        check_status(response, not_found=self._not_found())
        try:
            data = json_body(response)
        except ValueError as exc:
            raise TransientBackendError(f"{method} {response.request.url}: reply is not JSON") from exc
        if not isinstance(data, dict):
            raise TransientBackendError(f"{method} {response.request.url}: not a JSON object")
        if (error := body_error(data)) is not None:
            raise TransientBackendError(f"{method} {response.request.url}: {error}")
        return data

    def identity(self) -> ModelIdentity:
        with self._identity_lock:
            if self._identity is None:
                self._identity = self._fetch_identity()
            return self._identity

    def _fetch_identity(self) -> ModelIdentity:
        listing = self._retry.call(lambda: self._exchange("GET", "/v1/models"), "GET /v1/models")
        refuse_unreadable(listing, f"GET {self.base_url}/v1/models")  # its ids enter every cache key
        model = self.settings.model
        for entry in _objects(listing.get("data")):  # anything else listed names no model
            served = str(entry.get("id", ""))
            if served == model or full_tag(served) == full_tag(model):
                break
        else:
            raise ModelNotFoundError(self._not_found())
        if self.settings.digest is not None:
            return ModelIdentity(backend=self.kind, name=model, digest=self.settings.digest)
        # `root` is vLLM's checkpoint path; `created` is left out because vLLM stamps it with the
        # time of the listing, which would change the cache key on every restart.
        root = entry.get("root")
        digest = "name:" + served + (f"@{root}" if root and root != served else "")
        log.warning(
            "llm.digest is not pinned and %s reports no weights digest: cache keys use the model id "
            "'%s', which stays the same if the weights behind it change. Pin llm.digest to make "
            "cached replies reproducible.",
            redact_url(self.base_url),
            digest,
        )
        return ModelIdentity(backend=self.kind, name=model, digest=digest)

    def request_body(self, request: ChatRequest, dialect: str | None = None) -> dict[str, Any]:
        opts = request.options
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [m.model_dump(mode="json") for m in request.messages],
            "temperature": opts.temperature,
            "top_p": opts.top_p,
            "seed": opts.seed,
            "top_k": opts.top_k,
            "repetition_penalty": opts.repeat_penalty,
            "repeat_penalty": opts.repeat_penalty,
            "stream": False,
        }
        # Ollama spells "no limit" num_predict=-1; the OpenAI API spells it by leaving max_tokens out.
        if opts.num_predict >= 0:
            body["max_tokens"] = opts.num_predict
        if opts.stop:
            body["stop"] = list(opts.stop)
        body.update(format_fields(request.format, dialect or self.dialect))
        if request.logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = request.logprobs
        return body

    def _schema_refused(self, request: ChatRequest, dialect: str, exc: BackendError) -> bool:
        """Whether the server refused the form the schema went in: then the first other form it
        enforces is used from now on (True: send again); BadRequestError when it enforces none."""
        if not isinstance(request.format, dict) or not _FORM_REFUSED.search(exc.message):
            return False
        with self._dialect_lock:  # one probe at a time; the other calls wait for its outcome
            if self.dialect != dialect:
                return True  # another call found the form meanwhile
            for other in SCHEMA_DIALECTS[SCHEMA_DIALECTS.index(dialect) + 1 :]:
                if self._enforces(other):
                    self.dialect = other
                    break
            else:
                raise BadRequestError(
                    f"{redact_url(self.base_url)} takes a JSON Schema for the reply in none of the forms "
                    f"judgeloop knows ({', '.join(SCHEMA_DIALECTS)}): it refused {dialect} ({exc.message}) "
                    "and ignored or refused the others. Fix: serve the model with vLLM, llama.cpp's "
                    "llama-server or llama-cpp-python's server, or use the text output modes "
                    "(judge.output: text, assess.output: text)."
                ) from exc
        log.warning(
            "%s refused the reply's JSON Schema as %s (%s); it enforces %s, used for the rest of the run",
            redact_url(self.base_url),
            dialect,
            exc.message[:200],
            self.dialect,
        )
        return True

    def _enforces(self, dialect: str) -> bool:
        """Whether the server constrains a reply to a schema sent in this form (PROBE)."""
        try:
            data = self._exchange("POST", "/v1/chat/completions", self.request_body(PROBE, dialect))
        except BackendError as exc:
            if _FORM_REFUSED.search(exc.message):
                return False
            raise
        text = _content(data)  # None for a reply of another shape: the form is not enforced
        try:
            return bool(json_loads(str(text)).get("probe") == PROBE_ANSWER)
        except (ValueError, AttributeError):
            return False

    def _completion(self, request: ChatRequest) -> ChatReply:
        """One exchange and the reply it holds (completion_reply). A refused schema form is sent
        again at once in the next form."""
        path = "/v1/chat/completions"
        while True:
            dialect = self.dialect
            try:
                data = self._exchange("POST", path, self.request_body(request, dialect))
                break
            except BackendError as exc:
                if not self._schema_refused(request, dialect, exc):
                    raise
        return completion_reply(data, request, f"POST {self.base_url}{path}")

    def chat(self, request: ChatRequest) -> ChatReply:
        return self._retry.call(lambda: self._completion(request), "POST /v1/chat/completions")

    def close(self) -> None:
        self._client.close()


def completion_reply(data: dict[str, Any], request: ChatRequest, where: str) -> ChatReply:
    """The reply a chat completion's body holds, as this backend records it (a batch's results are
    read with it too: pipeline.tools.batch). A body without a choice, a message or its content is a
    protocol error (EmptyReplyError), retried like a dropped connection: an empty reply stored in
    the cache would be served as the model's answer. So is content that is empty or only whitespace,
    and a body holding a lone surrogate (UnreadableReplyError), which no record can hold."""
    choice = _choice(data)
    content = _content(data)
    if choice is None or not isinstance(content, str):
        raise EmptyReplyError(
            f"{where}: a 200 reply without a message's content ({str(data)[:200]}): a protocol error, "
            "not an answer"
        )
    if not content.strip():
        raise EmptyReplyError(f"{where}: an empty reply ({content!r}): a failed call, not an answer")
    refuse_unrecordable(data, where)
    usage = _object(data.get("usage"))
    with shaped_reply(where):
        return ChatReply(
            text=content,
            done_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            meta={k: data[k] for k in ("id", "model", "created", "system_fingerprint") if k in data},
            logprobs=read_wire_logprobs(_object(choice.get("logprobs")).get("content"))
            if request.logprobs is not None
            else None,
        )


def _object(value: Any) -> dict[str, Any]:
    """A part of the reply that must be an object, as one: anything else holds nothing."""
    return value if isinstance(value, dict) else {}


def _objects(value: Any) -> list[dict[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _choice(data: dict[str, Any]) -> dict[str, Any] | None:
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    return choice if isinstance(choice, dict) else None


def _content(data: dict[str, Any]) -> Any:
    """The first choice's message's content, of whatever type; None where there is none."""
    return _object(_object(_choice(data)).get("message")).get("content")


def build(settings: LLMSettings, cache_dir: Path) -> OpenAICompatBackend:
    return OpenAICompatBackend(settings)
