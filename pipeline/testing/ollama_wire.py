"""The fake Ollama server's wire format: routes, status codes, JSON and NDJSON bodies, faults.

Kept apart from FakeOllama (the knobs and counters) so each reads on its own. Shapes follow
the protocol notes: Ollama errors are {"error": "..."}, its OpenAI-compatible ones
{"error": {"message", "type", ...}}; an unknown path is Go's plain-text "404 page not found".
"""

from __future__ import annotations

import json
import re
import socket
import struct
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pipeline.testing.loopback import LoopbackHandler, Received

if TYPE_CHECKING:
    # FakeOllama imports this module: its name is quoted where the handler's base names it.
    from pipeline.testing.fake_ollama import FakeOllama, Fault  # noqa: F401

_INT_OPTIONS = {"seed", "num_ctx", "num_predict", "top_k", "num_keep", "num_batch", "num_gpu", "num_thread"}
_FLOAT_OPTIONS = {"temperature", "top_p", "min_p", "typical_p", "repeat_penalty", "presence_penalty"}
_DETAILS = {
    "parent_model": "",
    "format": "gguf",
    "family": "llama",
    "families": ["llama"],
    "parameter_size": "135M",
    "quantization_level": "Q4_1",
}
_MODIFIED_AT = "2025-01-01T00:00:00Z"


class ContextOverflow(Exception):
    """The request said `truncate: false` and its prompt does not fit num_ctx: Ollama answers 400."""


def full_tag(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def option_type_error(options: dict[str, Any]) -> str | None:
    """Ollama's own check: a JSON number for numeric options (ints may be 42.0), strings for stop."""
    for key, value in options.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if key in _INT_OPTIONS and not number:
            return f'option "{key}" must be of type integer'
        if key in _FLOAT_OPTIONS and not number:
            return f'option "{key}" must be of type float'
        if key == "stop" and not (isinstance(value, list) and all(isinstance(s, str) for s in value)):
            return f'option "{key}" must be of type array'
    return None


class OllamaHandler(LoopbackHandler["FakeOllama"]):
    """Go's server keeps connections alive and sets TCP_NODELAY, as the base does."""

    def serve(self, received: Received, is_json: bool) -> None:
        method, path, body = received.method, received.path, received.body
        fault = self.fake.arrive(received)
        try:
            if fault is None or not self._fault(fault, path, body):
                self._route(method, path, body if is_json else None, not is_json)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its read timeout) before the reply
        except Exception as exc:  # a responder that raised: Ollama would answer 500
            self._error(path, 500, f"{type(exc).__name__}: {exc}")
        finally:
            self.fake.leave()

    def _fault(self, fault: Fault, path: str, body: Any) -> bool:
        """Apply a fault; True when it replaced the reply."""
        if fault.kind == "hang":
            self.fake.pause(fault.seconds)
            return False
        if fault.kind == "reset":
            # Linger 0 makes close() send RST instead of FIN; the close happens once the handler's
            # file objects let go of the socket, before socketserver could shut it down cleanly.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        elif fault.kind == "status":
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            self._error(path, fault.code, fault.message, headers)
        elif fault.kind == "empty_reply":
            self._json(200, {})
        elif fault.kind == "no_content" and path.startswith("/v1/"):
            choice = {"index": 0, "message": {"role": "assistant"}, "finish_reason": "stop"}
            self._json(200, {"object": "chat.completion", "choices": [choice]})
        elif fault.kind == "no_content":
            model = body.get("model", "") if isinstance(body, dict) else ""
            self._json(
                200,
                {"model": model, "created_at": now(), "message": {"role": "assistant"}, "done": True},
            )
        elif fault.kind == "stream_error" and path.startswith("/v1/"):
            self._json(200, {"error": {"message": fault.message, "type": "api_error"}})
        elif fault.kind == "stream_error":
            model = body.get("model", "") if isinstance(body, dict) else ""
            start = {"model": model, "created_at": now(), "message": {"role": "assistant", "content": "Par"}}
            self._ndjson([{**start, "done": False}, {"error": fault.message}])
        self.close_connection = self.close_connection or fault.kind in ("reset", "disconnect")
        return True

    def _route(self, method: str, path: str, body: Any, bad_json: bool) -> None:
        routes = {
            ("GET", "/"): self._root,
            ("GET", "/api/version"): self._version,
            ("GET", "/api/tags"): self._tags,
            ("POST", "/api/show"): self._show,
            ("POST", "/api/chat"): self._chat,
            ("GET", "/v1/models"): self._v1_models,
            ("POST", "/v1/chat/completions"): self._v1_chat,
        }
        handler = routes.get((method, path))
        if handler is None:
            known = any(p == path for _, p in routes)
            code, text = (405, "405 method not allowed") if known else (404, "404 page not found")
            self.send_bytes(code, text.encode(), "text/plain")
        elif bad_json:
            self._error(path, 400, "invalid character in request body: not valid JSON")
        elif method == "POST" and not isinstance(body, dict):
            self._error(path, 400, "missing request body")
        else:
            handler(body if isinstance(body, dict) else {})

    # -- Ollama's native API ---------------------------------------------------------------------
    def _root(self, _: dict[str, Any]) -> None:
        self.send_bytes(200, b"Ollama is running", "text/plain")

    def _version(self, _: dict[str, Any]) -> None:
        self._json(200, {"version": self.fake.version})

    def _tags(self, _: dict[str, Any]) -> None:
        models = [
            {
                "name": name,
                "model": name,
                "modified_at": _MODIFIED_AT,
                "size": 100_000_000,
                "digest": digest,
                "details": _DETAILS,
            }
            for name, digest in self.fake.listed_models().items()
        ]
        self._json(200, {"models": models})

    def _show(self, body: dict[str, Any]) -> None:
        model = str(body.get("model") or body.get("name") or "")
        if not self.fake.knows(model):
            return self._error("/api/show", 404, f"model '{model}' not found")
        self._json(
            200,
            {
                "license": "",
                "modelfile": f'# Modelfile generated by "ollama show"\nFROM {model}\n',
                "parameters": "stop <|im_end|>",
                "template": "{{ .Prompt }}",
                "details": _DETAILS,
                "model_info": {"general.architecture": "llama", "general.parameter_count": 134515008},
                "capabilities": ["completion"],
                "modified_at": _MODIFIED_AT,
            },
        )

    def _chat(self, body: dict[str, Any]) -> None:
        model = str(body.get("model") or "")
        options, messages = body.get("options") or {}, body.get("messages") or []
        if not model:
            return self._error("/api/chat", 400, "model is required")
        if not self.fake.knows(model):
            return self._error("/api/chat", 404, f"model '{model}' not found")
        if not isinstance(options, dict) or not isinstance(messages, list):
            return self._error("/api/chat", 400, "options must be an object and messages a list")
        if (problem := option_type_error(options)) is not None:
            return self._error("/api/chat", 500, problem)
        try:
            gen = self.fake.generate(body, messages, options)
        except ContextOverflow as exc:
            return self._error("/api/chat", 400, str(exc))
        done = {"done": True, "done_reason": gen.done_reason, **gen.metrics}
        if body.get("stream", True) is False:  # absent means stream, as in Ollama
            message = {"role": "assistant", "content": gen.text}
            extra = {} if gen.logprobs is None else {"logprobs": gen.logprobs}
            return self._json(200, {"model": model, "created_at": now(), "message": message, **done, **extra})
        if gen.logprobs is not None:  # one token a chunk, each with its own log-probabilities
            pieces = [entry["token"] for entry in gen.logprobs]
            extras: list[dict[str, Any]] = [{"logprobs": [entry]} for entry in gen.logprobs]
        else:
            pieces = [p for p in re.findall(r"\S*\s*", gen.text) if p]
            extras = [{} for _ in pieces]
        lines: list[dict[str, Any]] = [
            {
                "model": model,
                "created_at": now(),
                "message": {"role": "assistant", "content": p},
                "done": False,
                **extra,
            }
            for p, extra in zip(pieces, extras, strict=True)
        ]
        last = {"model": model, "created_at": now(), "message": {"role": "assistant", "content": ""}}
        self._ndjson([*lines, {**last, **done}])

    # -- Ollama's OpenAI-compatible API ----------------------------------------------------------
    def _v1_models(self, _: dict[str, Any]) -> None:
        data = [
            {"id": n, "object": "model", "created": 1735689600, "owned_by": "library"}
            for n in self.fake.listed_models()
        ]
        self._json(200, {"object": "list", "data": data})

    def _v1_chat(self, body: dict[str, Any]) -> None:
        path, model = "/v1/chat/completions", str(body.get("model") or "")
        if not self.fake.knows(model):
            return self._error(path, 404, f'model "{model}" not found, try pulling it first')
        stop = body.get("stop")
        options: dict[str, Any] = {"temperature": body.get("temperature", 1.0)}  # the API's default
        wanted = {"top_p": body.get("top_p"), "seed": body.get("seed"), "num_predict": body.get("max_tokens")}
        options.update({k: v for k, v in wanted.items() if v is not None})
        if stop is not None:
            options["stop"] = [stop] if isinstance(stop, str) else stop
        if (problem := option_type_error(options)) is not None:
            return self._error(path, 400, problem)
        messages = list(body.get("messages") or [])
        # Ollama turns this into its own chat request; responders see that one shape either way.
        native: dict[str, Any] = {"model": model, "messages": messages, "options": options}
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_object":
            native["format"] = "json"
        elif fmt.get("type") == "json_schema":
            native["format"] = (fmt.get("json_schema") or {}).get("schema")
        gen = self.fake.generate(native, messages, options)
        choice = {"index": 0, "message": {"role": "assistant", "content": gen.text}}
        usage = {"prompt_tokens": gen.prompt_eval_count, "completion_tokens": gen.eval_count}
        self._json(
            200,
            {
                "id": f"chatcmpl-{time.monotonic_ns() % 1000}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_ollama",
                "choices": [{**choice, "finish_reason": gen.done_reason}],
                "usage": {**usage, "total_tokens": gen.prompt_eval_count + gen.eval_count},
            },
        )

    # -- writing ---------------------------------------------------------------------------------
    def _error(self, path: str, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        if path.startswith("/v1/"):
            kind = "api_error" if code >= 500 else "invalid_request_error"
            payload: Any = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        else:
            payload = {"error": message}
        self._json(code, payload, headers)

    def _json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(code, json.dumps(payload).encode(), "application/json; charset=utf-8", headers)

    def _ndjson(self, lines: list[dict[str, Any]]) -> None:
        """One JSON object per line, each in its own HTTP chunk, as Ollama flushes them."""
        if self.server_died():
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in lines:
            data = (json.dumps(line) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
