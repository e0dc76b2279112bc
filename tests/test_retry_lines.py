"""What a user sees on stderr while a server fails: one line per server per fault, then one line
when it ends (pipeline.llm.backends.retry_notices), not a line per retry of every call.

Run as the user runs it: `judgeloop judge-evaluate` in a child process, its stderr as a terminal
would get it, against the fake Ollama over loopback HTTP (a dead port, a burst of 503s, a server
whose fault changes); the lines are counted. Behaviour only: no time is asserted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.errors import ConnectionFaultError, TransientBackendError
from pipeline.llm.backends.retry_notices import RetryNotices
from pipeline.testing.fake_ollama import FakeOllama, Fault
from pipeline.testing.structured_responder import structured_ollama_responder

ROOT = Path(__file__).resolve().parent.parent
ROWS = 12
SLOTS = 4  # eight calls in flight, each retrying on its own


def project(root: Path, base_url: str, **llm: Any) -> None:
    settings = {
        "backend": "ollama",
        "model": "test-model",
        "base_url": base_url,
        "parallelism": SLOTS,
        "max_retries": 3,
        "max_server_errors": 2,
        "read_timeout_s": 2.0,
        "connect_timeout_s": 0.3,
        **llm,
    }
    params = {"llm": settings, "cache": {"dir": "cache"}, "rag": {"logprobs": None}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    rows = (
        json.dumps({"id": f"r{i:02d}", "question": f"Q {i}?", "answer": f"A {i}.", "contexts": [f"F {i}."]})
        for i in range(ROWS)
    )
    (root / "rows.jsonl").write_text("".join(row + "\n" for row in rows))


def judge_evaluate(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"]
    return subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def retry_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "retrying" in line or "answering again" in line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_server_gives_one_retry_line_then_the_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    project(tmp_path, url)
    done = judge_evaluate(tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    # Before: a line per retry (3 here, one per retry of every call without the breaker).
    [retrying] = retry_lines(done.stderr)
    assert retrying.startswith(f"server {url}: cannot connect")
    assert "Connection refused" in retrying and "(attempt 2 of 4)" in retrying
    assert "further retries of this fault are counted, not shown" in retrying
    assert lines[-1].startswith(f"Error: the server at {url} is down")
    assert len(lines) == 3, done.stderr  # what it is judging, the retry line, the error


def test_a_stage_against_a_dead_server_says_it_is_down_once(tmp_path: Path) -> None:
    """The stage's dry run meets the dead server first, then the run itself: the error is printed
    once, at the end (before: in the stage's first line too, in full)."""
    url = f"http://127.0.0.1:{free_port()}"
    project(tmp_path, url)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["rag"]["rows"] = "rows.jsonl"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    done = subprocess.run(
        [sys.executable, "-m", "stages", "rag", "rag_judge"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.count(f"the server at {url} is down") == 1, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"Error: the server at {url} is down")
    assert "rag_judge: calls not predicted: the dry run stopped on an error, said below" in done.stderr


def test_a_burst_of_503s_at_every_worker_gives_one_line_when_it_starts_and_one_when_it_ends(
    tmp_path: Path,
) -> None:
    with FakeOllama(responder=structured_ollama_responder, parallel_slots=SLOTS) as server:
        server.inject(*[Fault.status(503, "busy").on("/api/chat")] * ROWS)
        # Which call meets which 503 depends on timing (random backoffs: a call may retry before the
        # rows still waiting send their first request), so each call may meet all of them: with 3
        # retries one call could give up on a quiet machine (seen once in CI).
        project(tmp_path, server.url, max_retries=ROWS)
        done = judge_evaluate(tmp_path)
        assert done.returncode == 0, done.stderr
        assert server.requests_to("/api/chat") == 2 * ROWS  # the 12 503s, then every row answered
    # Before: one line per failed attempt, 12 here.
    first, last = retry_lines(done.stderr)
    assert first.startswith(f"server {server.url}: HTTP 503: busy — retrying in ")
    assert (
        last
        == f"server {server.url}: answering again after {ROWS} failed attempts over "
        + (last.split(" over ")[1])
    )
    assert last.endswith("(HTTP 503: busy)")
    assert len((tmp_path / "scores.jsonl").read_text().splitlines()) == ROWS


def test_each_fault_of_a_server_gets_its_line_and_the_end_counts_them_all(tmp_path: Path) -> None:
    """Two 503s, then two 500s, at one call: a line for each fault, one when the server answers."""
    with FakeOllama(responder=structured_ollama_responder, parallel_slots=1) as server:
        server.inject(
            *[Fault.status(503, "busy").on("/api/chat")] * 2,
            *[Fault.status(500, "runner crashed").on("/api/chat")] * 2,
        )
        project(tmp_path, server.url, parallelism=1, max_retries=6)
        done = judge_evaluate(tmp_path)
        assert done.returncode == 0, done.stderr
    first, second, last = retry_lines(done.stderr)
    assert first.startswith(f"server {server.url}: HTTP 503: busy — retrying in ")
    assert "(attempt 2 of 7)" in first
    assert second.startswith(f"server {server.url}: HTTP 500: runner crashed — retrying in ")
    # The 500s' own budget (llm.max_server_errors=2): three 500s in all would end the call at attempt 5.
    assert "(attempt 4 of 5)" in second
    assert last.startswith(f"server {server.url}: answering again after 4 failed attempts over ")
    assert last.endswith("(HTTP 503: busy; HTTP 500: runner crashed)")


# The notices alone: which retries make a line.


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Shown:
    """What the notices have shown so far."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog

    @property
    def lines(self) -> list[str]:
        return [r.getMessage() for r in self.caplog.records if r.name.endswith("retry_notices")]


@pytest.fixture
def shown(caplog: pytest.LogCaptureFixture) -> Shown:
    caplog.set_level("WARNING", logger="pipeline.llm.backends.retry_notices")
    return Shown(caplog)


def test_one_retry_answered_is_one_line(shown: Shown) -> None:
    notices = RetryNotices("http://h:1")
    notices.retrying(TransientBackendError("POST http://h:1/api/chat: HTTP 503: busy"), 2, 4, 0.5)
    notices.answered()
    assert shown.lines == [
        "server http://h:1: HTTP 503: busy — retrying in 0.5s (attempt 2 of 4); further retries of this "
        "fault are counted, not shown"
    ]


def test_retries_of_one_fault_are_counted_and_told_when_it_ends(shown: Shown) -> None:
    clock = Clock()
    notices = RetryNotices("http://user:secret@h:1", clock)
    refused = ConnectionFaultError("POST http://h:1/api/chat: cannot connect (refused)")
    for attempt in (2, 3, 2, 4):
        notices.retrying(refused, attempt, 4, 0.1)
        clock.now += 1.5
    notices.answered()
    notices.answered()  # nothing more to say
    assert len(shown.lines) == 2
    assert "secret" not in "".join(shown.lines)  # the server named as the breaker names it
    assert shown.lines[1] == (
        "server http://***@h:1: answering again after 4 failed attempts over 6.0s (cannot connect (refused))"
    )


def test_a_call_that_gives_up_ends_the_event_without_a_line_of_its_own(shown: Shown) -> None:
    notices = RetryNotices("http://h:1")
    notices.retrying(TransientBackendError("HTTP 429: slow down"), 2, 3, 1.0)
    notices.retrying(TransientBackendError("HTTP 429: slow down"), 3, 3, 1.0)
    notices.gave_up()
    notices.answered()
    assert len(shown.lines) == 1
    notices.retrying(TransientBackendError("HTTP 429: slow down"), 2, 3, 1.0)
    assert len(shown.lines) == 2  # after the give-up, the same fault again is a new event
