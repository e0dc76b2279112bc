"""A fake OpenAI-compatible server (as vLLM and llama.cpp's llama-server answer) on real loopback HTTP.

Routes: GET /v1/models and POST /v1/chat/completions, non-streaming (a request with `stream: true`
is refused with a 400 naming this). What it follows, from the chat-completions API and vLLM:
- `temperature` defaults to 1.0 when absent; numbers must be numbers (400 otherwise);
- `max_tokens` cuts the reply with finish_reason "length"; `stop` ends it before the stop string;
- a prompt plus max_tokens beyond `max_model_len` is a 400 in vLLM's words (it never truncates);
- `response_format`: `{"type": "text"}`, `{"type": "json_object"}`, or `{"type": "json_schema",
  "json_schema": {"name", "schema", "strict"?}}`; a json_schema without a schema object, or any
  other type, is a 400. The schema is honoured by the fake constrained decoder
  (pipeline.llm.backends.fake_decoding): the reply is JSON valid for it, cut by max_tokens like any other.
  `dialect` makes it another server: "json_object_schema" is llama-cpp-python's server (a 500 for
  json_schema, whose pydantic model knows only text and json_object; `{"type": "json_object",
  "schema": ...}` honoured), "guided_json" an older vLLM (a 400 for json_schema; the top-level
  `guided_json` field honoured);
- `logprobs: true` with `top_logprobs: k` (0..20; top_logprobs without logprobs is a 400) gives
  `choices[0].logprobs.content`, deterministic fake entries;
- extra sampling fields `top_k`, `repetition_penalty` (vLLM), `repeat_penalty` (llama-server) are
  accepted and change the reply, as they would on those servers; other unknown fields are ignored;
- errors are `{"error": {"message", "type", "code"}}`; an unknown model is a 404.
Tokens are approximated as len(text) // 4, as in the fake Ollama server.

    with FakeOpenAI(responder=lambda body: '{"score": 4}') as server:
        OpenAICompatBackend(LLMSettings(backend="openai", base_url=server.url, model="test-model"))
        server.received[-1].body, server.requests_total
        server.send_next({}, {"choices": [{"message": {"role": "assistant"}}]})   # 200s with no answer
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

from pipeline.llm.backends.fake_decoding import constrain, fake_logprobs, request_seed, wire_logprobs
from pipeline.testing.loopback import LoopbackHandler, LoopbackServer, Received

# Gets the request body as sent (model, messages, sampling fields, ...) and returns the reply text.
Responder = Callable[[dict[str, Any]], str]
# How the server takes a JSON Schema for the reply (see the module's docstring).
Dialect = Literal["json_schema", "json_object_schema", "guided_json"]
SAMPLING_FIELDS = ("temperature", "top_p", "seed", "top_k", "repetition_penalty", "repeat_penalty")
MAX_TOP_LOGPROBS = 20


def default_responder(body: dict[str, Any]) -> str:
    """Same messages and sampling, same reply; a change to either changes it."""
    seen = {k: body.get(k) for k in ("messages", *SAMPLING_FIELDS)}
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:16]
    return f"reply {digest}"


def approx_tokens(text: str) -> int:
    return len(text) // 4


class BadRequest(Exception):
    def __init__(self, code: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.code, self.kind = code, kind


class FakeOpenAI(LoopbackServer):
    def __init__(
        self,
        *,
        models: Sequence[str] = ("test-model",),
        responder: Responder = default_responder,
        max_model_len: int = 4096,
        latency_s: float = 0.0,
        dialect: Dialect = "json_schema",
    ) -> None:
        super().__init__()
        self.models, self.responder, self.dialect = list(models), responder, dialect
        self.max_model_len, self.latency_s = max_model_len, latency_s
        self._next_bodies: list[Any] = []

    def send_next(self, *bodies: Any) -> None:
        """Answer the next chat completions with these bodies, each with a 200, whatever was asked
        (a proxy's empty reply, a choice without a message's content, ...)."""
        with self._cond:
            self._next_bodies.extend(bodies)

    def next_body(self) -> tuple[bool, Any]:
        with self._cond:
            return (True, self._next_bodies.pop(0)) if self._next_bodies else (False, None)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion, or BadRequest with the status and words a server would use."""
        model = self._check(body)
        fmt = _format(body.get("response_format"), self.dialect)
        if self.dialect == "guided_json" and isinstance(body.get("guided_json"), dict):
            fmt = body["guided_json"]
        top = _top_logprobs(body)
        prompt, max_tokens = self._fit(body)
        if self.latency_s:
            time.sleep(self.latency_s)
        text, finish = _cut(constrain(self.responder(body), fmt), body.get("stop"), max_tokens)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish,
        }
        if top is not None:
            seed = request_seed(body["messages"])
            choice["logprobs"] = {"content": wire_logprobs(fake_logprobs(text, top, seed))}
        completion = max(1, approx_tokens(text))
        return {
            "id": f"chatcmpl-{hashlib.sha256(text.encode()).hexdigest()[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _check(self, body: dict[str, Any]) -> str:
        """The request's model, once the request is one this server takes."""
        model = body.get("model")
        if model not in self.models:
            raise BadRequest(404, f"The model `{model}` does not exist.", "NotFoundError")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest(400, "messages: a non-empty list is required")
        if body.get("stream"):
            raise BadRequest(400, "stream: this fake server answers only stream=false")
        for name in (*SAMPLING_FIELDS, "max_tokens"):
            value = body.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise BadRequest(400, f"{name}: Input should be a valid number")
        return str(model)

    def _fit(self, body: dict[str, Any]) -> tuple[int, int | None]:
        """The prompt's tokens and max_tokens, once the two fit max_model_len (vLLM never truncates)."""
        messages = body["messages"]
        prompt = approx_tokens("".join(str(m.get("content", "")) for m in messages if isinstance(m, dict)))
        max_tokens = body.get("max_tokens")
        wanted = prompt + (max_tokens if isinstance(max_tokens, int) else 0)
        if wanted > self.max_model_len:
            raise BadRequest(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                f"requested {wanted} tokens ({prompt} in the messages, {max_tokens or 0} in the "
                "completion). Please reduce the length of the messages or completion.",
            )
        return prompt, max_tokens if isinstance(max_tokens, int) else None


def _cut(text: str, stop: Any, max_tokens: int | None) -> tuple[str, str]:
    """The reply ended before its first stop string, then cut at max_tokens: the text, and why it ended."""
    for word in [stop] if isinstance(stop, str) else stop or []:
        if word and word in text:
            text = text[: text.index(word)]
    if max_tokens is not None and max_tokens < approx_tokens(text):
        return text[: max_tokens * 4], "length"
    return text, "stop"


def _format(response_format: Any, dialect: Dialect = "json_schema") -> str | dict[str, Any] | None:
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        # Only llama-cpp-python's server reads a schema there; vLLM lets the unknown field pass unread.
        schema = response_format.get("schema")
        if dialect == "json_object_schema" and isinstance(schema, dict):
            return cast(dict[str, Any], schema)
        return "json"
    if kind == "json_schema" and dialect == "json_object_schema":
        # llama-cpp-python's server: its request model's literal, reported as an internal error.
        raise BadRequest(
            500,
            "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
            "internal_server_error",
        )
    if kind == "json_schema" and dialect == "guided_json":
        raise BadRequest(400, "response_format.type: json_schema is not supported; use guided_json")
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise BadRequest(400, "response_format.json_schema.schema: an object is required")
        return cast(dict[str, Any], schema)
    raise BadRequest(400, f"response_format.type: expected text, json_object or json_schema, got {kind!r}")


def _top_logprobs(body: dict[str, Any]) -> int | None:
    top = body.get("top_logprobs")
    if not body.get("logprobs"):
        if top is not None:
            raise BadRequest(400, "top_logprobs: requires logprobs to be true")
        return None
    if top is None:
        return 0
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
        raise BadRequest(400, f"top_logprobs: must be an integer from 0 to {MAX_TOP_LOGPROBS}")
    return top


class _Handler(LoopbackHandler[FakeOpenAI]):
    def serve(self, received: Received, is_json: bool) -> None:
        self.fake.record(received)
        method, path, body = received.method, received.path, received.body
        try:
            if (method, path) == ("GET", "/v1/models"):
                data = [
                    {"id": m, "object": "model", "created": 1735689600, "owned_by": "vllm", "root": m}
                    for m in self.fake.models
                ]
                self.send_json(200, {"object": "list", "data": data})
            elif (method, path) == ("POST", "/v1/chat/completions"):
                if not is_json or not isinstance(body, dict):
                    raise BadRequest(400, "the request body is not a JSON object")
                injected, reply = self.fake.next_body()
                self.send_json(200, reply if injected else self.fake.complete(body))
            else:
                raise BadRequest(404, f"{method} {path}: not found", "NotFoundError")
        except BadRequest as exc:
            self.send_json(exc.code, {"error": {"message": str(exc), "type": exc.kind, "code": exc.code}})
        except Exception as exc:  # a responder that raised, a schema the fake cannot satisfy
            error = {"message": f"{type(exc).__name__}: {exc}", "type": "InternalServerError", "code": 500}
            self.send_json(500, {"error": error})


FakeOpenAI.handler = _Handler
