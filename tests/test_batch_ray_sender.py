"""The Ray runner's workers without Ray (pipeline.tools.batch.ray_sender): the stretches of a
requests file cover every line once, and each answer becomes the results line it should (a busy
server asked again, what never answers a failed call, never a made-up reply). The runner on a real
local Ray, end to end, is tests/test_batch.py's."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from pipeline.testing import loopback
from pipeline.testing.fake_openai import FakeOpenAI
from pipeline.tools.batch import ray_sender
from pipeline.tools.batch.ray_sender import RequestSender, _lines, stretches
from pipeline.tools.batch.runners import answer_line, batch_line


def _requests(path: Path, keys: list[str]) -> Path:
    lines = [
        orjson.dumps({"custom_id": k, "method": "POST", "url": "/v1/chat/completions", "body": {"n": i}})
        for i, k in enumerate(keys)
    ]
    lines.insert(2, b"   ")  # a blank line is no request
    lines.insert(4, orjson.dumps({"custom_id": "long", "body": {"pad": "x" * 5000}}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("workers", [1, 3, 50])
def test_the_stretches_cover_every_line_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr(ray_sender, "MIN_STRETCH_BYTES", 40)  # many stretches from a small file
    path = _requests(tmp_path / "requests.jsonl", [f"k{i}" for i in range(30)])
    ranges = stretches(path, workers)
    assert ranges[0][0] == 0 and ranges[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))  # no gap, no overlap
    read = [raw for start, end in ranges for _, raw in _lines(str(path), start, end)]
    assert read == [line + b"\n" for line in path.read_bytes().splitlines() if line.strip()]


def _sender(path: Path, handler: Any) -> RequestSender:
    sender = RequestSender(str(path), "http://test/v1/chat/completions", {}, 4, 2, 0.0, 5.0)
    sender.make_client = lambda: httpx.Client(transport=httpx.MockTransport(handler))  # type: ignore[method-assign]
    return sender


def test_each_answer_becomes_its_results_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    keys = ["busy-once", "always-busy", "not-json", "404", "refused", "fine"]
    _requests(path, keys)
    tries: dict[str, int] = {}
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(request.content)
        key = keys[body["n"]] if "n" in body else "long"
        tries[key] = tries.get(key, 0) + 1
        reply = {"model": "m", "choices": [{"message": {"content": f"answer to {key}"}}]}
        if (key == "busy-once" and tries[key] == 1) or key == "always-busy":
            return httpx.Response(503, json={"error": {"message": "busy"}})
        if key == "not-json":
            return httpx.Response(200, text="<html>proxy</html>")
        if key == "404":
            return httpx.Response(404, json={"detail": "no route"})
        if key == "refused":
            return httpx.Response(400, json={"error": {"message": "prompt too long"}})
        return httpx.Response(200, json=reply)

    rows = [
        {name: column[i] for name, column in block.items()}
        for block in _sender(path, handler)({"start": [0], "end": [path.stat().st_size]})
        for i in range(len(block["custom_id"]))
    ]
    lines = {row["custom_id"]: json.loads(answer_line(row)) for row in rows}
    assert sorted(lines) == sorted([*keys, "long"])  # each request answered once, the blank skipped
    assert tries["busy-once"] == 2 and tries["always-busy"] == 3 and tries["fine"] == 1
    # The body is sent as exported: orjson's bytes of the line's body.
    assert orjson.dumps({"n": 5}) in sent
    fine = {"model": "m", "choices": [{"message": {"content": "answer to fine"}}]}
    assert lines["fine"] == {
        "custom_id": "fine",
        "response": {"status_code": 200, "body": fine},
        "error": None,
    }
    assert answer_line(next(r for r in rows if r["custom_id"] == "fine")) == batch_line("fine", fine)
    assert lines["busy-once"]["response"]["status_code"] == 200
    failed = {key: lines[key]["error"]["message"] for key in ("always-busy", "not-json", "404", "refused")}
    assert all(lines[key]["response"] is None for key in failed)
    assert "no answer after 3 tries (last: HTTP 503)" in failed["always-busy"]
    assert "not JSON" in failed["not-json"] and "HTTP 404" in failed["404"]
    assert failed["refused"] == "prompt too long"  # the server's own words, as batch_line writes them


def test_a_line_that_is_no_request_stops_the_run_naming_where(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b'{"custom_id": "a", "body": {}}\n{"body": {}}\n')
    sender = _sender(path, lambda request: httpx.Response(200, json={"choices": []}))
    with pytest.raises(ValueError, match=r"requests.jsonl: the line at byte 31 is not a batch request"):
        list(sender({"start": [0], "end": [path.stat().st_size]}))


def _loopback_requests(path: Path, calls: int) -> Path:
    lines = [
        orjson.dumps(
            {
                "custom_id": f"k{i}",
                "body": {"model": "test-model", "messages": [{"role": "user", "content": f"q{i}"}]},
            }
        )
        for i in range(calls)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _send_all(path: Path, server: FakeOpenAI, *, timeout: float) -> list[tuple[Any, ...]]:
    """Every request of `path` sent to `server` by one worker (4 at once, none asked again): its
    results rows (custom_id, status, reply, problem), as they come."""
    sender = RequestSender(str(path), server.url + "/v1/chat/completions", {}, 4, 0, 0.0, timeout)
    try:
        return [
            row
            for block in sender({"start": [0], "end": [path.stat().st_size]})
            for row in zip(*block.values(), strict=True)
        ]
    finally:
        sender.close()


def test_a_held_reply_holds_up_no_other_request(tmp_path: Path) -> None:
    """Over real loopback HTTP: one request's reply is held until the server has received every
    other request. The worker must go on sending the rest meanwhile (its answers come as they
    come); in the file's order it waited on the held one with its other connections idle, so the
    server gave up holding (the configured wait below, not a timing assertion) and answered a 500."""
    calls = 200
    path = _loopback_requests(tmp_path / "requests.jsonl", calls)

    def responder(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"] == "q0":
            deadline = time.monotonic() + 20.0
            while server.requests_total < calls:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"held q0 while only {server.requests_total} of {calls} came")
                time.sleep(0.01)
        return "answer"

    with FakeOpenAI(responder=responder) as server:
        rows = _send_all(path, server, timeout=60.0)
    assert sorted(key for key, *_ in rows) == sorted(f"k{i}" for i in range(calls))
    assert {(status, problem) for _, status, _, problem in rows} == {("200", "")}, rows[:3]
    assert server.requests_total == calls  # each sent once: nothing timed out and was asked again


def test_no_thread_closes_the_connection_another_thread_is_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real loopback HTTP, with three pauses a loaded machine gives (or a cyclic GC running
    old senders' finalizers, which lets other threads run): a thread paused between being given a
    kept-alive connection and sending on it, and again between sending and reading the reply; and
    a thread paused inside httpcore's check of an idle connection, between "idle" and "readable?"
    (HTTP11Connection.has_expired, in every thread's pass over the pool). With one client shared by
    the worker's threads, the checking thread found idle the connection another was given, then
    found it readable (that request's reply waiting) and closed it under the request: ReadError,
    EBADF (as in the ray-stall harness: two in 100k calls), or, had the read begun, a wait for the
    read timeout. Each thread has its own client now, whose pool no other thread checks."""
    from httpcore._backends.sync import SyncStream
    from httpcore._sync.connection_pool import ConnectionPool, PoolRequest
    from httpcore._sync.http11 import HTTP11Connection

    readable, given = SyncStream.get_extra_info, PoolRequest.wait_for_connection
    sent, passed = HTTP11Connection._send_request_body, ConnectionPool._assign_requests_to_connections
    first = threading.local()  # the first idle connection a pass checks: paused there

    def paused_pass(self: ConnectionPool) -> Any:
        first.checked = False
        return passed(self)

    def paused_check(self: SyncStream, info: str) -> Any:
        if info == "is_readable" and not getattr(first, "checked", True):
            first.checked = True
            time.sleep(0.3)
        return readable(self, info)

    def paused_start(self: PoolRequest, timeout: float | None = None) -> Any:
        connection = given(self, timeout)
        time.sleep(0.1)
        return connection

    def paused_read(self: HTTP11Connection, request: Any) -> None:
        sent(self, request)
        time.sleep(0.5)

    monkeypatch.setattr(ConnectionPool, "_assign_requests_to_connections", paused_pass)
    monkeypatch.setattr(SyncStream, "get_extra_info", paused_check)
    monkeypatch.setattr(PoolRequest, "wait_for_connection", paused_start)
    monkeypatch.setattr(HTTP11Connection, "_send_request_body", paused_read)
    calls = 24
    path = _loopback_requests(tmp_path / "requests.jsonl", calls)
    with FakeOpenAI(responder=lambda body: "answer") as server:
        rows = _send_all(path, server, timeout=5.0)
    assert [problem for *_, problem in rows if problem] == [] and len(rows) == calls
    assert server.requests_total == calls


def test_the_fake_server_takes_a_runners_connections_at_once() -> None:
    """The Ray runner opens `concurrency` connections at once (32 and more at scale). The fake
    server's listen backlog takes them all before it accepts any: socketserver's default of 5
    dropped the rest's SYNs, a second's wait each, and some were reset (in the 1M bench)."""
    server = loopback._Server(("127.0.0.1", 0), FakeOpenAI.handler)  # listening, accepting none
    port = int(server.server_address[1])
    opened: list[socket.socket] = []
    try:
        for _ in range(64):  # a dropped SYN: the connect times out
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=5.0))
    finally:
        for sock in opened:
            sock.close()
        server.server_close()
    assert len(opened) == 64
