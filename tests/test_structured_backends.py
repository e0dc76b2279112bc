"""Structured output and log-probabilities through the real HTTP backends, over loopback, against the
fake Ollama server and the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field
from tenacity import wait_none

from pipeline.judges.geval import score_distribution
from pipeline.llm.backends.ollama import OllamaBackend, parse_body
from pipeline.llm.backends.openai_compat import OpenAICompatBackend
from pipeline.llm.logprobs import integer_field_span
from pipeline.llm.settings import LLMSettings
from pipeline.llm.structured import Structured, StructuredFailure, ask_structured, schema_for
from pipeline.llm.types import Backend, CallContext, ChatRequest, Message, Options
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.fake_openai import FakeOpenAI
from tests import served

ASK = (Message(role="user", content="Judge the answer: explanation, then a score from 1 to 5."),)
CTX = CallContext(stage="judge", item="901")


class Verdict(BaseModel):
    explanation: str
    score: int = Field(ge=1, le=5)


def free_text(body: dict[str, Any]) -> str:
    """A model that ignores the instructions: the constrained decoder must still give a Verdict."""
    return "The answer is mostly right. Score: 4"


def long_json(body: dict[str, Any]) -> str:
    return json.dumps({"explanation": "because " * 100, "score": 4})


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama(responder=free_text) as fake:
        yield fake


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=free_text) as fake:
        yield fake


def ollama_backend(server: FakeOllama) -> OllamaBackend:
    return OllamaBackend(LLMSettings(base_url=server.url, model="test-model"), wait=wait_none())


def openai_backend(server: FakeOpenAI) -> OpenAICompatBackend:
    settings = LLMSettings(backend="openai", base_url=server.url, model="test-model", digest="hf:test")
    return OpenAICompatBackend(settings, wait=wait_none())


def request(**fields: Any) -> ChatRequest:
    return ChatRequest(messages=ASK, format=schema_for(Verdict), **fields)


# -- Ollama ---------------------------------------------------------------------------------------
def test_ollama_sends_the_schema_and_the_reply_validates(ollama: FakeOllama) -> None:
    reply = ollama_backend(ollama).chat(request())
    assert ollama.received[-1].body["format"] == schema_for(Verdict)
    assert Verdict.model_validate_json(reply.text) == Verdict(explanation=free_text({}), score=1)
    assert reply.done_reason == "stop" and reply.logprobs is None


def test_ollama_num_predict_cuts_the_json(ollama: FakeOllama) -> None:
    ollama.responder = long_json
    reply = ollama_backend(ollama).chat(request(options=Options(num_predict=16)))
    assert reply.done_reason == "length" and reply.text == long_json({})[:64]


def test_ollama_logprobs_are_asked_for_and_read(ollama: FakeOllama) -> None:
    reply = ollama_backend(ollama).chat(request(logprobs=4))
    sent = ollama.received[-1].body
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 4)
    assert reply.logprobs and "".join(t.token for t in reply.logprobs) == reply.text
    assert all(len(t.top) == 4 for t in reply.logprobs)
    span = integer_field_span(reply.text, "score")
    assert span is not None
    dist = score_distribution(reply.logprobs, span[0], range(1, 6))
    assert dist is not None and dist.argmax == 1 and 1.0 < dist.expected < 5.0


def test_a_streamed_reply_keeps_every_chunks_logprobs(ollama: FakeOllama) -> None:
    # A proxy that drops "stream": false; parse_body joins the chunks, log-probabilities included.
    body = ollama_backend(ollama).request_body(request(logprobs=2)) | {"stream": True}
    response = httpx.post(ollama.url + "/api/chat", json=body, timeout=5)
    joined = parse_body(response)
    text = joined["message"]["content"]
    assert len(response.text.splitlines()) > 3 and "".join(e["token"] for e in joined["logprobs"]) == text


def test_an_ollama_older_than_0_12_11_gives_no_logprobs() -> None:
    with FakeOllama(version="0.12.10", responder=free_text) as old:
        reply = ollama_backend(old).chat(request(logprobs=2))
    assert reply.logprobs is None and Verdict.model_validate_json(reply.text)


# -- OpenAI-compatible ----------------------------------------------------------------------------
def test_openai_sends_a_strict_json_schema_and_the_reply_validates(openai: FakeOpenAI) -> None:
    reply = openai_backend(openai).chat(request())
    sent = openai.received[-1].body
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": schema_for(Verdict), "strict": True},
    }
    assert (sent["top_k"], sent["repetition_penalty"], sent["repeat_penalty"]) == (20, 1.0, 1.0)
    assert Verdict.model_validate_json(reply.text).score == 1 and reply.done_reason == "stop"


def test_openai_max_tokens_cuts_the_json(openai: FakeOpenAI) -> None:
    openai.responder = long_json
    reply = openai_backend(openai).chat(request(options=Options(num_predict=16)))
    assert reply.done_reason == "length" and reply.text == long_json({})[:64]


def test_openai_logprobs_are_asked_for_and_read(openai: FakeOpenAI) -> None:
    reply = openai_backend(openai).chat(request(logprobs=3))
    sent = openai.received[-1].body
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 3)
    assert reply.logprobs and "".join(t.token for t in reply.logprobs) == reply.text
    assert "logprobs" not in openai_backend(openai).request_body(request())


# -- ask_structured through a session over each real backend --------------------------------------
@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_ask_structured_over_http(kind: str, ollama: FakeOllama, openai: FakeOpenAI, tmp_path: Path) -> None:
    server: FakeOllama | FakeOpenAI = ollama if kind == "ollama" else openai
    backend: Backend = ollama_backend(ollama) if kind == "ollama" else openai_backend(openai)
    session = served.session(tmp_path, backend)
    result = ask_structured(session, ASK, Verdict, Options(), CTX, logprobs=2)
    assert isinstance(result, Structured) and result.value.score == 1 and result.reply.logprobs
    server.responder = long_json
    cut = ask_structured(
        session, (Message(role="user", content="again"),), Verdict, Options(num_predict=8), CTX
    )
    assert isinstance(cut, StructuredFailure) and cut.kind == "truncated" and cut.attempts == 2
    session.close()
