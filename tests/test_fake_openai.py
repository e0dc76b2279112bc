"""The fake OpenAI-compatible server speaks the protocol as vLLM / llama-server do, over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tenacity import wait_none

from pipeline.errors import ModelNotFoundError, PromptTruncatedError
from pipeline.llm.backends.openai_compat import OpenAICompatBackend
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatRequest, Message, Options
from pipeline.testing.fake_openai import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Rate this."}]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def post(server: FakeOpenAI, **body: Any) -> httpx.Response:
    return httpx.post(
        server.url + "/v1/chat/completions",
        json={"model": "test-model", "messages": MESSAGES} | body,
        timeout=5,
    )


def test_models_and_a_plain_completion(server: FakeOpenAI) -> None:
    models = httpx.get(server.url + "/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == ["test-model"]
    data = post(server, temperature=0).json()
    choice = data["choices"][0]
    assert choice["message"]["content"].startswith("reply ") and choice["finish_reason"] == "stop"
    assert choice["logprobs"] is None and data["usage"]["total_tokens"] > 0


def test_sampling_fields_change_the_reply_unknown_ones_do_not(server: FakeOpenAI) -> None:
    def text(**body: Any) -> str:
        return str(post(server, **body).json()["choices"][0]["message"]["content"])

    assert text(top_k=5) != text(top_k=6)
    assert text(repeat_penalty=1.1) != text()
    assert text(nonsense=True) == text()


def test_json_modes(server: FakeOpenAI) -> None:
    as_object = post(server, response_format={"type": "json_object"}).json()["choices"][0]["message"][
        "content"
    ]
    assert isinstance(json.loads(as_object), dict)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": schema, "strict": True}}
    assert json.loads(post(server, response_format=fmt).json()["choices"][0]["message"]["content"]) == {
        "ok": False
    }


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "r"}}}, "schema"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"top_logprobs": 2}, "requires logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "0 to 20"),
        ({"stream": True}, "stream"),
        ({"temperature": "hot"}, "temperature"),
        ({"messages": []}, "messages"),
    ],
)
def test_bad_requests_are_400s_in_the_apis_shape(
    server: FakeOpenAI, body: dict[str, Any], words: str
) -> None:
    response = post(server, **body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert words in error["message"] and error["code"] == 400


def test_stop_and_max_tokens(server: FakeOpenAI) -> None:
    server.responder = lambda body: "one two three END four"
    assert post(server, stop=["END"]).json()["choices"][0]["message"]["content"] == "one two three "
    cut = post(server, max_tokens=2).json()["choices"][0]
    assert (cut["message"]["content"], cut["finish_reason"]) == ("one two ", "length")


def test_logprobs_are_deterministic(server: FakeOpenAI) -> None:
    first = post(server, logprobs=True, top_logprobs=2).json()["choices"][0]
    assert first == post(server, logprobs=True, top_logprobs=2).json()["choices"][0]
    content = first["logprobs"]["content"]
    assert "".join(e["token"] for e in content) == first["message"]["content"]
    assert all(len(e["top_logprobs"]) == 2 and e["top_logprobs"][0]["token"] == e["token"] for e in content)


def test_the_backend_meets_its_errors(server: FakeOpenAI) -> None:
    def backend(model: str) -> OpenAICompatBackend:
        settings = LLMSettings(backend="openai", base_url=server.url + "/v1", model=model, digest="hf:x")
        return OpenAICompatBackend(settings, wait=wait_none())

    with pytest.raises(ModelNotFoundError):
        backend("ghost").chat(ChatRequest(messages=(Message(role="user", content="x"),)))
    server.max_model_len = 100
    long = ChatRequest(
        messages=(Message(role="user", content="word " * 200),), options=Options(num_predict=10)
    )
    with pytest.raises(PromptTruncatedError, match="context length"):  # recorded unscored by the session
        backend("test-model").chat(long)
