"""Fuzzing a server's replies as a whole exchange reads them: each HTTP backend (Ollama's, the
OpenAI-compatible one) against a server whose every reply is a valid one with one value replaced by
JSON of any shape (structure-aware: the parsers past the JSON reach what the fields hold). A model
listing (GET /api/tags, /v1/models), a chat reply (its message, usage and logprobs), Ollama's
version, and the OpenAI backend's probe of a schema form. tests/fuzz/test_fuzz_server_replies.py
fuzzes the bytes of one body; this, the shapes in it. The property of tests/fuzz/support.py: a
value (the identity, the reply) or a clear judgeloop error (a failed call, retried and counted),
never another exception's traceback.

Found here: a listing whose `models` or `data` was a string or held a non-object, a chat reply
whose `usage` or `logprobs` was not an object, or whose counts were not integers, and a probe
reply whose `choices` held a non-object, each gave AttributeError's, TypeError's or pydantic's
traceback instead of a failed call."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tenacity import wait_none

from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.backends.openai_compat import PROBE, OpenAICompatBackend
from pipeline.llm.canonical import canonical_json
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from tests.fuzz.support import TOKENS, clear_or_correct, fuzz

MODEL = "test-model"
DIGEST = "sha256:" + "ab" * 32
LOGPROBS = [{"token": "4", "logprob": -0.1, "top_logprobs": [{"token": "4", "logprob": -0.1}]}]
OLLAMA: dict[str, Any] = {
    "/api/tags": {"models": [{"name": f"{MODEL}:latest", "model": f"{MODEL}:latest", "digest": DIGEST}]},
    "/api/version": {"version": "0.12.0"},
    "/api/chat": {
        "model": MODEL,
        "message": {"role": "assistant", "content": "Score: 4"},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 3,
        "eval_count": 2,
        "total_duration": 1000,
        "logprobs": LOGPROBS,
    },
}
OPENAI: dict[str, Any] = {
    "/v1/models": {"object": "list", "data": [{"id": MODEL, "root": "/models/m"}]},
    "/v1/chat/completions": {
        "id": "c1",
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Score: 4"},
                "finish_reason": "stop",
                "logprobs": {"content": LOGPROBS},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    },
}
REQUEST = ChatRequest(messages=[Message(role="user", content="Rate it.")], logprobs=1)

_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(TOKENS[:20])
    | st.sampled_from([65, 300]).map(lambda n: json.loads("[" * n + "]" * n)),  # past the bound
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: the paths of its members, at every depth."""
    found = [at]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _places(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _places(inner, (*at, index))
    return found


def _replaced(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    copy = json.loads(json.dumps(value))
    holder = copy
    for step in at[:-1]:
        holder = holder[step]
    holder[at[-1]] = new
    return copy


@st.composite
def replies(draw: st.DrawFn, valid: dict[str, Any]) -> dict[str, Any]:
    """Each path's valid reply, one or two of them with one value (at any depth) replaced."""
    bodies = dict(valid)
    for path in draw(st.lists(st.sampled_from(sorted(valid)), min_size=1, max_size=2)):
        at = draw(st.sampled_from(_places(bodies[path])))
        bodies[path] = _replaced(bodies[path], at, draw(_ANY_JSON))
    return bodies


def _transport(bodies: dict[str, Any]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(bodies[request.url.path]).encode())

    return httpx.MockTransport(answer)


def _recorded(reply: ChatReply | click.ClickException) -> None:
    """A reply a backend gives is one a recording holds and reads back as it was (a failed call,
    a clear error, is stored nowhere)."""
    if isinstance(reply, click.ClickException):
        return
    assert isinstance(reply, ChatReply)
    record = CallRecord.new(ModelIdentity(backend="openai", name=MODEL, digest=DIGEST), REQUEST, reply)
    with tempfile.TemporaryDirectory() as folder:
        stage = Path(folder) / "judge"
        write_stage(stage, [RecordedCall(record=record, context=CallContext(stage="judge", item="1"))])
        (back,) = [loaded.call.record for loaded in read_stage(stage)]
    assert canonical_json(back.model_dump(mode="json")) == canonical_json(record.model_dump(mode="json"))


def _settings(base_url: str) -> LLMSettings:
    return LLMSettings(base_url=base_url, model=MODEL, max_retries=0)


def _ollama(bodies: dict[str, Any]) -> OllamaBackend:
    """An Ollama backend whose server answers `bodies` (a body by path), never retried."""
    return OllamaBackend(_settings("http://127.0.0.1:11434"), transport=_transport(bodies), wait=wait_none())


def _openai(bodies: dict[str, Any]) -> OpenAICompatBackend:
    """An OpenAI-compatible backend whose server answers `bodies` (a body by path), never retried."""
    return OpenAICompatBackend(
        _settings("http://127.0.0.1:8000"), transport=_transport(bodies), wait=wait_none()
    )


@fuzz
@given(bodies=replies(OLLAMA))
def test_ollama_s_replies_of_any_shape(bodies: dict[str, Any]) -> None:
    backend = _ollama(bodies)
    identity = clear_or_correct(backend.identity)
    if isinstance(identity, ModelIdentity):
        _recorded(clear_or_correct(lambda: backend.chat(REQUEST)))


@fuzz
@given(bodies=replies(OPENAI))
def test_an_openai_compatible_server_s_replies_of_any_shape(bodies: dict[str, Any]) -> None:
    backend = _openai(bodies)
    clear_or_correct(backend.identity)
    _recorded(clear_or_correct(lambda: backend.chat(REQUEST)))
    # The probe of a schema form (made when a server refuses one) reads a completion too.
    assert isinstance(
        clear_or_correct(lambda: backend._enforces("json_schema")), (bool, click.ClickException)
    )


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/tags", {"models": "abc"}),
        ("/api/tags", {"models": [["x"]]}),
        ("/api/chat", {**OLLAMA["/api/chat"], "eval_count": "many"}),
        ("/api/chat", {**OLLAMA["/api/chat"], "done_reason": 5}),
    ],
    ids=["models a string", "a model that is a list", "a count that is text", "a reason that is a number"],
)
def test_an_ollama_reply_of_another_shape_is_a_failed_call(path: str, body: Any) -> None:
    """Found by the property above: each was AttributeError's, or pydantic's, traceback."""
    backend = _ollama({**OLLAMA, path: body})
    with pytest.raises(click.ClickException):
        backend.identity()
        backend.chat(REQUEST)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/models", {"data": "abc"}),
        ("/v1/models", {"data": [5]}),
        ("/v1/chat/completions", {**OPENAI["/v1/chat/completions"], "usage": {"prompt_tokens": "x"}}),
        (
            "/v1/chat/completions",
            {
                "choices": [
                    {"message": {"content": "a"}, "logprobs": {"content": [{"token": 1, "logprob": 0}]}}
                ]
            },
        ),
    ],
    ids=["data a string", "a model that is a number", "a count that is text", "a token that is a number"],
)
def test_an_openai_reply_of_another_shape_is_a_failed_call(path: str, body: Any) -> None:
    """Found by the property above: each was AttributeError's or pydantic's traceback (a token
    that was no text was read as its str(), a wrong value trusted)."""
    backend = _openai({**OPENAI, path: body})
    with pytest.raises(click.ClickException):
        backend.identity()
        backend.chat(REQUEST)


@pytest.mark.parametrize(
    "change",
    [{"usage": [1]}, {"choices": [{"message": {"content": "a"}, "logprobs": [1]}]}],
    ids=["usage", "logprobs"],
)
def test_an_openai_reply_s_usage_or_logprobs_that_are_no_object_hold_nothing(change: dict[str, Any]) -> None:
    """Found by the property above (AttributeError's traceback): read as absent, as when not sent."""
    body = {**OPENAI["/v1/chat/completions"], **change}
    backend = _openai({**OPENAI, "/v1/chat/completions": body})
    reply = backend.chat(REQUEST)
    assert (reply.prompt_tokens, reply.logprobs) == (
        (None, reply.logprobs) if "usage" in change else (3, None)
    )


@pytest.mark.parametrize("choices", ["abc", [5], [{"message": "text"}], {"0": {}}])
def test_a_probe_reply_of_another_shape_says_the_form_is_not_enforced(choices: Any) -> None:
    """Found by the property above: the probe of a schema form read `choices` unchecked."""
    body = {"choices": choices}
    backend = _openai({**OPENAI, "/v1/chat/completions": body})
    assert backend._enforces("json_schema") is False
    assert PROBE.format is not None


def _answering(backend: str, body: dict[str, Any]) -> Any:
    """An ollama or openai backend whose chat endpoint answers `body`, its identity asked."""
    chat: Any = (
        _ollama({**OLLAMA, "/api/chat": body})
        if backend == "ollama"
        else _openai({**OPENAI, "/v1/chat/completions": body})
    )
    chat.identity()
    return chat


_NAN = {"unread": float("nan")}  # JSON orjson refuses: the json module reads the body


@pytest.mark.parametrize(
    ("backend", "body"),
    [
        ("ollama", {**OLLAMA["/api/chat"], "eval_count": 2**70, **_NAN}),
        ("ollama", {**OLLAMA["/api/chat"], "total_duration": -(2**64), **_NAN}),
        ("openai", {**OPENAI["/v1/chat/completions"], "usage": {"prompt_tokens": 2**63}, **_NAN}),
        ("openai", {**OPENAI["/v1/chat/completions"], "created": 10**30, **_NAN}),
    ],
    ids=["an ollama count", "an ollama duration in meta", "an openai count", "an openai created in meta"],
)
def test_a_reply_holding_an_integer_past_64_bits_is_a_failed_call(backend: str, body: dict[str, Any]) -> None:
    """Found by the property above: a body orjson refuses (a NaN in it) is read by the json module,
    which keeps an integer past 64 bits (orjson reads one as a float); the reply was recorded, and
    its recording then failed to read back (a count: "not a recorded call") or was refused as
    tampered (a value of meta: read back as another number, the checksum fails)."""
    chat = _answering(backend, body)
    with pytest.raises(click.ClickException, match="past 64 bits"):
        chat.chat(REQUEST)


def test_an_ollama_reply_of_another_shape_is_asked_again_as_an_empty_one_is() -> None:
    """A failed call of this kind is retried like any protocol error: the next good reply is served."""
    bad = {**OLLAMA["/api/chat"], "eval_count": "many"}
    replies = iter([bad, OLLAMA["/api/chat"]])

    def answer(request: httpx.Request) -> httpx.Response:
        body = next(replies) if request.url.path == "/api/chat" else OLLAMA[request.url.path]
        return httpx.Response(200, content=json.dumps(body).encode())

    settings = LLMSettings(base_url="http://127.0.0.1:11434", model=MODEL, max_retries=1)
    backend = OllamaBackend(settings, transport=httpx.MockTransport(answer), wait=wait_none())
    backend.identity()
    assert backend.chat(REQUEST).completion_tokens == 2


_DEEP = json.loads("[" * 300 + "]" * 300)  # orjson reads it (1,024 levels), a record could not be written


@pytest.mark.parametrize(
    ("backend", "body"),
    [
        ("ollama", {**OLLAMA["/api/chat"], "total_duration": _DEEP}),
        ("openai", {**OPENAI["/v1/chat/completions"], "id": _DEEP}),
    ],
    ids=["ollama", "openai"],
)
def test_a_reply_nested_past_the_bound_is_a_failed_call(backend: str, body: dict[str, Any]) -> None:
    """Found by reading a reply's record back as the properties above do: a value of `meta` nested
    300 levels was served, and making its record failed (pydantic's "Maximum serialization depth
    exceeded", a traceback)."""
    chat = _answering(backend, body)
    with pytest.raises(click.ClickException, match="levels deep"):
        chat.chat(REQUEST)
