"""Fuzzing the Ray batch runner's reading of a server's reply (pipeline.tools.batch.runners
.answer_line): a worker's (status, reply text, problem) becomes one line of the results file, which
ingest then reads. A server is someone else's: whatever it answers must become a results line (the
reply, or a failed call naming why), never a traceback that ends the whole run and loses every
answer already written. Inputs: arbitrary text, a valid reply with a value replaced by JSON of any
shape, and bodies past the parsers' limits (nesting, integers past 64 bits).

Found here: a reply nested past the json module's depth (RecursionError), and a reply that the json
module reads but orjson cannot write back (an integer past 64 bits, nesting past orjson's 255
levels: orjson.JSONEncodeError), each ended the run with a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.tools.batch import ray_sender
from pipeline.tools.batch.runners import answer_line
from tests.fuzz.support import fuzz, inputs, mixed_texts, time_bound
from tests.fuzz.test_fuzz_backend_replies import _ANY_JSON, OPENAI, _places, _replaced

_VALID: dict[str, Any] = OPENAI["/v1/chat/completions"]


@st.composite
def _bodies(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["text", "shape", "deep", "huge"]))
    if kind == "text":
        return draw(mixed_texts)
    if kind == "shape":
        return json.dumps(_replaced(_VALID, draw(st.sampled_from(_places(_VALID))), draw(_ANY_JSON)))
    if kind == "deep":
        depth = draw(st.sampled_from([200, 300, 2_000, 100_000]))
        return "[" * depth + "]" * depth
    return json.dumps({**_VALID, "usage": {"prompt_tokens": draw(st.integers(2**64, 2**200))}})


def _checked(row: dict[str, Any]) -> None:
    with time_bound():
        line = answer_line(row)
    entry = orjson.loads(line)
    assert line.endswith("\n") and line.count("\n") == 1
    assert isinstance(entry, dict) and entry["custom_id"] == row["custom_id"]
    assert (entry["response"] is None) != (entry["error"] is None)


@fuzz
@given(
    reply=_bodies(),
    status=st.sampled_from(["200", "400", "500", "", "abc"]),
    problem=st.sampled_from(["", "x"]),
)
def test_any_reply_becomes_one_results_line(reply: str, status: str, problem: str) -> None:
    _checked({"custom_id": "call-1", "status": status, "reply": reply, "problem": problem})


@pytest.mark.parametrize(
    "reply",
    [
        "[" * 100_000 + "]" * 100_000,
        "[" * 300 + "]" * 300,
        json.dumps({**_VALID, "usage": {"prompt_tokens": 2**70}}),
    ],
    ids=["nested past the json module's depth", "nested past orjson's", "an integer past 64 bits"],
)
def test_a_reply_the_results_file_cannot_hold_is_a_failed_call(reply: str) -> None:
    """Found by the property above: each gave a traceback that ended the run."""
    _checked({"custom_id": "call-1", "status": "200", "reply": reply, "problem": ""})
    assert orjson.loads(answer_line({"custom_id": "c", "status": "200", "reply": reply, "problem": ""}))[
        "error"
    ]


@fuzz
@given(
    data=inputs(b'{"custom_id": "a", "body": {}}\n{"custom_id": "b", "body": {}}\n', b"\n\n\r\n \n"),
    workers=st.integers(1, 64),
    target=st.integers(1, 64),
)
def test_the_ray_runner_s_stretches_read_every_line_of_a_requests_file_once(
    sandbox: Path, data: bytes, workers: int, target: int
) -> None:
    """pipeline.tools.batch.ray_sender: the workers' stretches of requests.jsonl (of any bytes: a
    line cut anywhere, CR, no last newline) cover the file, and read together they give each line
    that is not blank once, in order: a line lost is a call never asked, one read twice asked twice."""
    path = sandbox / "requests.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:  # small stretches, so that a file of a few lines has many
        patch.setattr(ray_sender, "MIN_STRETCH_BYTES", target)
        patch.setattr(ray_sender, "MAX_STRETCH_BYTES", target)
        with time_bound():
            ranges = ray_sender.stretches(path, workers)
            read = [line for start, end in ranges for _, line in ray_sender._lines(str(path), start, end)]
    assert [start for start, _ in ranges[1:]] == [end for _, end in ranges[:-1]]
    assert (ranges[0][0], ranges[-1][1]) == (0, len(data)) if data else ranges == []
    parts = data.split(b"\n")  # a binary file's readline cuts at \n alone
    lines = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    assert read == [line for line in lines if line.strip()]


_REQUEST_LINE = (
    b'{"custom_id": "call-1", "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}'
)


@fuzz
@given(line=inputs(_REQUEST_LINE))
def test_a_ray_worker_reads_any_requests_line_as_a_request_or_names_its_byte(
    sandbox: Path, line: bytes
) -> None:
    """RequestSender._send, a worker's reading of one requests.jsonl line: a request sent (its
    custom_id a string, its body as exported), or a ValueError naming the file and the line's byte,
    which Ray gives back as the runner's BackendError; never another exception ending the worker."""
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    sender = ray_sender.RequestSender(
        str(sandbox / "requests.jsonl"), "http://test/v1/chat/completions", {}, 1, 0, 0.0, 5.0
    )
    sender.make_client = lambda: httpx.Client(transport=httpx.MockTransport(handler))  # type: ignore[method-assign]
    try:
        with time_bound():
            key, status, _, _ = sender._send(7, line)
        assert isinstance(key, str) and status == "200" and len(sent) == 1
    except ValueError as exc:
        assert "requests.jsonl: the line at byte 7 is not a batch request" in str(exc)
    finally:
        sender.close()
        sender.pool.shutdown(wait=False)


def test_a_requests_line_nested_past_what_orjson_writes_names_its_byte(sandbox: Path) -> None:
    """Found by the property above: orjson reads 1,024 levels and writes 255, so a body nested
    between was read, then its writing raised JSONEncodeError (a TypeError) naming no file nor line."""
    line = b'{"custom_id": "a", "body": ' + b"[" * 300 + b"]" * 300 + b"}"
    sender = ray_sender.RequestSender(str(sandbox / "requests.jsonl"), "http://test/v1", {}, 1, 0, 0.0, 5.0)
    try:
        with pytest.raises(ValueError, match=r"requests\.jsonl: the line at byte 7 is not a batch request"):
            sender._send(7, line)
    finally:
        sender.pool.shutdown(wait=False)
