"""OpenAI-compatible servers take a JSON Schema for the reply in different forms: the backend finds
the one a server takes at its first refusal, keeps it for the run, and the cache key never depends
on it. Against the fake server playing each dialect; tests/test_llama_cpp_server.py does the same
against llama-cpp-python's real server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from tenacity import wait_none

from pipeline.errors import BadRequestError
from pipeline.llm.backends.openai_compat import SCHEMA_DIALECTS, OpenAICompatBackend
from pipeline.llm.keys import request_key
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatRequest, Message, ModelIdentity
from pipeline.testing.fake_openai import Dialect, FakeOpenAI

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
    "required": ["score"],
    "additionalProperties": False,
}
REQUEST = ChatRequest(messages=(Message(role="user", content="Rate it."),), format=SCHEMA)


@pytest.fixture(params=SCHEMA_DIALECTS)
def server(request: pytest.FixtureRequest) -> Iterator[FakeOpenAI]:
    dialect: Dialect = request.param
    with FakeOpenAI(dialect=dialect, responder=lambda body: '{"score": 4}') as fake:
        yield fake


def backend(server: FakeOpenAI) -> OpenAICompatBackend:
    settings = LLMSettings(backend="openai", base_url=server.url, model="test-model", digest="sha256:pinned")
    return OpenAICompatBackend(settings, wait=wait_none())


def test_the_form_the_server_takes_is_found_once_and_kept(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    b = backend(server)
    for _ in range(3):
        reply = b.chat(REQUEST)
        jsonschema.validate(__import__("json").loads(reply.text), SCHEMA)
    # The API's form first; on its refusal one probe per form until one is enforced, then the call
    # again; every later call goes straight in the kept form.
    sent = {"json_schema": 3, "json_object_schema": 1 + 1 + 3, "guided_json": 1 + 2 + 3}
    assert server.requests_total == sent[server.dialect]
    assert b.dialect == server.dialect
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "refused" in r.getMessage()]
    assert len(warnings) == (server.dialect != "json_schema")


def test_the_cache_key_is_the_same_whatever_the_form(server: FakeOpenAI) -> None:
    b = backend(server)
    b.chat(REQUEST)
    identity = ModelIdentity(backend="openai", name="test-model", digest="sha256:pinned")
    assert b.identity() == identity
    # The key is the request's, never the wire body's: one key for one call, whichever form was sent.
    bodies = [b.request_body(REQUEST, dialect) for dialect in SCHEMA_DIALECTS]
    assert len({str(body) for body in bodies}) == 3
    assert request_key(identity, REQUEST) == request_key(b.identity(), REQUEST)


def test_a_request_without_a_schema_never_changes_the_form() -> None:
    with FakeOpenAI(dialect="json_object_schema") as server:
        b = backend(server)
        b.chat(REQUEST.model_copy(update={"format": "json"}))
        b.chat(REQUEST.model_copy(update={"format": None}))
        assert b.dialect == "json_schema" and server.requests_total == 2


class RefusesEverySchema(FakeOpenAI):
    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        from pipeline.testing.fake_openai import BadRequest

        if "guided_json" in body or "response_format" in body:
            raise BadRequest(400, "response_format / guided_json: structured output is not supported")
        return super().complete(body)


def test_a_server_that_refuses_every_form_is_a_clear_error() -> None:
    with RefusesEverySchema() as server:
        with pytest.raises(
            BadRequestError, match=r"takes a JSON Schema for the reply in none of the forms"
        ) as err:
            backend(server).chat(REQUEST)
        assert "judge.output: text" in err.value.message
        assert server.requests_total == len(SCHEMA_DIALECTS)
