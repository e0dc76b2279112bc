"""The judgeloop program and a stage's process leave without the interpreter's teardown after a
success (pipeline.fast_exit, by pipeline.tools.program_exit and stages/__main__.py; issue 31): what a
program sees of an exit still happens (threads joined, atexit, streams flushed, the status), and
anything else exits as Python does. A warm stage's exit: tests/test_warm_stages.py."""

from __future__ import annotations

import atexit
import io
import os
import signal
import subprocess
import sys
import threading
from contextlib import nullcontext
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline import fast_exit
from pipeline.tools import dvc_run, program_exit
from tests.children import run_child

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


# Written, never flushed, into a pipe whose reader is gone: the flush at the exit fails.
CLOSED_PIPE = """
import sys
from pipeline.tools import program_exit

sys.stdout.write("buffered")
if sys.argv[1] == "allow":
    program_exit.allow()
try:
    raise SystemExit(0)
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
    # what `--replay` sets in this process's environment, set here so that it is put back after the
    # test: else every later test in this process replays (test_diff_lines' fixture finds no recording)
    monkeypatch.setenv("JUDGELOOP_CACHE_MODE", "replay")
    monkeypatch.setattr(dvc_run, "dvc_started", nullcontext)
    monkeypatch.setattr(dvc_run, "_repro_and_refresh", lambda *args: status)
    result = CliRunner().invoke(dvc_run.repro, ["--replay", "aggregate"])
    assert result.exit_code == status
    assert program_exit._allowed


def test_repro_that_raises_does_not_allow_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> int:
        raise RuntimeError("DVC broke")

    monkeypatch.setattr(program_exit, "_allowed", False)
    # what `--replay` sets in this process's environment, set here so that it is put back after the
    # test: else every later test in this process replays (test_diff_lines' fixture finds no recording)
    monkeypatch.setenv("JUDGELOOP_CACHE_MODE", "replay")
    monkeypatch.setattr(dvc_run, "dvc_started", nullcontext)
    monkeypatch.setattr(dvc_run, "_repro_and_refresh", broken)
    result = CliRunner().invoke(dvc_run.repro, ["--replay", "aggregate"])
    assert isinstance(result.exception, RuntimeError)
    assert not program_exit._allowed


@pytest.mark.parametrize("allowed", [True, False])
def test_a_closed_output_pipe_exits_120_as_python_does(allowed: bool) -> None:
    """`judgeloop repro | head -1`: stdout's flush fails at the exit, which Python's exit gives 120."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    done = run_child(
        [sys.executable, "-c", CLOSED_PIPE, "allow" if allowed else "no"],
        cwd=ROOT,
        env=env,
        timeout=60,
        stdout_closed=True,
    )
    assert done.returncode == 120  # Py_RunMain's status where the exit's flush fails
    assert "BrokenPipeError" in done.stderr


class _Exited(Exception):
    pass


class _Stream(io.StringIO):
    def __init__(self, fails: bool) -> None:
        super().__init__()
        self.fails = fails

    def flush(self) -> None:
        if self.fails:
            raise OSError("the stream is gone")


@pytest.fixture
def leaving(monkeypatch: pytest.MonkeyPatch) -> None:
    """`leave` allowed, its exit raising _Exited(status) and the steps before it (this process's
    threads and atexit functions are pytest's) doing nothing."""

    def exit_(status: int) -> None:
        raise _Exited(status)

    monkeypatch.setattr(program_exit, "_allowed", True)
    monkeypatch.setattr(threading, "_shutdown", lambda: None)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: None)
    monkeypatch.setattr(os, "_exit", exit_)


@pytest.mark.usefixtures("leaving")
@pytest.mark.parametrize(
    ("out_fails", "err_fails", "status"), [(False, False, 0), (True, False, 120), (False, True, 120)]
)
def test_a_failed_flush_of_either_stream_exits_120(
    monkeypatch: pytest.MonkeyPatch, out_fails: bool, err_fails: bool, status: int
) -> None:
    out, err = _Stream(out_fails), _Stream(err_fails)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(_Exited) as exited:
        program_exit.leave(SystemExit(0))
    assert exited.value.args == (status,)
    assert ("the stream is gone" in err.getvalue()) == out_fails  # stdout's told, stderr's not


@pytest.mark.usefixtures("leaving")
def test_a_closed_or_missing_stream_is_left_as_python_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = _Stream(fails=True)
    closed.close()
    monkeypatch.setattr(sys, "stdout", closed)
    monkeypatch.setattr(sys, "stderr", None)
    with pytest.raises(_Exited) as exited:
        program_exit.leave(SystemExit(None))
    assert exited.value.args == (0,)


@pytest.mark.usefixtures("leaving")
@pytest.mark.parametrize(("module", "name"), [(threading, "_shutdown"), (atexit, "_run_exitfuncs")])
def test_a_python_without_the_private_steps_exits_its_own_way(
    monkeypatch: pytest.MonkeyPatch, module: object, name: str
) -> None:
    monkeypatch.delattr(module, name)
    done = SystemExit(0)
    with pytest.raises(SystemExit) as raised:
        program_exit.leave(done)
    assert raised.value is done


# A stage's process (stages/__main__.py, the real one) over a runner of its own: a success leaves by
# the same fast exit, a failure as Python does.
STAGE_RUNNER = """
import atexit, sys, threading, time

said = sys.stderr if sys.argv[1] == "closed-pipe" else sys.stdout

class Held:
    def __del__(self):  # run by the interpreter's teardown, which frees the module's names
        print("torn down", file=said, flush=True)

held = Held()

def main():
    atexit.register(lambda: print("atexit ran", file=said, flush=True))
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread joined", file=said, flush=True))).start()
    sys.stdout.write("buffered, no newline")
    if sys.argv[1] == "no-private-steps":
        del atexit._run_exitfuncs  # (Python's own exit calls threading._shutdown itself)
    raise SystemExit(3 if sys.argv[1] == "fail" else 0)
"""


def _stage(tmp_path: Path, how: str, *, stdout_closed: bool = False) -> subprocess.CompletedProcess[str]:
    for name in ("stages/__init__.py", "stages/__main__.py", "pipeline/__init__.py", "pipeline/fast_exit.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "stages" / "runner.py").write_text(STAGE_RUNNER)
    env = {
        name: value for name, value in os.environ.items() if name not in ("PYTHONUNBUFFERED", "PYTHONPATH")
    }
    return run_child(
        [sys.executable, "-m", "stages", how], cwd=tmp_path, env=env, timeout=60, stdout_closed=stdout_closed
    )


def test_a_stage_that_succeeds_leaves_by_the_fast_exit_with_atexit_run(tmp_path: Path) -> None:
    done = _stage(tmp_path, "ok")
    assert done.returncode == 0, done.stderr
    assert "torn down" not in done.stdout
    for seen in ("buffered, no newline", "thread joined", "atexit ran"):
        assert seen in done.stdout


@pytest.mark.parametrize("how", ["fail", "no-private-steps"])
def test_a_stage_that_fails_or_lacks_the_private_steps_exits_as_python_does(tmp_path: Path, how: str) -> None:
    done = _stage(tmp_path, how)
    assert done.returncode == (3 if how == "fail" else 0), done.stderr
    for seen in ("buffered, no newline", "thread joined", "atexit ran", "torn down"):
        assert seen in done.stdout


def test_a_stage_whose_output_pipe_is_closed_exits_120_as_python_does(tmp_path: Path) -> None:
    done = _stage(tmp_path, "closed-pipe", stdout_closed=True)
    assert done.returncode == 120
    assert done.stderr.splitlines() == [  # told as Python's exit tells it, not raised from the stage
        "thread joined",
        "atexit ran",
        "Exception ignored on flushing sys.stdout:",
        "BrokenPipeError: [Errno 32] Broken pipe",
    ]


@pytest.mark.usefixtures("leaving")
def test_an_interrupted_exit_ends_by_sigint_after_the_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """After an uncaught KeyboardInterrupt (a warm stage's, stages/zygote.py): SIGINT, as Py_RunMain's
    exit_sigint, whatever the flush; 130 where the signal does not end the process."""
    killed: list[tuple[int, int]] = []
    out = _Stream(fails=True)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", _Stream(fails=False))
    monkeypatch.setattr(signal, "signal", lambda number, handler: None)
    monkeypatch.setattr(os, "kill", lambda pid, number: killed.append((pid, number)))
    with pytest.raises(_Exited) as exited:
        fast_exit.leave_now(1, interrupted=True)
    assert killed == [(os.getpid(), signal.SIGINT)]
    assert exited.value.args == (130,)
