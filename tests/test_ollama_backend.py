"""OllamaBackend against the fake Ollama server over real loopback HTTP."""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from tenacity import RetryCallState, Retrying, wait_none

from pipeline.errors import (
    BadRequestError,
    ConfigError,
    ModelNotFoundError,
    PromptTruncatedError,
    ServerDownError,
    TransientBackendError,
)
from pipeline.llm.backends.context_overflow import TRUNCATION_MARGIN
from pipeline.llm.backends.http_errors import ServerFaultError, default_wait, retry_after
from pipeline.llm.backends.ollama import OllamaBackend, parse_body
from pipeline.llm.settings import LLMSettings, in_flight
from pipeline.llm.types import Backend, ChatRequest, Message, Options
from pipeline.testing.fake_ollama import DEFAULT_MODELS, FakeOllama, Fault

DIGEST = "sha256:" + DEFAULT_MODELS["test-model:latest"]
REQUEST = ChatRequest(
    messages=(Message(role="system", content="Be brief."), Message(role="user", content="Hi"))
)


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def backend(server: FakeOllama | str, **overrides: Any) -> OllamaBackend:
    url = server if isinstance(server, str) else server.url
    fields: dict[str, Any] = {"base_url": url, "model": "test-model", "read_timeout_s": 5.0} | overrides
    return OllamaBackend(LLMSettings(**fields), wait=wait_none())


def test_is_a_backend(server: FakeOllama) -> None:
    b = backend(server, parallelism=3)
    assert isinstance(b, Backend) and b.kind == "ollama" and b.parallelism == 3


def test_request_body_spells_out_every_option(server: FakeOllama) -> None:
    backend(server).chat(REQUEST)
    assert server.received[-1].body == {
        "model": "test-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "options": {
            "temperature": 0.0,
            "seed": 42,
            "num_ctx": 4096,
            "num_predict": 512,
            "top_k": 20,
            "top_p": 0.9,
            "repeat_penalty": 1.0,
        },
        "stream": False,
        "truncate": False,
        "shift": False,
    }


def test_stop_and_format_are_sent_when_set(server: FakeOllama) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}}
    b = backend(server)
    b.chat(REQUEST.model_copy(update={"options": Options(stop=("END",)), "format": "json"}))
    sent = server.received[-1].body
    assert sent["options"]["stop"] == ["END"] and sent["format"] == "json"
    b.chat(REQUEST.model_copy(update={"format": schema}))
    assert server.received[-1].body["format"] == schema


def test_reply_is_parsed(server: FakeOllama) -> None:
    reply = backend(server).chat(REQUEST)
    assert reply.text.startswith("reply ") and reply.done_reason == "stop"
    assert reply.prompt_tokens == len("Be brief.Hi") // 4 and reply.completion_tokens == len(reply.text) // 4
    assert {"model", "created_at", "total_duration", "load_duration", "eval_duration"} <= set(reply.meta)


def test_identity_is_the_tags_digest_and_is_cached(server: FakeOllama) -> None:
    b = backend(server)
    first = b.identity()
    assert (first.backend, first.name, first.digest) == ("ollama", "test-model", DIGEST)
    assert b.identity() is first and server.requests_to("/api/tags") == 1
    assert backend(server, model="test-model:latest").identity().digest == DIGEST


@pytest.mark.parametrize("pin", [DIGEST, DIGEST.removeprefix("sha256:")])
def test_matching_pin_is_accepted_with_or_without_prefix(server: FakeOllama, pin: str) -> None:
    assert backend(server, digest=pin).identity().digest == DIGEST


def test_pin_mismatch_is_a_config_error(server: FakeOllama) -> None:
    with pytest.raises(ConfigError) as err:
        backend(server, digest="sha256:" + "0" * 64).identity()
    assert "changed under the tag" in err.value.message and "ollama pull test-model" in err.value.message
    assert f"llm.digest: {DIGEST}" in err.value.message


def test_identity_of_a_missing_model(server: FakeOllama) -> None:
    with pytest.raises(ModelNotFoundError, match="run: ollama pull ghost"):
        backend(server, model="ghost").identity()


def test_404_is_not_retried_and_says_how_to_pull(server: FakeOllama) -> None:
    with pytest.raises(ModelNotFoundError) as err:
        backend(server, model="ghost").chat(REQUEST)
    assert f"model 'ghost' not found at {server.url} — run: ollama pull ghost" in err.value.message
    assert server.requests_total == 1


def test_400_is_not_retried(server: FakeOllama) -> None:
    server.inject(Fault.status(400, "invalid model name"))
    with pytest.raises(BadRequestError, match="invalid model name"):
        backend(server).chat(REQUEST)
    assert server.requests_total == 1


def test_503_burst_then_success(server: FakeOllama) -> None:
    server.inject(*[Fault.status(503)] * 3)
    assert backend(server).chat(REQUEST).text.startswith("reply ")
    assert server.requests_total == 4


def test_500_has_its_own_smaller_budget(server: FakeOllama) -> None:
    server.inject(*[Fault.status(500)] * 10)
    with pytest.raises(ServerFaultError) as err:
        backend(server, max_retries=5, max_server_errors=2).chat(REQUEST)
    assert server.requests_total == 3
    assert "gave up after 3 attempts" in err.value.message and "max_server_errors=2" in err.value.message


def test_a_few_500s_are_survived(server: FakeOllama) -> None:
    server.inject(Fault.status(500), Fault.status(503), Fault.status(500))
    backend(server, max_server_errors=2).chat(REQUEST)
    assert server.requests_total == 4


@pytest.mark.parametrize("fault", [Fault.reset, Fault.disconnect, Fault.stream_error])
def test_broken_replies_are_retried(server: FakeOllama, fault: Fault) -> None:
    server.inject(fault, fault)
    assert backend(server).chat(REQUEST).text.startswith("reply ")
    assert server.requests_total == 3


def test_read_timeout_is_retried_then_reported(server: FakeOllama) -> None:
    server.inject(*[Fault.hang(30)] * 5)
    with pytest.raises(ServerDownError) as err:
        backend(server, read_timeout_s=0.15, max_retries=5, max_server_errors=2).chat(REQUEST)
    assert server.requests_total == 3  # a read timeout has the smaller budget of a 500
    message = err.value.message
    assert "no reply within 0.15s" in message and "llm.read_timeout_s" in message
    assert "gave up after 3 attempts (llm.max_retries=5, llm.max_server_errors=2)" in message
    assert f"the server at {server.url} is stuck" in message


def test_connection_refused_is_transient() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerDownError, match=r"is down: .*cannot connect.*gave up after 2 attempts"):
        backend(f"http://127.0.0.1:{port}", max_retries=1).chat(REQUEST)


def test_unusable_base_url_is_refused_with_the_params() -> None:
    # An ftp:// URL stops at params.yaml (tests/test_params_validation.py has the message and line);
    # one that gets past the params anyway is a ConfigError at the first call.
    with pytest.raises(ValidationError, match="not an http"):
        LLMSettings(base_url="ftp://example.invalid")
    settings = LLMSettings(model="test-model").model_copy(update={"base_url": "ftp://example.invalid"})
    with pytest.raises(ConfigError, match=r"llm\.base_url"):
        OllamaBackend(settings, wait=wait_none()).chat(REQUEST)


def reask(transcript_chars: int) -> ChatRequest:
    """A judge re-ask: the transcript prompt, the unreadable reply, the format reminder."""
    return ChatRequest(
        messages=(
            Message(role="system", content="You are a careful judge."),
            Message(role="user", content="Rate this transcript. " + "w" * transcript_chars),
            Message(role="assistant", content="It is hard to say."),
            Message(role="user", content="Answer with 'Score: N'."),
        ),
        options=Options(num_ctx=2048),
    )


def test_an_overlong_prompt_is_refused_and_not_retried(server: FakeOllama) -> None:
    long = ChatRequest(messages=(Message(role="user", content="x" * 40_000),), options=Options(num_ctx=2048))
    with pytest.raises(PromptTruncatedError) as err:
        backend(server).chat(long)
    message = err.value.message
    assert "does not fit the context window (num_ctx=2048)" in message
    assert "the input length exceeds the context length" in message
    assert "llm.options.num_ctx in params.yaml" in message and server.requests_total == 1


def test_a_reask_whose_history_does_not_fit_is_refused(server: FakeOllama) -> None:
    # Left to its defaults, Ollama would drop the transcript and judge the reminder alone.
    with pytest.raises(PromptTruncatedError, match=r"num_ctx=2048.*raise llm\.options\.num_ctx"):
        backend(server).chat(reask(20_000))
    assert server.requests_to("/api/chat") == 1 and server.received[-1].body["truncate"] is False


def test_llama_servers_refusal_is_recognised_too() -> None:
    # Newer Ollama releases pass llama-server's error through as a string (status 400).
    said = {
        "error": {
            "code": 400,
            "message": "request (2622 tokens) exceeds the available context size "
            "(512 tokens), try increasing it",
            "type": "exceed_context_size_error",
        }
    }
    with FakeOllama() as server:
        server.inject(Fault.status(400, json.dumps(said)))
        with pytest.raises(PromptTruncatedError, match="exceed_context_size_error"):
            backend(server).chat(REQUEST)
        assert server.requests_total == 1


def test_an_old_server_cuts_a_long_prompt_and_the_count_shows_it() -> None:
    long = ChatRequest(messages=(Message(role="user", content="x" * 40_000),), options=Options(num_ctx=2048))
    with FakeOllama(version="0.12.5") as server, pytest.raises(PromptTruncatedError) as err:
        backend(server).chat(long)
    assert "num_ctx=2048" in err.value.message and "prompt_eval_count=2048" in err.value.message
    assert "llm.options.num_ctx" in err.value.message


@pytest.mark.parametrize("version", ["0.12.5", "0.2.0", "0.0.0"])
def test_an_old_server_that_dropped_the_transcript_is_caught(
    version: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        FakeOllama(version=version) as server,
        caplog.at_level(logging.WARNING, "pipeline.llm.backends.ollama"),
    ):
        b = backend(server)
        for _ in range(2):
            with pytest.raises(PromptTruncatedError) as err:
                b.chat(reask(20_000))
            assert "dropped the earliest messages to fit num_ctx=2048" in err.value.message
            assert "llm.options.num_ctx" in err.value.message
        assert server.requests_to("/api/version") == 1
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "predate" in warning and "upgrade Ollama to 0.12.6" in warning


def test_a_server_too_old_to_count_cached_tokens_only_gets_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before 0.2 a re-ask's cached prefix left prompt_eval_count small: the heuristic would misfire.
    with (
        FakeOllama(version="0.1.32") as server,
        caplog.at_level(logging.WARNING, "pipeline.llm.backends.ollama"),
    ):
        assert backend(server).chat(reask(20_000)).text
    assert "cannot be detected" in caplog.text


@pytest.mark.parametrize("version", ["0.12.6", "0.12.5", "0.1.32"])
def test_calls_that_fit_are_not_flagged(version: str, caplog: pytest.LogCaptureFixture) -> None:
    with FakeOllama(version=version) as server:
        b = backend(server)
        assert b.chat(REQUEST).text and server.requests_to("/api/version") == 0  # nothing to drop: not asked
        fits = reask(5_000)  # ~1260 tokens of 2048: the whole history is kept
        reply = b.chat(fits)
        assert reply.prompt_tokens == sum(len(m.content) for m in fits.messages) // 4
    new = version == "0.12.6"
    assert ("predates" in caplog.text) != new


def test_an_old_server_that_shifted_the_prompt_out_is_caught() -> None:
    long_reply = ChatRequest(
        messages=(Message(role="user", content="x" * 1_900 * 4),), options=Options(num_ctx=2048)
    )
    shifted = r"eval_count=500, num_ctx=2048.*shifted"
    with (
        FakeOllama(version="0.12.5", responder=lambda _: "word " * 400) as old,
        pytest.raises(PromptTruncatedError, match=shifted),
    ):
        backend(old).chat(long_reply)
    # A server that honours shift: false stops at the window's end instead, and says so.
    with FakeOllama(responder=lambda _: "word " * 400) as new:
        reply = backend(new).chat(long_reply)
    assert reply.done_reason == "length" and reply.completion_tokens == 2048 - 1_900 + 1


def test_prompt_just_under_the_margin_is_fine(server: FakeOllama) -> None:
    tokens = 2048 - TRUNCATION_MARGIN - 1
    fits = ChatRequest(
        messages=(Message(role="user", content="x" * tokens * 4),), options=Options(num_ctx=2048)
    )
    assert backend(server).chat(fits).prompt_tokens == tokens


def test_in_flight_requests_are_bounded_by_slots_and_a_queue(server: FakeOllama) -> None:
    server.latency_s = 0.05
    b = backend(server, parallelism=4)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(2):
                b.chat(REQUEST)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and server.requests_total == 32
    # The bound is the point: the server's 4 slots and as many waiting in its queue, so that a slot
    # that frees up starts the next request at once. Passing 4 shows the queue is really used.
    assert 4 < server.max_in_flight <= in_flight(4) == 8


def test_the_wait_strategy_is_injectable(server: FakeOllama) -> None:
    waits: list[int] = []

    def record(state: RetryCallState) -> float:
        waits.append(state.attempt_number)
        return 0.0

    server.inject(Fault.status(503), Fault.status(503))
    settings = LLMSettings(base_url=server.url, model="test-model")
    OllamaBackend(settings, wait=record).chat(REQUEST)
    assert waits == [1, 2]


def test_default_wait_is_jittered_and_capped() -> None:
    wait = default_wait()
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = 50
    assert all(0 <= wait(state) <= 30 for _ in range(20))


def test_streamed_body_is_parsed_too(server: FakeOllama) -> None:
    # A proxy that drops "stream": false would hand us NDJSON; the backend reads it all the same.
    body = {"model": "test-model", "messages": [{"role": "user", "content": "Hi"}]}
    streamed = httpx.post(server.url + "/api/chat", json=body)
    whole = httpx.post(server.url + "/api/chat", json={**body, "stream": False})
    parsed = parse_body(streamed)
    assert parsed["message"]["content"] == whole.json()["message"]["content"]
    assert parsed["done"] is True and parsed["eval_count"] == whole.json()["eval_count"]


def test_close_releases_connections(server: FakeOllama) -> None:
    b = backend(server)
    b.chat(REQUEST)
    b.close()
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("7", 7.0), ("0.5", 0.5), ("-3", 0.0), ("100000", 120.0), ("soon", None), ("", None), (None, None)],
)
def test_retry_after_reads_seconds_and_caps_them(header: str | None, seconds: float | None) -> None:
    assert retry_after(header) == seconds


def test_retry_after_reads_an_http_date() -> None:
    in_ten = format_datetime(datetime.now(UTC) + timedelta(seconds=10), usegmt=True)
    delay = retry_after(in_ten)
    assert delay is not None and 5 <= delay <= 10
    assert retry_after(format_datetime(datetime(2000, 1, 1, tzinfo=UTC), usegmt=True)) == 0.0


def test_the_servers_retry_after_is_a_floor_for_the_wait(server: FakeOllama) -> None:
    slept: list[float] = []
    server.inject(Fault.status(429, retry_after="3"), Fault.status(503))
    backend = OllamaBackend(LLMSettings(base_url=server.url, model="test-model"), wait=wait_none())
    backend._retry = dataclasses.replace(backend._retry, sleep=slept.append)
    assert backend.chat(REQUEST).text
    assert slept == [3.0, 0.0]  # the 429 asked for 3 s; the 503 said nothing, so our own backoff (none)


def test_a_rate_limit_that_outlasts_the_budget_says_what_the_server_asked(server: FakeOllama) -> None:
    server.inject(Fault.status(429, retry_after="1"))
    backend = OllamaBackend(LLMSettings(base_url=server.url, model="test-model", max_retries=0))
    with pytest.raises(TransientBackendError, match=r"HTTP 429.*Retry-After: 1s.*gave up after 1 attempt"):
        backend.chat(REQUEST)
