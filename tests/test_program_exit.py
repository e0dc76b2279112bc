"""The judgeloop program leaves without the interpreter's teardown after `repro` or `exp` succeeds
(pipeline.tools.program_exit, issue 31): what a program sees of an exit still happens (threads
joined, atexit, streams flushed, the status), and anything else exits as Python does."""

from __future__ import annotations

import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.tools import dvc_run, program_exit

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import atexit, sys, threading, time
from pipeline.tools import program_exit

class Held:
    def __del__(self):  # run by the interpreter's teardown, which frees the module's names
        print("torn down", flush=True)

held = Held()
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread joined", flush=True))).start()
sys.stdout.write("buffered, no newline")
if sys.argv[2] == "allow":
    program_exit.allow()
try:
    raise SystemExit(int(sys.argv[1]))
except SystemExit as done:
    program_exit.leave(done)
"""


def _run(code: int, allowed: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(code), "allow" if allowed else "no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_allowed_success_leaves_without_the_teardown() -> None:
    done = _run(0, allowed=True)
    assert done.returncode == 0
    assert "torn down" not in done.stdout
    for seen in ("buffered, no newline", "thread joined", "atexit ran"):
        assert seen in done.stdout


@pytest.mark.parametrize(("code", "allowed"), [(0, False), (3, True), (3, False)])
def test_anything_else_exits_as_python_does(code: int, allowed: bool) -> None:
    done = _run(code, allowed)
    assert done.returncode == code
    for seen in ("buffered, no newline", "thread joined", "atexit ran", "torn down"):
        assert seen in done.stdout


@pytest.mark.parametrize("status", [0, 1])
def test_repro_allows_it_once_dvc_has_run(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    """Allowed after DVC ran and everything closed, whatever the status (`leave` goes by the status)."""
    monkeypatch.setattr(program_exit, "_allowed", False)
    monkeypatch.setattr(dvc_run, "dvc_started", nullcontext)
    monkeypatch.setattr(dvc_run, "_repro_and_refresh", lambda *args: status)
    result = CliRunner().invoke(dvc_run.repro, ["--replay", "aggregate"])
    assert result.exit_code == status
    assert program_exit._allowed


def test_repro_that_raises_does_not_allow_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> int:
        raise RuntimeError("DVC broke")

    monkeypatch.setattr(program_exit, "_allowed", False)
    monkeypatch.setattr(dvc_run, "dvc_started", nullcontext)
    monkeypatch.setattr(dvc_run, "_repro_and_refresh", broken)
    result = CliRunner().invoke(dvc_run.repro, ["--replay", "aggregate"])
    assert isinstance(result.exception, RuntimeError)
    assert not program_exit._allowed
