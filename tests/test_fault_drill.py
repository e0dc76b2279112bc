"""The fault drill: a `judge-evaluate` batch against a server that misbehaves, over loopback HTTP.

For each fault, the run ends in a clear failure (naming the server and the fix) or in the correct
result, and a failed run loses nothing: the last good scores file is still there, and the rerun
makes no call that already finished. Behaviour is asserted, never time (bench/fault_drill.py
prints the wall times): the counts that matter are how many requests reached the server, which is
what one retry budget bounds.
"""

from __future__ import annotations

import itertools
import json
import logging
import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from pipeline.testing.fake_ollama import FakeOllama, Fault
from pipeline.testing.structured_responder import structured_ollama_responder
from pipeline.tools.cli import main

ROWS = 12
SLOTS = 4  # parallelism 4: eight calls in flight (pipeline.llm.settings.in_flight)


def rows() -> str:
    return "".join(
        json.dumps(
            {
                "id": f"r{i:02d}",
                "question": f"Question {i}?",
                "answer": f"Answer {i}.",
                "contexts": [f"Fact {i}."],
            }
        )
        + "\n"
        for i in range(ROWS)
    )


def project(root: Path, base_url: str, **llm: Any) -> None:
    settings = {
        "backend": "ollama",
        "model": "test-model",
        "base_url": base_url,
        "parallelism": SLOTS,
        "max_retries": 2,
        "max_server_errors": 2,
        "read_timeout_s": 0.3,
        "connect_timeout_s": 0.3,
        **llm,
    }
    (root / "params.yaml").write_text(
        yaml.safe_dump({"llm": settings, "cache": {"dir": "cache"}, "rag": {"logprobs": None}})
    )
    (root / "rows.jsonl").write_text(rows())


def batch(root: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    monkeypatch.chdir(root)
    return CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama(responder=structured_ollama_responder, parallel_slots=SLOTS) as fake:
        yield fake


@pytest.fixture
def good_run(tmp_path: Path, server: FakeOllama, monkeypatch: pytest.MonkeyPatch) -> str:
    """A batch that went well: its scores file is what a failed run must leave in place."""
    project(tmp_path, server.url)
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    return (tmp_path / "scores.jsonl").read_text()


def forget(root: Path) -> None:
    """Move the good run's cache and recordings away: every row needs the server again."""
    (root / "cache").rename(root / "old-cache")
    (root / "recordings").rename(root / "old-recordings")


def stored_calls(root: Path) -> int:
    """The calls the run has stored in its cache so far, read without writing (a read-only SQLite
    connection: the store checks its database's schema and settings, which must stay its own)."""
    db = root / "cache" / "cache.db"
    if not db.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])
    except sqlite3.Error:  # not created yet, or busy
        return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_refused_connections_fail_within_one_budget_naming_the_server_and_the_fix(
    tmp_path: Path, good_run: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pipeline.llm.backends.http_errors")  # every retry's record
    url = f"http://127.0.0.1:{free_port()}"
    project(tmp_path, url, max_retries=3)
    forget(tmp_path)  # every row needs the server now
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert f"the server at {url} is down" in result.output and "cannot connect" in result.output
    assert "Fix: start the server (for Ollama: `ollama serve`)" in result.output
    assert "Traceback" not in result.output
    # One budget in all: the first call's 1 + 3 retries, not one budget per worker (8) or per row.
    retries = [r for r in caplog.records if r.levelno == logging.DEBUG and "retrying in" in r.getMessage()]
    assert len(retries) == 3
    assert (tmp_path / "scores.jsonl").read_text() == good_run


def test_a_server_that_never_answers_fails_within_one_budget(
    tmp_path: Path, good_run: str, server: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(tmp_path)
    server.reset_counters()
    server.inject(*[Fault.hang(30)] * 100)
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert f"the server at {server.url} is stuck" in result.output
    assert "no reply within 0.3s" in result.output and "raise llm.read_timeout_s" in result.output
    # A read timeout has the 500s' budget (llm.max_server_errors=2): 3 requests, from 8 workers.
    assert server.requests_total == 3
    assert (tmp_path / "scores.jsonl").read_text() == good_run


def test_a_server_that_dies_mid_stage_fails_the_stage_once_and_the_rerun_repeats_no_call(
    tmp_path: Path, good_run: str, server: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(tmp_path)
    (tmp_path / "rows.jsonl").write_text(rows().replace("Question", "Another question"))
    server.reset_counters()
    port = server.port
    server.latency_s = 0.05
    # After its fifth reply the server is slow, so that the stage is surely mid-way when the killer
    # (a thread, which a loaded machine may starve) sees a stored call: a fast batch could otherwise
    # end first, every call answered. Closing the server cuts the slow replies short.
    asked = itertools.count()
    monkeypatch.setattr(server, "latency", lambda request: 0.05 if next(asked) < 5 else 2.0)
    dead, finished = threading.Event(), threading.Event()

    def kill_after_some_replies() -> None:
        # Once a call is stored, not merely asked: a reply is stored only after a digest check
        # that began after it arrived, and under load five requests can arrive before any is.
        while not finished.is_set():
            if server.requests_to("/api/chat") >= 5 and stored_calls(tmp_path) >= 1:
                server.close()
                dead.set()
                return
            threading.Event().wait(0.01)

    killer = threading.Thread(target=kill_after_some_replies, daemon=True)
    killer.start()
    result = batch(tmp_path, monkeypatch)
    finished.set()
    killer.join()
    assert dead.is_set(), "the batch ended before the server was killed"
    assert result.exit_code == 1, result.output
    assert "is down" in result.output or "connection lost" in result.output
    assert (tmp_path / "scores.jsonl").read_text() == good_run
    answered = server.requests_to("/api/chat")
    server.start(port)  # back, on the same address
    server.reset_counters()
    server.latency_s = 0.0
    monkeypatch.setattr(server, "latency", None)
    again = batch(tmp_path, monkeypatch)
    assert again.exit_code == 0, again.output
    assert server.requests_to("/api/chat") <= ROWS - 1  # finished calls came from the cache
    assert answered >= 5
    assert len((tmp_path / "scores.jsonl").read_text().splitlines()) == ROWS


def test_a_server_down_for_less_than_the_budget_gives_the_correct_result(
    tmp_path: Path, good_run: str, server: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(tmp_path)
    project(tmp_path, server.url, max_retries=10)
    port = server.port
    server.close()

    def come_back() -> None:
        threading.Event().wait(0.5)
        server.start(port)

    threading.Thread(target=come_back, daemon=True).start()
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "scores.jsonl").read_text() == good_run  # the same scores as without the fault


@pytest.mark.parametrize("fault", [Fault.no_content, Fault.empty_reply])
def test_replies_without_content_are_retried_then_give_the_correct_result(
    tmp_path: Path, good_run: str, server: FakeOllama, monkeypatch: pytest.MonkeyPatch, fault: Fault
) -> None:
    forget(tmp_path)
    server.inject(fault.on("/api/chat"), fault.on("/api/chat"))
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "scores.jsonl").read_text() == good_run


def test_replies_without_content_past_the_budget_fail_clearly_and_keep_the_last_scores(
    tmp_path: Path, good_run: str, server: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(tmp_path)
    server.inject(*[Fault.no_content.on("/api/chat")] * 200)
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert (
        "a 200 reply without a message's content" in result.output
        and "gave up after 3 attempts" in result.output
    )
    assert "is down" not in result.output  # a live server that answers badly is no dead server
    assert (tmp_path / "scores.jsonl").read_text() == good_run


@pytest.mark.parametrize("retry_after", ["1", None])
def test_429_is_waited_out_and_gives_the_correct_result(
    tmp_path: Path,
    good_run: str,
    server: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    retry_after: str | None,
) -> None:
    forget(tmp_path)
    server.inject(Fault.status(429, "rate limited", retry_after=retry_after).on("/api/chat"))
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "scores.jsonl").read_text() == good_run
    waits = [r.getMessage() for r in caplog.records if "HTTP 429" in r.getMessage()]
    assert len(waits) == 1
    if retry_after is not None:
        assert "Retry-After: 1s" in waits[0] and "retrying in 1.0s" in waits[0]  # the server's floor


def test_429_past_the_budget_fails_saying_what_the_server_asked(
    tmp_path: Path, good_run: str, server: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(tmp_path)
    project(tmp_path, server.url, max_retries=0)
    server.inject(*[Fault.status(429, "rate limited", retry_after="1").on("/api/chat")] * 100)
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert "HTTP 429: rate limited (Retry-After: 1s) — gave up after 1 attempt" in result.output
    assert "is down" not in result.output
    assert (tmp_path / "scores.jsonl").read_text() == good_run
