"""The warm stage process of one plain `dvc repro` (issue 31; the stage's side: stages/dvc_warm.py).

    python -m stages.dvc_zygote FD PID START

FD: a listening SOCK_SEQPACKET socket, bound by the run's first stage in the private folder; PID and
START: DVC's process and its start time. Started detached by that stage (its own session, streams
of the kinds the stage had, the stage's folder and environment), it imports what stages/zygote.py's
warm process imports (`stages.runner`, its libraries), notes every imported module's file and its
Python's (device, inode, size, mtime_ns and ctime_ns: a change time cannot be put back, as `cp -p`,
`touch -r` or `tar x` put back an mtime), then answers one connection at a time with
stages/zygote.py's protocol: a request from a peer of this user (SO_PEERCRED) is forked as
`python -m stages` would run, or refused (`refused REASON`) where zygote's checks refuse it (folder,
environment but DVC_*, stream kinds, one thread), where another Python asks, or one with
interpreter options (`python -O -m stages`) or another process state (umask, limits, niceness,
affinity, ignored or blocked signals: stages/dvc_warm.process_state), where any module it imported
has changed on disk since, or had changed after its imports began (read before, noted after: the
whole run is refused), or where a module's byte-code cache changed so that Python's loader would now
make other code of it than this process loaded (stages/bytecode.py: a `.pyc` replaced under an
unchanged `.py`), or where a cold stage's import would now find a module in another file, added since
(stages/shadowing.py: a package beside a module, a module earlier on sys.path); the stage then runs
cold. It ends when DVC's process ends (a pidfd, else polling its
start time), removing its socket; meanwhile it removes the sockets of DVC runs that have ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import sys
import time
from typing import NamedTuple

from stages import bytecode, dvc_warm, shadowing, zygote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

POLL_S = 0.2  # where there is no pidfd: how often DVC's life is looked at
SOCKET_NAME = re.compile(r"dvc-(\d+)-(\d+)\.sock")
# A file system's clock lags real time by up to a tick (milliseconds); one of whole seconds (ext3,
# HFS+; FAT two) truncates: a change after the imports began has a change time past one of these.
MARGIN_NS = 50_000_000
WHOLE_SECONDS_MARGIN_NS = 2_000_000_000
OPTIONS = dvc_warm.OPTIONS
Identity = tuple[int, int, int, int, int]
Files = list[tuple[str, Identity]]


class Noted(NamedTuple):
    """What the warm process noted after its imports: its modules' files (and its Python's, and the
    .pth files), their byte-code caches (stages/bytecode.py), and the verdicts on caches found changed."""

    files: Files
    cached: bytecode.Files
    seen: dict[tuple[str, bytecode.Identity | None], str]
    folders: shadowing.Folders


def imported_files() -> Files:
    """Every imported module's file, this Python's and the .pth files it read, each with its identity."""
    paths = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    python = os.path.realpath(sys.executable)
    return note([python, *path_files(), *(path for path in paths if isinstance(path, str))])


def path_files() -> list[str]:
    """The .pth files of site-packages, which Python read at its start: one added (`pip install -e`),
    changed or removed changes a cold stage's sys.path, not a fork's."""
    import site

    folders = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    found = []
    for folder in folders:
        with contextlib.suppress(OSError):
            found += [os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".pth")]
    return sorted(found)


def note(paths: list[str]) -> Files:
    files: Files = []
    for path in paths:
        with contextlib.suppress(OSError):
            files.append((path, _identity(path)))
    return files


def _identity(path: str) -> Identity:
    found = os.stat(path)
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def after(ctime: int, began: int) -> bool:
    """A change time after `began` (time.time_ns() before the imports), as far as a file system's
    clock tells (less its margin)."""
    return ctime >= began - (WHOLE_SECONDS_MARGIN_NS if ctime % 1_000_000_000 == 0 else MARGIN_NS)


def changed_since(files: Files, began: int) -> str:
    """A file changed after `began`, as far as its change time tells: read by an import perhaps
    before the change, noted after it, so never found changed."""
    for path, identity in files:
        if after(identity[4], began):
            return f"{path} changed while the warm process started"
    return ""


def changed(request: dict[str, object], files: Files) -> str:
    """Why a fork of this process would not run what a cold `python -m stages` runs ('' if it would)."""
    if request.get("executable") != sys.executable:
        return "another python"
    if request.get("options", OPTIONS) != OPTIONS:
        options = request.get("options")
        return "interpreter options " + (" ".join(map(str, options)) if isinstance(options, list) else "?")
    for path, identity in files:
        try:
            if _identity(path) != identity:
                return f"{path} changed"
        except OSError:
            return f"{path} is gone"
    noted = {path for path, _ in files}
    added = [path for path in path_files() if path not in noted]
    return f"{added[0]} added" if added else ""


def alive(pid: int, start: int) -> bool:
    found = dvc_warm.process_stat(pid)
    return found is not None and found[1] == start


def sweep(folder: str) -> None:
    """The sockets of DVC runs that have ended (their warm process killed) removed: only this user's
    sockets of that name, and only where no process of that pid and start time lives."""
    for name in os.listdir(folder):
        match = SOCKET_NAME.fullmatch(name)
        if match is None or alive(int(match[1]), int(match[2])):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            found = os.lstat(path)
            if found.st_uid == os.getuid() and (found.st_mode & 0o170000) == 0o140000:  # S_IFSOCK
                os.unlink(path)


def stage_of(peer: int, dvc: tuple[int, int]) -> bool:
    """`peer` is a stage command of this DVC: its child, or its shell's child (the walk of
    dvc_warm.dvc_process from the other end). Not a process that merely reached the socket: one of
    another pid namespace sharing the folder (pid 0 here), or of another DVC whose pid and start
    time would name the same socket there."""
    pid = peer
    for _ in range(2):
        found = dvc_warm.process_stat(pid) if pid > 0 else None
        if found is None:
            return False
        if found[0] == dvc[0]:
            return alive(*dvc)
        pid = found[0]
    return False


def answer(
    conn: socket.socket,
    refused: str,
    noted: Noted,
    start: tuple[dict[str, str], str],
    own: tuple[int, ...],
    dvc: tuple[int, int],
) -> None:
    """One stage's request, forked or refused (zygote.answer; `start`: the environment and folder this
    process started with; `own`: its fds, closed in a fork; `dvc`: its DVC's pid and start time)."""
    peer, uid = dvc_warm.peer_credentials(conn)
    if uid != os.getuid():
        return
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, zygote.STREAMS)
    try:
        request = json.loads(message)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)
        conn.send(b"refused malformed request")
        return
    reason = refused or ("" if stage_of(peer, dvc) else "not a stage of this DVC")
    reason = reason or changed(request, noted.files) or bytecode.replaced(noted.cached, noted.seen)
    reason = reason or shadowing.shadowed(noted.folders)
    reason = reason or another_process(request)
    zygote.answer(conn, request, fds, *start, reason, also_close=own)


def another_process(request: dict[str, object]) -> str:
    """What of the caller's process state (dvc_warm.process_state) a fork would not have."""
    theirs, ours = request.get("process"), dvc_warm.process_state()
    if not isinstance(theirs, dict):
        return "another process: unknown"
    differ = sorted(key for key in ours if theirs.get(key) != ours[key])
    return "another process: " + ", ".join(differ) if differ else ""


def dvc_life(pid: int, start: int) -> tuple[list[int], Callable[[], bool]]:
    """What to select on for DVC's end (its pidfd, or nothing and a timeout), and whether it lives."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return [], lambda: alive(pid, start)
    if not alive(pid, start):  # the pid another process's by now
        os.close(pidfd)
        return [], lambda: False
    return [pidfd], lambda: not select.select([pidfd], [], [], 0)[0]


def serve(listener: socket.socket, pid: int, start: int, refused: str, began: int) -> None:
    started = dict(os.environ), os.getcwd()
    dvc_warm.process_state()  # its own imports (resource) among the files noted, none in a fork's
    files = imported_files()
    refused = refused or changed_since(files, began)
    during_start = lambda ctime: after(ctime, began)  # noqa: E731
    noted = Noted(files, bytecode.noted(during_start), {}, shadowing.noted(during_start))
    watched, lives = dvc_life(pid, start)
    folder = os.path.dirname(listener.getsockname())
    dvc_warm.log(f"warm process {os.getpid()} ready")
    with contextlib.suppress(OSError):
        sweep(folder)
    while lives():
        ready, _, _ = select.select([listener.fileno(), *watched], [], [], None if watched else POLL_S)
        if listener.fileno() in ready and lives():
            conn, _ = listener.accept()
            with conn, contextlib.suppress(OSError):
                answer(conn, refused, noted, started, (listener.fileno(), *watched), (pid, start))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a stage's Ctrl-C comes through its caller
    began = time.time_ns()  # before any import reads a file
    fd, pid, start = (int(arg) for arg in sys.argv[1:4])
    listener = socket.socket(fileno=fd)
    path = listener.getsockname()
    bound = _identity(path)
    refused = ""
    try:
        import stages.runner  # what `python -m stages` imports first, in its order

        stages.runner.preload()  # then the libraries a stage imports later
    except BaseException as error:  # every stage runs cold, told so, until DVC ends
        refused = f"unavailable {type(error).__name__}: {error}"
    me = os.getpid()
    try:
        serve(listener, pid, start, refused, began)
    finally:
        if os.getpid() == me:  # not a fork leaving by Python's own exit (zygote.child)
            _leave(path, bound)
    os._exit(0)  # without the interpreter's teardown of every module imported: nothing to write


def _leave(path: str, bound: Identity) -> None:
    with contextlib.suppress(OSError):
        if _identity(path)[:2] == bound[:2]:  # still this process's socket (its device and inode)
            os.unlink(path)
    dvc_warm.log(f"warm process {os.getpid()} ended")


if __name__ == "__main__":
    main()
