"""OpenAICompatBackend against the fake server's OpenAI-compatible endpoints, over loopback HTTP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tenacity import wait_none

from pipeline.errors import BadRequestError, ModelNotFoundError, PromptTruncatedError, TransientBackendError
from pipeline.llm.backends.openai_compat import OpenAICompatBackend, api_root
from pipeline.llm.settings import LLMSettings, in_flight
from pipeline.llm.types import Backend, ChatRequest, Message, Options
from pipeline.testing.fake_ollama import FakeOllama, Fault

REQUEST = ChatRequest(messages=(Message(role="user", content="Rate this answer."),))
VLLM_TOO_LONG = (
    "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens "
    "(4488 in the messages, 512 in the completion). Please reduce the length of the messages or completion."
)


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def backend(server: FakeOllama, **overrides: Any) -> OpenAICompatBackend:
    fields: dict[str, Any] = {
        "backend": "openai",
        "base_url": server.url,
        "model": "test-model",
        "api_key_env": "JL_TEST_OPENAI_KEY",
    } | overrides
    return OpenAICompatBackend(LLMSettings(**fields), wait=wait_none())


def test_is_a_backend(server: FakeOllama) -> None:
    b = backend(server, parallelism=2)
    assert isinstance(b, Backend) and b.kind == "openai" and b.parallelism == 2


def test_request_body(server: FakeOllama) -> None:
    backend(server).chat(REQUEST)
    assert server.received[-1].body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "Rate this answer."}],
        "temperature": 0.0,
        "top_p": 0.9,
        "seed": 42,
        "top_k": 20,
        "repetition_penalty": 1.0,  # vLLM's name
        "repeat_penalty": 1.0,  # llama-server's
        "max_tokens": 512,
        "stream": False,
    }


def test_top_k_and_repeat_penalty_are_sent(server: FakeOllama) -> None:
    backend(server).chat(REQUEST.model_copy(update={"options": Options(top_k=7, repeat_penalty=1.3)}))
    sent = server.received[-1].body
    assert (sent["top_k"], sent["repetition_penalty"], sent["repeat_penalty"]) == (7, 1.3, 1.3)


def test_stop_formats_and_unlimited_tokens(server: FakeOllama) -> None:
    b = backend(server)
    b.chat(REQUEST.model_copy(update={"options": Options(stop=("END",), num_predict=-1), "format": "json"}))
    sent = server.received[-1].body
    assert sent["stop"] == ["END"] and sent["response_format"] == {"type": "json_object"}
    assert "max_tokens" not in sent
    schema = {"type": "object"}
    b.chat(REQUEST.model_copy(update={"format": schema}))
    assert server.received[-1].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": schema, "strict": True},
    }


def test_reply_is_parsed(server: FakeOllama) -> None:
    reply = backend(server).chat(REQUEST)
    assert reply.text.startswith("reply ") and reply.done_reason == "stop"
    assert reply.prompt_tokens == len("Rate this answer.") // 4 and reply.completion_tokens
    assert reply.meta["model"] == "test-model"


def test_base_url_may_end_in_v1(server: FakeOllama) -> None:
    assert api_root("http://h:8000/v1/") == "http://h:8000"
    assert backend(server, base_url=server.url + "/v1").chat(REQUEST).text


def test_identity_unpinned_uses_the_model_id_and_warns(
    server: FakeOllama, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline.llm.backends.openai_compat"):
        ident = backend(server).identity()
    assert (ident.backend, ident.name, ident.digest) == ("openai", "test-model", "name:test-model:latest")
    assert "Pin llm.digest" in caplog.text


def test_identity_pinned(server: FakeOllama, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert backend(server, digest="hf:abc123").identity().digest == "hf:abc123"
    assert caplog.text == ""


def test_identity_of_a_missing_model(server: FakeOllama) -> None:
    with pytest.raises(ModelNotFoundError, match="GET /v1/models"):
        backend(server, model="ghost").identity()


def test_404_is_not_retried(server: FakeOllama) -> None:
    with pytest.raises(ModelNotFoundError, match="'ghost' not found"):
        backend(server, model="ghost").chat(REQUEST)
    assert server.requests_total == 1


def test_overlong_prompt_is_a_bad_request_about_context_length(server: FakeOllama) -> None:
    server.inject(Fault.status(400, VLLM_TOO_LONG))
    with pytest.raises(PromptTruncatedError, match=r"context length.*--max-model-len"):
        backend(server).chat(REQUEST)
    assert server.requests_total == 1


def test_other_400s_keep_the_servers_words(server: FakeOllama) -> None:
    server.inject(Fault.status(400, "messages: field required"))
    with pytest.raises(BadRequestError, match="messages: field required"):
        backend(server).chat(REQUEST)


def test_503_burst_then_success(server: FakeOllama) -> None:
    server.inject(*[Fault.status(503)] * 3)
    assert backend(server).chat(REQUEST).text
    assert server.requests_total == 4


def test_500_is_bounded(server: FakeOllama) -> None:
    server.inject(*[Fault.status(500)] * 10)
    with pytest.raises(TransientBackendError, match="gave up after 2 attempts"):
        backend(server, max_server_errors=1).chat(REQUEST)
    assert server.requests_total == 2


@pytest.mark.parametrize("fault", [Fault.reset, Fault.stream_error])
def test_broken_replies_are_retried(server: FakeOllama, fault: Fault) -> None:
    server.inject(fault)
    assert backend(server).chat(REQUEST).text
    assert server.requests_total == 2


def test_bearer_token_from_the_named_variable(server: FakeOllama, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JL_TEST_OPENAI_KEY", "sk-test")
    backend(server).chat(REQUEST)
    assert server.received[-1].headers["authorization"] == "Bearer sk-test"


def test_no_token_no_header(server: FakeOllama, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JL_TEST_OPENAI_KEY", raising=False)
    backend(server).chat(REQUEST)
    assert "authorization" not in {k.lower() for k in server.received[-1].headers}


def test_in_flight_requests_are_bounded(server: FakeOllama) -> None:
    server.latency_s = 0.05
    b = backend(server, parallelism=3)
    threads = [threading.Thread(target=b.chat, args=(REQUEST,)) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.requests_total == 12 and 3 < server.max_in_flight <= in_flight(3) == 6
