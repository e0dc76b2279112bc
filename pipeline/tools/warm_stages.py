"""Warm stages: DVC's `python -m stages DESIGN STAGE` run by a fork of a process that has already
imported `stages.runner` (stages/zygote.py), for `judgeloop repro` and `judgeloop exp`.

Every stage DVC runs is a fresh process: a shell, Python, and about 0.3 s of CPU importing
`stages.runner` before the stage does anything of its own. `warm_stages()` starts one process that
does those imports once (`python -m stages.zygote`, with this process's environment, folder and
streams, while DVC starts) and replaces DVC's stage command runner (dvc.stage.run._run) for the
time DVC runs: a command that is exactly `python -m stages ARGS...`, whose `python` is the one the
warm process runs, is sent there with its folder, the environment DVC gives it and this process's
stdin, stdout and stderr; a fork runs it as `python -m stages` would, and its exit status comes
back as the subprocess's would (a non-zero status fails the stage with DVC's own message; SIGINT is
ignored here meanwhile, as DVC ignores it). The stage's modules are imported in the fork as in a
cold process; only `stages` and `stages.runner`, what every stage imports first, and the libraries
a stage imports later (stages.runner.LIBRARIES: httpx, diskcache, jinja2) come warm.

Anything else runs as DVC runs it, silently: other commands (`python -m stages.index`), a request
the warm process refuses (another folder, another environment than DVC's DVC_* variables, a stream
of another kind, a thread running), a warm process that could not start or has ended, a platform
without fork, or JUDGELOOP_WARM_STAGES=0. JUDGELOOP_WARM_STAGES_LOG=FILE appends a line per stage
command: `warm ARGS` or `cold REASON: CMD` (for tests and benches).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SWITCH = "JUDGELOOP_WARM_STAGES"
LOG = "JUDGELOOP_WARM_STAGES_LOG"
COMMAND = re.compile(r"python -m stages( [A-Za-z0-9_][A-Za-z0-9_.=-]*)+")  # no quoting, no shell syntax
last = ""  # the last line logged (tests)
_entered = False  # warm_stages() is in effect (an inner `with` uses the outer one's process)
KWARGS = {"cwd", "env", "close_fds", "shell"}
STREAMS = (0, 1, 2)


def _log(line: str) -> None:
    global last
    last = line
    path = os.environ.get(LOG)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


class Zygote:
    """The warm process and this end of its socket."""

    def __init__(self, python: str) -> None:
        self.python = python
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.process = subprocess.Popen(
                [python, "-m", "stages.zygote", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=dict(os.environ),  # as DVC passes it (not the C library's, which readline may extend)
            )
        self.ready: bool | None = None  # None: not heard from yet
        self.lock = threading.RLock()  # one stage at a time on the socket (DVC runs them one by one)

    @classmethod
    def start(cls) -> Zygote | None:
        """The warm process, starting, or None where it cannot run here."""
        if os.environ.get(SWITCH, "1") == "0" or not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
            return None
        if not hasattr(os, "pidfd_open") or not hasattr(socket, "SOCK_SEQPACKET"):
            return None
        python = shutil.which("python")
        if python is None:
            return None
        try:
            return cls(python)
        except OSError:
            return None

    def _receive(self) -> str:
        try:
            return self.sock.recv(4096).decode()
        except OSError:
            return ""

    def _available(self) -> bool:
        with self.lock:
            return self._heard()

    def _heard(self) -> bool:
        if self.ready is None:
            said = self._receive()
            self.ready = said == "ready"
            if not self.ready:
                _log(f"no warm process: {said or 'it ended'}")
        return self.ready

    def accepts(self, cmd: str, kwargs: dict[str, Any]) -> bool:
        """Whether `cmd` is one to ask the warm process for."""
        reason = self._refusal(cmd, kwargs)
        if reason:
            _log(f"cold {reason}: {cmd}")
        return not reason

    def run(self, cmd: str, kwargs: dict[str, Any], sigint_ignored: bool | None = None) -> int | None:
        """The exit code of `cmd` run warm, as subprocess.Popen's returncode; None: run it cold.
        `sigint_ignored`: whether the process DVC would start inherits SIGINT ignored (None: as
        this process has it now)."""
        if sigint_ignored is None:
            sigint_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        with self.lock:
            return self._run(cmd, kwargs, sigint_ignored)

    def _run(self, cmd: str, kwargs: dict[str, Any], sigint_ignored: bool) -> int | None:
        if not self._available():
            return None
        request = {
            "argv": cmd.split(" ")[3:],
            "cwd": os.fspath(kwargs["cwd"]),
            "env": kwargs["env"],
            "sigint_ignored": sigint_ignored,
        }
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], list(STREAMS))
            answer = self._receive()
        except OSError:
            answer = ""
        if not answer.startswith("started "):
            self.ready = False if not answer.startswith("refused ") else self.ready
            _log(f"cold {answer or 'the warm process ended'}: {cmd}")
            return None
        _log(f"warm {' '.join(request['argv'])}")
        status = self._receive()
        if not status.startswith("exit "):  # the warm process died under its child: killed
            self.ready = False
            return -int(signal.SIGKILL)
        return os.waitstatus_to_exitcode(int(status.split()[1]))

    def _refusal(self, cmd: str, kwargs: dict[str, Any]) -> str:
        if not COMMAND.fullmatch(cmd):
            return "not `python -m stages ARGS`"
        if set(kwargs) - KWARGS or kwargs.get("shell") or not isinstance(kwargs.get("env"), dict):
            return "DVC's arguments changed"
        if shutil.which("python", path=kwargs["env"].get("PATH")) != self.python:
            return "another python"
        if not self._available():
            return "no warm process"
        return ""

    def stop(self) -> None:
        if not self.ready:  # never used (nothing to run, or every stage cold): no need to wait for it
            self.process.kill()
        with contextlib.suppress(OSError):  # the warm process sees the end of its socket and leaves
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _run_warm(zygote: Zygote, original: Any) -> Any:
    from dvc.stage.exceptions import StageCmdFailedError

    def run(executable: str | None, cmd: str, **kwargs: Any) -> None:
        returncode = None
        if zygote.accepts(cmd, kwargs):  # (waits for the warm process's imports the first time)
            # DVC starts its subprocess before it ignores SIGINT: the stage inherits this disposition.
            sigint_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            main_thread = threading.current_thread() is threading.main_thread()
            old_handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
            try:
                returncode = zygote.run(cmd, kwargs, sigint_ignored)
            finally:
                if old_handler is not None:
                    signal.signal(signal.SIGINT, old_handler)
        if returncode is None:
            original(executable, cmd, **kwargs)
        elif returncode != 0:
            raise StageCmdFailedError(cmd, returncode)

    return run


@contextmanager
def warm_stages() -> Iterator[None]:
    """DVC's stage commands run warm where they can, for the time of the `with`. Entered again
    inside itself, the inner `with` uses the process the outer one started: `judgeloop repro`
    starts it before its own work (its pre-flight, the designs read), so that the warm process's
    imports run beside those rather than beside DVC's start."""
    global _entered
    if _entered:
        yield
        return
    zygote = Zygote.start()
    if zygote is None:
        yield
        return
    import dvc.stage.run as dvc_stage_run

    original = dvc_stage_run._run
    dvc_stage_run._run = _run_warm(zygote, original)
    _entered = True
    try:
        yield
    finally:
        _entered = False
        dvc_stage_run._run = original
        zygote.stop()
