"""The fake Ollama server itself: it must behave like the protocol notes say, or every backend test
built on it proves nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pipeline.testing.fake_ollama import DEFAULT_MODELS, FakeOllama, Fault

MODEL = "test-model"
HELLO = [{"role": "user", "content": "Hello there, how are you today?"}]


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def client(server: FakeOllama) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=5) as c:
        yield c


def chat(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/api/chat", json={"model": MODEL, "messages": HELLO, **body})


def ndjson(response: httpx.Response) -> list[dict[str, Any]]:
    lines = response.text.split("\n")
    assert lines[-1] == "", "NDJSON ends with a newline"
    assert all(line.strip() for line in lines[:-1]), "no blank lines"
    return [json.loads(line) for line in lines[:-1]]


def test_non_stream_reply_has_every_field(client: httpx.Client) -> None:
    body = chat(client, stream=False).json()
    assert set(body) >= {
        "model",
        "created_at",
        "message",
        "done",
        "done_reason",
        "total_duration",
        "load_duration",
        "prompt_eval_count",
        "prompt_eval_duration",
        "eval_count",
        "eval_duration",
    }
    assert body["done"] is True and body["done_reason"] == "stop"
    assert body["message"]["role"] == "assistant" and body["message"]["content"]
    assert body["created_at"].endswith("Z") and "T" in body["created_at"]
    assert body["prompt_eval_count"] == len(HELLO[0]["content"]) // 4


def test_stream_is_the_default_and_is_ndjson(client: httpx.Client) -> None:
    streamed = chat(client)
    assert streamed.headers["content-type"] == "application/x-ndjson"
    lines = ndjson(streamed)
    assert len(lines) >= 2
    assert all(line["done"] is False for line in lines[:-1])
    last = lines[-1]
    assert last["done"] is True and last["message"]["content"] == ""
    assert {"done_reason", "eval_count", "prompt_eval_count", "total_duration"} <= set(last)
    whole = chat(client, stream=False).json()["message"]["content"]
    assert "".join(line["message"]["content"] for line in lines) == whole


def test_replies_are_deterministic_and_request_sensitive(client: httpx.Client) -> None:
    first = chat(client, stream=False, options={"seed": 1}).json()["message"]["content"]
    again = chat(client, stream=False, options={"seed": 1}).json()["message"]["content"]
    other = chat(client, stream=False, options={"seed": 2}).json()["message"]["content"]
    assert first == again != other
    # Unknown top-level keys are ignored, so a top-level seed changes nothing.
    ignored = chat(client, stream=False, options={"seed": 1}, seed=99, bogus=True).json()
    assert ignored["message"]["content"] == first
    as_json = chat(client, stream=False, format="json").json()["message"]["content"]
    assert isinstance(json.loads(as_json), dict)


def test_custom_responder_sees_the_request() -> None:
    seen: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> str:
        seen.append(request)
        return "custom " + str(request["messages"][-1]["content"])

    with FakeOllama(responder=responder) as fake:
        reply = httpx.post(fake.url + "/api/chat", json={"model": MODEL, "messages": HELLO, "stream": False})
    assert reply.json()["message"]["content"] == "custom " + HELLO[0]["content"]
    assert seen[0]["model"] == MODEL


def test_silent_truncation_and_num_predict(client: httpx.Client) -> None:
    long = [{"role": "user", "content": "x" * 40_000}]
    cut = chat(client, stream=False, messages=long, options={"num_ctx": 4096}).json()
    assert cut["done"] is True and cut["prompt_eval_count"] == 4096
    old_default = chat(client, stream=False, messages=long).json()
    assert old_default["prompt_eval_count"] == 2048
    short = chat(client, stream=False, options={"num_predict": 1}).json()
    assert short["done_reason"] == "length" and short["eval_count"] == 1


HISTORY = [
    {"role": "system", "content": "s" * 40},
    {"role": "user", "content": "t" * 8_000},  # the transcript: 2000 tokens
    {"role": "assistant", "content": "a" * 40},
    {"role": "user", "content": "r" * 40},
]


def test_history_that_does_not_fit_loses_its_oldest_messages() -> None:
    seen: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> str:
        seen.append(request)
        return "ok"

    with FakeOllama(responder=responder) as fake:
        body = {"model": MODEL, "messages": HISTORY, "options": {"num_ctx": 1024}, "stream": False}
        reply = httpx.post(fake.url + "/api/chat", json=body).json()
    # As chatPrompt does: system messages stay, the last message stays, the oldest others go.
    assert [m["content"][0] for m in seen[0]["messages"]] == ["s", "a", "r"]
    assert reply["prompt_eval_count"] == 120 // 4 and reply["done_reason"] == "stop"


def test_truncate_false_refuses_and_shift_false_stops_at_the_window(client: httpx.Client) -> None:
    refused = chat(client, stream=False, messages=HISTORY, options={"num_ctx": 1024}, truncate=False)
    assert refused.status_code == 400
    assert refused.json() == {"error": "the input length exceeds the context length"}
    fits = chat(client, stream=False, messages=HISTORY, options={"num_ctx": 4096}, truncate=False)
    assert fits.status_code == 200 and fits.json()["prompt_eval_count"] == 8_120 // 4
    # A 30-token prompt with a 1-token room left: the reply ends at the window.
    tight = [{"role": "user", "content": "x" * 4 * 31}]
    stopped = chat(client, stream=False, messages=tight, options={"num_ctx": 32}, shift=False).json()
    assert stopped["done_reason"] == "length" and stopped["eval_count"] == 2
    shifted = chat(client, stream=False, messages=tight, options={"num_ctx": 32}).json()
    assert shifted["done_reason"] == "stop" and shifted["eval_count"] == 5


def test_an_old_version_ignores_truncate_and_shift() -> None:
    with FakeOllama(version="0.12.5") as fake, httpx.Client(base_url=fake.url, timeout=5) as client:
        assert client.get("/api/version").json() == {"version": "0.12.5"}
        refuse = {"truncate": False, "shift": False, "stream": False}
        dropped = chat(client, messages=HISTORY, options={"num_ctx": 1024}, **refuse)
        assert dropped.status_code == 200 and dropped.json()["prompt_eval_count"] == 120 // 4
        tight = [{"role": "user", "content": "x" * 4 * 31}]
        shifted = chat(client, messages=tight, options={"num_ctx": 32}, **refuse).json()
        assert shifted["done_reason"] == "stop" and shifted["eval_count"] == 5


def test_errors_look_like_ollamas(client: httpx.Client) -> None:
    missing = client.post("/api/chat", json={"model": "nope", "messages": HELLO})
    assert missing.status_code == 404 and missing.json() == {"error": "model 'nope' not found"}
    bad = client.post("/api/chat", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "error" in bad.json()
    typed = chat(client, stream=False, options={"seed": "42"})
    assert typed.status_code == 500 and typed.json() == {"error": 'option "seed" must be of type integer'}
    assert chat(client, stream=False, options={"seed": 42.0}).status_code == 200
    unknown = client.get("/api/nothing")
    assert unknown.status_code == 404 and unknown.text == "404 page not found"


def test_tags_show_version(client: httpx.Client) -> None:
    (entry,) = client.get("/api/tags").json()["models"]
    assert entry["name"] == entry["model"] == "test-model:latest"
    assert entry["digest"] == DEFAULT_MODELS["test-model:latest"] and ":" not in entry["digest"]
    assert {"modified_at", "size", "details"} <= set(entry)
    shown = client.post("/api/show", json={"model": MODEL}).json()
    assert "digest" not in shown and {"modelfile", "details", "model_info", "capabilities"} <= set(shown)
    assert client.post("/api/show", json={"model": "nope"}).status_code == 404
    assert "version" in client.get("/api/version").json()


def test_models_param_accepts_prefixed_digests() -> None:
    with FakeOllama(models={"a:1b": "sha256:abc", "b": "def"}) as fake:
        tags = httpx.get(fake.url + "/api/tags").json()["models"]
    assert {(m["name"], m["digest"]) for m in tags} == {("a:1b", "abc"), ("b:latest", "def")}


def test_openai_compatible_endpoints(server: FakeOllama, client: httpx.Client) -> None:
    assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["test-model:latest"]
    reply = client.post("/v1/chat/completions", json={"model": MODEL, "messages": HELLO}).json()
    assert reply["choices"][0]["message"]["content"] and reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["prompt_tokens"] == len(HELLO[0]["content"]) // 4
    missing = client.post("/v1/chat/completions", json={"model": "nope", "messages": HELLO})
    assert missing.status_code == 404 and "not found" in missing.json()["error"]["message"]


def test_openai_temperature_defaults_to_one() -> None:
    seen: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> str:
        seen.append(request)
        return "ok"

    with FakeOllama(responder=responder) as fake:
        httpx.post(fake.url + "/v1/chat/completions", json={"model": MODEL, "messages": HELLO})
    assert seen[0]["options"] == {"temperature": 1.0}


def test_faults_apply_in_order_then_normal_service(server: FakeOllama, client: httpx.Client) -> None:
    server.inject(Fault.status(503), Fault.status(500, "boom"))
    assert server.pending_faults == [Fault.status(503), Fault.status(500, "boom")]
    busy = chat(client, stream=False)
    assert busy.status_code == 503 and "server busy" in busy.json()["error"]
    assert chat(client, stream=False).json() == {"error": "boom"}
    assert chat(client, stream=False).status_code == 200
    server.inject(Fault.status(503))
    v1 = client.post("/v1/chat/completions", json={"model": MODEL, "messages": HELLO})
    assert v1.status_code == 503 and "server busy" in v1.json()["error"]["message"]


def test_stream_error_is_a_200_with_an_error_line(server: FakeOllama, client: httpx.Client) -> None:
    server.inject(Fault.stream_error)
    response = chat(client)
    assert response.status_code == 200
    lines = ndjson(response)
    assert lines[0]["done"] is False and "error" in lines[-1]


def test_reset_and_disconnect_break_the_connection(server: FakeOllama, client: httpx.Client) -> None:
    server.inject(Fault.reset, Fault.disconnect)
    with pytest.raises(httpx.ReadError):
        chat(client, stream=False)
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, stream=False)
    assert chat(client, stream=False).status_code == 200
    assert server.requests_to("/api/chat") == 3


def test_hang_delays_and_close_does_not_wait_for_it(server: FakeOllama) -> None:
    server.inject(Fault.hang(30))
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(server.url + "/api/version", timeout=0.2)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_in_progress_when_the_server_dies_never_arrives(server: FakeOllama, stream: bool) -> None:
    # close() wakes a paused handler so that it can end; it must then write nothing, as a dead
    # process writes nothing (it used to answer in full before its connection was cut).
    server.latency_s = 5.0
    outcome: list[object] = []

    def ask() -> None:
        try:
            with httpx.Client(base_url=server.url, timeout=10) as client:
                outcome.append(chat(client, stream=stream).status_code)
        except httpx.TransportError as exc:
            outcome.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    while server.requests_to("/api/chat") < 1:
        time.sleep(0.01)
    server.close()
    asking.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.TransportError), outcome


def test_parallel_slots_queue_the_rest(server: FakeOllama) -> None:
    server.latency_s, server.parallel_slots = 0.1, 2

    def one() -> None:
        httpx.post(server.url + "/api/chat", json={"model": MODEL, "messages": HELLO, "stream": False})

    started = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Three rounds of two; queued requests count as in flight, as they would for the client.
    assert time.monotonic() - started >= 0.3
    assert server.max_in_flight > 2 and server.requests_total == 6
    server.reset_counters()
    assert server.requests_total == 0 and server.received == []
