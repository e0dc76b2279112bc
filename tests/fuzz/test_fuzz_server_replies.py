"""Fuzzing a server's reply body as the HTTP backends read it (pipeline.llm.backends: json_body, which
both read a 200 with; Ollama's parse_body, which also reads a reply a proxy streamed as NDJSON;
error_text, which reads a refusal's words). A server is someone else's: any bytes must give a value
or a clear judgeloop error (a failed call, retried and counted), never another traceback. Seeds: the
replies the protocol-faithful fakes give, one whole and one streamed.

Found here: a reply nested past orjson's 1,024 levels was read again by the json module, whose
RecursionError (not a ValueError) left every reader as a traceback; and a streamed reply was cut
where str.splitlines() cuts, so a chunk whose text held U+0085, U+2028 or U+2029 as it is (JSON
escapes neither) was "not JSON", and the call failed."""

from __future__ import annotations

import contextlib
import json

import click
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm.backends.http_errors import error_text, json_body
from pipeline.llm.backends.ollama import parse_body
from tests.fuzz.support import fuzz, inputs

_REQUEST = httpx.Request("POST", "http://127.0.0.1:11434/api/chat")
_WHOLE = json.dumps(
    {
        "model": "m",
        "message": {"role": "assistant", "content": "Score: 4"},
        "done": True,
        "eval_count": 3,
        "total_duration": 1000,
    }
).encode()
_STREAMED = b"\n".join(
    json.dumps({"message": {"role": "assistant", "content": part}, "done": part == "4"}).encode()
    for part in ("Score", ": ", "4")
)


def _response(body: bytes, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=body, request=_REQUEST)


@fuzz
@given(body=inputs(_WHOLE, _STREAMED))
def test_a_reply_body_as_each_backend_reads_it(body: bytes) -> None:
    with contextlib.suppress(click.ClickException):  # a failed call, retried and counted
        parse_body(_response(body))
    with contextlib.suppress(ValueError):  # what both backends take for "not JSON": a failed call
        json_body(_response(body))
    assert isinstance(error_text(_response(body, 400)), str)


@pytest.mark.parametrize("opened", ["[", '{"a":'])
def test_a_reply_nested_past_the_parsers_depth_is_a_failed_call_not_a_traceback(opened: str) -> None:
    body = (opened * 200_000).encode()
    body += b"]" * 200_000 if opened == "[" else b"1" + b"}" * 200_000
    with pytest.raises(click.ClickException, match="not JSON"):
        parse_body(_response(body))
    with pytest.raises(ValueError):
        json_body(_response(body))
    assert isinstance(error_text(_response(body, 400)), str)


@fuzz
@given(
    parts=st.lists(
        st.text(max_size=8) | st.sampled_from(["\x85", "\u2028", "\u2029", "\r", "\x1c"]), min_size=1
    )
)
def test_a_streamed_reply_is_read_back_whole_whatever_its_text_holds(parts: list[str]) -> None:
    for escaped in (True, False):  # Ollama (Go) escapes U+2028 and U+2029, not U+0085; a proxy may not
        chunks = [
            json.dumps(
                {"message": {"role": "assistant", "content": part}, "done": i == len(parts) - 1},
                ensure_ascii=escaped,
            )
            for i, part in enumerate(parts)
        ]
        body = ("\n".join(chunks) + "\n").encode("utf-8")
        assert parse_body(_response(body))["message"]["content"] == "".join(parts)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_MESSAGE = st.fixed_dictionaries({}, optional={"role": _JSON, "content": _JSON})
_CHUNK = st.fixed_dictionaries(
    {},
    optional={"message": _MESSAGE | _JSON, "done": st.booleans() | _JSON, "logprobs": _JSON, "error": _JSON},
)


@fuzz
@given(chunks=st.lists(_CHUNK, min_size=1, max_size=3), last=_CHUNK)
def test_a_streamed_reply_of_any_json_chunks(
    chunks: list[dict[str, object]], last: dict[str, object]
) -> None:
    body = "\n".join(json.dumps(chunk) for chunk in [*chunks, {**last, "done": True}]).encode()
    with contextlib.suppress(click.ClickException):
        parse_body(_response(body))


@pytest.mark.parametrize(
    "chunk",
    [{"message": "text"}, {"message": ["text"]}, {"message": {"content": "a"}, "logprobs": 5}],
    ids=["a message that is a string", "a message that is a list", "logprobs that are a number"],
)
def test_a_streamed_chunk_of_another_shape_is_a_failed_call(chunk: dict[str, object]) -> None:
    """Found by the property above: a streamed chunk whose message was not an object gave
    AttributeError's traceback, and one whose logprobs were a number TypeError's."""
    body = (json.dumps(chunk) + "\n" + json.dumps({"done": True})).encode()
    with pytest.raises(click.ClickException, match="api/chat"):
        parse_body(_response(body))
