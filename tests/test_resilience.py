"""A killed run resumes from the cache; two processes share one store; replay opens no socket."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.llm.cache.store import CallStore
from pipeline.llm.types import CallContext
from tests.conftest import ROOT
from tests.helpers import make_session, request

WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pipeline.llm.backends.fake import FakeBackend
    from pipeline.llm.types import CallContext
    from tests.helpers import make_session, request

    root, log, first, count, delay = Path(sys.argv[1]), Path(sys.argv[2]), *map(float, sys.argv[3:6])

    def slow(req):
        with log.open("a") as f:
            f.write(req.messages[0].content + "\\n")
        time.sleep(delay)
        return "reply to " + req.messages[0].content

    session, _ = make_session(root, backend=FakeBackend(slow))
    for i in range(int(first), int(first + count)):
        session.chat(request(f"prompt {i % 40}"), CallContext(stage="judge", item=str(i)))
    session.close(write_recording=False)
    """
)


def _worker(root: Path, log: Path, first: int, count: int, delay: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), str(log), str(first), str(count), str(delay)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_run_killed_with_sigkill_repeats_no_finished_call(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    victim = _worker(tmp_path, log, 0, 30, 0.05)
    deadline = time.monotonic() + 60
    while (not log.exists() or len(log.read_text().splitlines()) < 8) and time.monotonic() < deadline:
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    store = CallStore(tmp_path / "cache")
    finished = len(store)
    store.close()
    assert 0 < finished < 30
    before = len(log.read_text().splitlines())

    rerun = _worker(tmp_path, log, 0, 30, 0.0)
    assert rerun.wait(60) == 0
    repeated = len(log.read_text().splitlines()) - before
    assert repeated == 30 - finished  # exactly the unfinished calls reach the model


def test_two_processes_write_one_store_safely(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    # Overlapping ranges (prompts repeat modulo 40): both processes write some of the same keys.
    workers = [_worker(tmp_path, log, 0, 60, 0.0), _worker(tmp_path, log, 20, 60, 0.0)]
    assert [w.wait(120) for w in workers] == [0, 0]
    store = CallStore(tmp_path / "cache")
    assert len(store) == 40
    for key in store.keys():  # noqa: SIM118 (a CallStore is not a dict)
        record = store.get(key)
        assert record is not None and record.verify()
    store.close()


def test_replay_opens_no_network_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session, _ = make_session(tmp_path)
    session.chat(request("recorded"), CallContext(stage="judge", item="1"))
    session.close()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("replay mode opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    replay, fake = make_session(tmp_path, "replay")
    assert replay.chat(request("recorded"), CallContext(stage="judge", item="1")).cache_hit
    assert fake.calls == []
