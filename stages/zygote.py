"""A warm stage process: `python -m stages DESIGN STAGE` run by a fork of a process that has already
imported what every such process imports first (pipeline/tools/warm_stages.py starts it and asks;
under a plain `dvc repro`, stages/dvc_zygote.py is such a process and uses `answer`).

    python -m stages.zygote FD      FD: a SOCK_SEQPACKET socket to the process that started it

A cold stage spends about 0.3 s of CPU importing `stages.runner` (pydantic, click, the engine's
settings; bench/README.md, issue 31) before it does anything of its own. This process imports
`stages` and `stages.runner`, as `python -m stages` does first and in the same order, and the
libraries a stage imports later (httpx, diskcache, jinja2: `stages.runner.preload`; libraries only,
about 0.03-0.07 s of CPU a stage), then waits.
Each request carries a stage's arguments, its working folder, its environment and its stdin, stdout
and stderr; the process checks that a fork would be the process DVC would have started (same
folder, same environment but for DVC's own DVC_* variables, which no module reads at import, the
same kind of terminal or file on each stream, no thread running), forks, and answers
`started PID`, then `exit STATUS` (os.waitpid's status) when the child ends. The child puts the
request's streams on fds 0-2 and its environment in os.environ, and runs `stages` as `python -m`
does (runpy, sys.argv, a fresh __main__, sys.path as it is: the folder first). Anything it cannot
vouch for it refuses (`refused REASON`), and the caller runs the command as DVC would. The process
never runs a stage itself; it ends when its socket closes, ending a child still running (so that a
killed `judgeloop repro` leaves no stage behind). SIGINT is ignored here, as DVC ignores it while
its stage runs: Ctrl-C reaches the child (same process group), which stops as a stage does. The
child's SIGINT is what a cold stage's would be: Python's handler, or ignored where the caller
ignored it (a cold stage inherits SIG_IGN across exec).

Only the standard library is imported here before `stages.runner`, and pipeline.fast_exit (itself
standard-library-only), which `python -m stages` also imports before it. The child leaves by that
exit, as a cold stage's process does: threads joined, atexit, streams flushed (120 where that
fails), the stage's status, and SIGINT after an uncaught KeyboardInterrupt.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import threading

from pipeline.fast_exit import leave_now  # the standard library only, as `python -m stages` first

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

PREFIX = "DVC_"  # DVC_ROOT, DVC_STAGE, DVC_EXP_*: set by DVC for each stage; no module reads them at import
STREAMS = 3


def _kind(fd: int) -> tuple[int, bool]:
    return os.fstat(fd).st_mode & 0o170000, os.isatty(fd)


def refusal(
    request: dict[str, object], fds: list[int], start_env: dict[str, str], cwd: str, threads: int
) -> str:
    """Why a fork of this process, running `threads` threads, would not be the process DVC would
    start ('' when it would)."""
    env = request.get("env")
    if not isinstance(env, dict) or not isinstance(request.get("argv"), list):
        return "malformed request"
    if len(fds) != STREAMS:
        return "streams missing"
    if os.path.realpath(str(request.get("cwd"))) != os.path.realpath(cwd):
        return "another folder"
    differ = {k for k in set(env) | set(start_env) if env.get(k) != start_env.get(k)}
    if any(not k.startswith(PREFIX) for k in differ):
        return "another environment: " + ", ".join(sorted(k for k in differ if not k.startswith(PREFIX)))
    if any(_kind(fd) != _kind(n) for n, fd in enumerate(fds)):
        return "another kind of stream"
    if threads != 1:
        return "a thread is running"
    return ""


def _exit_code(done: SystemExit) -> int:
    """The exit status Python gives an uncaught SystemExit (printing a message that is not a number)."""
    if done.code is None:
        return 0
    if isinstance(done.code, int):
        return done.code & 0xFF
    print(done.code, file=sys.stderr)
    return 1


def child(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become `python -m stages ARGS...` and run it; never returns (it raises
    SystemExit or KeyboardInterrupt only for Python's own exit, where the fast one is missing)."""
    import importlib
    import runpy
    import types

    # A cold stage lists each import folder afresh; this process's finders remember the listings
    # the warm process made, trusting a folder whose mtime is unchanged: a module added since within
    # one tick of the file system's clock (or with the folder's mtime put back) would not be found.
    importlib.invalidate_caches()
    for n, fd in enumerate(fds):
        os.dup2(fd, n)
        os.close(fd)
    # As Python starts: its own handler, unless SIGINT came ignored (a cold stage inherits the
    # caller's SIG_IGN across exec, as under `nohup` or `judgeloop repro &` in a script).
    ignored = request.get("sigint_ignored") is True
    signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    args = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    sys.argv = ["-m", *args]  # runpy sets argv[0] to stages/__main__.py, as -m does
    sys.orig_argv = ["python", "-m", "stages", *args]
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=__builtins__, __annotations__={})  # as Python makes __main__
    sys.modules["__main__"] = main
    code, interrupted = 0, False
    try:
        runpy._run_module_as_main("stages")  # type: ignore[attr-defined]
    except SystemExit as done:
        code = _exit_code(done)
    except BaseException as error:  # printed as Python prints it, from runpy's frame down
        tb = error.__traceback__.tb_next if error.__traceback__ else None
        sys.excepthook(type(error), error.with_traceback(tb), tb)
        code, interrupted = 1, isinstance(error, KeyboardInterrupt)
    leave_now(code, interrupted=interrupted)  # the stage's own exit, as a cold stage's
    # A Python without the fast exit's steps: out to its own exit, past the warm process's loop.
    if interrupted:
        sys.excepthook = lambda *args: None  # told above; Python then ends by SIGINT
        raise KeyboardInterrupt
    raise SystemExit(code)


# `signal N` from the caller, for its child (stages/dvc_warm.py): Ctrl-C, a kill, Ctrl-Z (as SIGSTOP:
# the child is in an orphaned process group, where the kernel drops SIGTSTP) and `fg`.
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGSTOP, signal.SIGCONT)


def _wait(pid: int, sock: socket.socket) -> int:
    """The child's wait status; if the socket closes first (the caller is gone), the child is ended.
    Meanwhile a `signal N` from the caller is sent to the child, which is not reaped before it ends
    (so that its pid is no other process's)."""
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([pidfd, sock.fileno()], [], [])
            if pidfd in ready:
                return os.waitpid(pid, 0)[1]
            try:
                message = sock.recv(64)
            except OSError:
                message = b""
            if not message:  # EOF: nobody will read the status
                os.kill(pid, signal.SIGTERM)
                # A child stopped (Ctrl-Z passed on as SIGSTOP) keeps SIGTERM pending until it is
                # continued: else it, and this process waiting on it, would stay stopped forever
                # (a cold stage stopped in a group the kernel finds orphaned is continued too).
                os.kill(pid, signal.SIGCONT)
                return os.waitpid(pid, 0)[1]
            word, _, number = message.decode(errors="replace").partition(" ")
            if word == "signal" and number in {str(int(s)) for s in PASSED_ON}:
                os.kill(pid, int(number))
    finally:
        os.close(pidfd)


def _forked(
    sock: socket.socket, request: dict[str, object], fds: list[int], also_close: tuple[int, ...]
) -> NoReturn:
    """The forked child, never back into the warm process's loop: out by the stage's exit, or by
    Python's own where `child` raises it (a Python without the fast exit's steps)."""
    try:
        sock.close()
        for fd in also_close:  # the warm process's own (a cold stage has none of them)
            os.close(fd)
        child(request, fds)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException:
        os._exit(70)
    os._exit(70)


def answer(
    sock: socket.socket,
    request: dict[str, object],
    fds: list[int],
    start_env: dict[str, str],
    cwd: str,
    refused: str = "",
    also_close: tuple[int, ...] = (),
) -> None:
    """One request answered on `sock`: `refused REASON` (`refused`, else `refusal`'s), or a fork run
    and its `started PID` and `exit STATUS`. The request's streams are closed here either way, and
    in the fork the warm process's other fds, `also_close`."""
    reason = refused or refusal(request, fds, start_env, cwd, threading.active_count())
    if reason:
        for fd in fds:
            os.close(fd)
        sock.send(f"refused {reason}".encode())
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _forked(sock, request, fds, also_close)
    for fd in fds:
        os.close(fd)
    sock.send(f"started {pid}".encode())
    status = _wait(pid, sock)
    sock.send(f"exit {status}".encode())


def serve(sock: socket.socket) -> None:
    start_env, cwd = dict(os.environ), os.getcwd()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, STREAMS)
        except ConnectionError:
            return
        if not message:
            return
        answer(sock, json.loads(message), fds, start_env, cwd)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        import stages.runner  # what `python -m stages` imports first, in its order

        stages.runner.preload()  # then the libraries a stage imports later (stages.runner.LIBRARIES)
    except BaseException as error:  # no warm process: the caller runs stages cold
        with contextlib.suppress(OSError):
            sock.send(f"unavailable {type(error).__name__}: {error}".encode())
        return
    with contextlib.suppress(OSError):  # the caller gone (or done): nothing more to do
        sock.send(b"ready")
        serve(sock)
    os._exit(0)  # without the interpreter's teardown of every module imported: nothing to write


if __name__ == "__main__":
    main()
