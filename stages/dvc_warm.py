"""A warm stage process for plain `dvc repro` (issue 31): the stage's side, the standard library only.

`judgeloop repro` runs DVC in its own process and forks its stages from a warm process
(pipeline/tools/warm_stages.py, stages/zygote.py). A plain `dvc repro` starts every stage as a fresh
`python -m stages DESIGN STAGE`, which spends about 0.3 s of CPU importing `stages.runner` first.
Here, before that import (stages/__main__.py), a stage that DVC started:

- finds its run's warm process by a socket named by DVC's pid and start time (so that a recycled pid
  never meets another run's socket) in a private folder: `$XDG_RUNTIME_DIR/judgeloop-warm`, else
  `$TMPDIR/judgeloop-warm-UID` (or /tmp; one too long for a socket's path passed over), created 0700
  and refused unless it is a folder of this user's with mode 0700;
- hands it its arguments, folder, environment, Python and stdin/stdout/stderr (SCM_RIGHTS), as
  stages/zygote.py's protocol has them; the warm process checks them (stages/dvc_zygote.py) and forks
  the stage, or refuses;
- waits, passing SIGINT and SIGTERM on to the fork (which is in the warm process's session, out of
  reach of the terminal's Ctrl-C and Ctrl-Z), and a Ctrl-Z (SIGTSTP) as SIGSTOP, stopping with it,
  then SIGCONT when this process continues (`fg`, `bg`); and exits with the fork's status, by its
  signal where it died by one;
- or, where there is no warm process yet (the run's first stage), starts one, detached (its own
  session, its own streams of the kinds this process has, stages/dvc_zygote.py), and runs cold.

Anything else runs the stage cold, here, silently: a refusal, no /proc, a process that is not a
stage command of DVC's CLI, interpreter options (`python -B -m stages`: neither a fork nor a warm
process started from here would have them), fds past 0-2 given to it (`3>FILE`: a fork would not
have them), a background job of its terminal (which a read or a `stty tostop` write stops; a fork,
never),
JUDGELOOP_WARM=0, a fork already (`stages.runner` imported: a warm process's fork, this one's or
`judgeloop repro`'s). JUDGELOOP_WARM_LOG=FILE appends what happened, a line per stage and per warm
process (tests and benches; the verbose mode).
"""

from __future__ import annotations

import contextlib  # (loaded at Python's start already, as stat is)
import os
import signal
import socket
import stat
import sys

TYPE_CHECKING = False  # typing itself is not imported: every stage's start pays for it
if TYPE_CHECKING:
    from typing import NoReturn

SWITCH = "JUDGELOOP_WARM"
LOG = "JUDGELOOP_WARM_LOG"
STREAMS = 3
# The shells DVC runs a stage's command in (`$SHELL -c CMD`, dvc/stage/run.py), where one forks
# rather than execs the command; the usual ones exec it, and DVC is then the stage's parent.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox"})
PEERCRED = "3i"  # struct ucred: pid, uid, gid
OPTIONS = ["-m", "stages"]  # `python -m stages`, and nothing else, as a fork runs it


def log(line: str) -> None:
    path = os.environ.get(LOG)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def process_stat(pid: int) -> tuple[int, int] | None:
    """`pid`'s parent and start time (clock ticks after boot), or None: gone, or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # after the command's name, which may hold anything
    return int(fields[1]), int(fields[19])


def _command_line(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0")[:-1]]


def is_dvc(argv: list[str]) -> bool:
    """DVC's command line: its console script (run by its Python, or a binary) or `python -m dvc`."""
    return "dvc" in (os.path.basename(arg) for arg in argv[:2]) or argv[1:3] == ["-m", "dvc"]


def dvc_process() -> tuple[int, int] | None:
    """DVC's pid and start time where this process is a stage command of DVC's CLI; else None.
    DVC sets DVC_ROOT and DVC_STAGE for every stage command (dvc/stage/run.py), and its command runs
    in `$SHELL -c`: DVC is the parent, or the parent's parent where the shell forked. The variables
    alone could be inherited by any process under a stage; the parent's command line alone could be
    a `dvc` of another kind: both are asked. `judgeloop repro` runs DVC in its own process, a
    command line that is not DVC's: it keeps its own warm stages."""
    if "DVC_STAGE" not in os.environ or "DVC_ROOT" not in os.environ:
        return None
    pid = os.getppid()
    for _ in range(2):
        before = process_stat(pid)
        argv = _command_line(pid)
        if before is None or process_stat(pid) != before:  # gone meanwhile: its pid might be another's
            return None
        if is_dvc(argv):
            return pid, before[1]
        if not argv or os.path.basename(argv[0]) not in SHELLS:
            return None
        pid = before[0]
    return None


def socket_folder() -> tuple[str, str]:
    """The private folder of the warm processes' sockets, and '', or '' and why there is none."""
    # The user's id in the name even under XDG_RUNTIME_DIR, which is not always the user's own
    # (/tmp, left by `sudo` or a container): one user's folder there never turns another's away.
    # A relative one is refused: it would name a folder in the stage's, the project. So is one too
    # long for a socket's path in it (a TMPDIR deep in a checkout or a job's scratch folder).
    given = (os.environ.get(name, "") for name in ("XDG_RUNTIME_DIR", "TMPDIR"))
    folders = (
        os.path.join(parent, f"judgeloop-warm-{os.getuid()}") for parent in given if os.path.isabs(parent)
    )
    path = next(
        (folder for folder in folders if _room_for_sockets(folder)), f"/tmp/judgeloop-warm-{os.getuid()}"
    )
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        return "", f"no folder {path}: {error.strerror}"
    try:
        found = os.lstat(path)
    except OSError as error:
        return "", f"no folder {path}: {error.strerror}"
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        return "", f"{path} is not a folder of this user's"
    if stat.S_IMODE(found.st_mode) != 0o700:
        return "", f"{path} has mode {stat.S_IMODE(found.st_mode):o}, not 700"
    return path, ""


def socket_name(pid: int, start: int) -> str:
    return f"dvc-{pid}-{start}.sock"


def _room_for_sockets(folder: str) -> bool:
    """Whether every socket's path in `folder` fits in sun_path (107 bytes and a NUL): the longest
    name has a 7-digit pid (Linux's pid_max at most 2**22) and a 20-digit start time."""
    return len(os.fsencode(os.path.join(folder, socket_name(2**22, 2**64 - 1)))) <= 107


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """The peer's pid (0 where it is of another pid namespace) and uid, when it connected or listened."""
    import struct

    size = struct.calcsize(PEERCRED)
    pid, uid, _ = struct.unpack(PEERCRED, sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))
    return int(pid), int(uid)


def peer_uid(sock: socket.socket) -> int:
    return peer_credentials(sock)[1]


def interpreter_options() -> list[str]:
    """This Python's command line up to the stage's arguments: `-m stages` for `python -m stages`,
    more where it was given options (-O, -X, -W, -I...), which a fork would not have."""
    return sys.orig_argv[1 : len(sys.orig_argv) - len(sys.argv) + 1]


def process_state() -> dict[str, object]:
    """What a fork takes from the warm process where a cold stage takes it from its caller (a shell's
    `umask`, `ulimit`, `nice`, `taskset`, `trap '' SIG`): compared, not set, by the warm process.
    SIGINT is the request's own (`sigint_ignored`)."""
    import resource

    umask = os.umask(0)
    os.umask(umask)
    limits = sorted(name for name in dir(resource) if name.startswith("RLIMIT_"))
    ignored = [
        int(s) for s in signal.valid_signals() if s != signal.SIGINT and signal.getsignal(s) is signal.SIG_IGN
    ]
    return {
        "umask": umask,
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "limits": [[name, *resource.getrlimit(getattr(resource, name))] for name in limits],
        "ignored": ignored,
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    }


def other_fds() -> list[int]:
    """This process's fds past 0-2 that its caller gave it (a stage command's `3>FILE`, a shell's
    `exec 4<FILE`; DVC itself closes every other): a fork would have fds 0-2 alone. Only those that
    came across the exec, which are inheritable: Python opens its own close-on-exec (PEP 446), as a
    site customization's kept file, which the warm process, started the same way, has of its own.
    [-1] where /proc cannot tell."""
    try:
        listed = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        return [-1]
    return sorted(fd for fd in listed if fd >= STREAMS and _inherited(fd))  # (not the listing's own fd)


def given_by_its_caller() -> str:
    """What a fork could not be given of this process's ('' where nothing): fds past 0-2 (a fork has
    0-2 alone, and the warm process, were it started here, would inherit them), or the background of
    a terminal's job control; or interpreter options (-B, -I, -X...), which a fork would not have,
    nor would a warm process started from here (it would write byte-code under -B, read the user's
    site-packages under -I)."""
    extra = other_fds()
    if extra:
        return f"fds {' '.join(map(str, extra))} open"
    if interpreter_options() != OPTIONS:
        return "interpreter options " + " ".join(interpreter_options())
    return "a background job of its terminal" if in_the_background() else ""


def in_the_background() -> bool:
    """A background job of the terminal one of its streams is (`dvc repro &`, or `bg`): a cold stage
    that reads it, or writes it under `stty tostop`, is stopped (SIGTTIN, SIGTTOU) until `fg`; a fork,
    in a session of its own where that terminal is not the controlling one, is never stopped."""
    for n in range(STREAMS):
        try:
            if os.isatty(n) and os.tcgetpgrp(n) != os.getpgrp():
                return True
        except OSError:  # not this session's controlling terminal: no job control on it, cold or warm
            continue
    return False


def _inherited(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # closed meanwhile (the listing's own)
        return False


def run_warm() -> None:
    """The stage run by its `dvc repro`'s warm process, and this process gone with its status; or
    a return, and the stage runs cold here (after starting the warm process, where there is none)."""
    if "stages.runner" in sys.modules or os.environ.get(SWITCH, "1") == "0":
        return  # a warm process's fork already (this run's or `judgeloop repro`'s), or switched off
    if not (hasattr(socket, "send_fds") and hasattr(socket, "SO_PEERCRED") and hasattr(os, "posix_spawn")):
        return
    dvc = dvc_process()
    if dvc is None:
        return
    args = " ".join(sys.argv[1:])
    why = given_by_its_caller()
    if why:
        log(f"cold {why}: {args}")
        return
    folder, why = socket_folder()
    if not folder:
        log(f"cold {why}: {args}")
        return
    path = os.path.join(folder, socket_name(*dvc))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
    except FileNotFoundError:
        sock.close()
        log(f"cold {_start(path, dvc, folder) or 'starting the warm process'}: {args}")
        return
    except OSError as error:  # a socket that nobody listens on: its warm process ended
        sock.close()
        log(f"cold no warm process ({error.strerror}): {args}")
        return
    with sock:
        status = _hand_over(sock, args)
    if status is not None:
        _exit_as(status)


def _hand_over(sock: socket.socket, args: str) -> int | None:
    """The stage's wait status from the warm process, or None where it refused."""
    import json

    try:
        same_user = peer_uid(sock) == os.getuid()
    except OSError:
        log(f"cold the warm process ended: {args}")
        return None
    if not same_user:
        log(f"cold the socket is another user's: {args}")
        return None
    request = {
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "sigint_ignored": signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
        "executable": sys.executable,
        "options": interpreter_options(),
        "process": process_state(),
    }
    try:
        socket.send_fds(sock, [json.dumps(request).encode()], list(range(STREAMS)))
        answer = sock.recv(4096).decode()
    except OSError:
        answer = ""
    if not answer.startswith("started "):
        log(f"cold {answer or 'the warm process ended'}: {args}")
        return None
    log(f"warm {args}")

    def pass_on(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):  # the warm process signals its child (not reaped yet)
            sock.send(f"signal {signum}".encode())

    def stop(signum: int, frame: object) -> None:
        """Ctrl-Z: the fork stopped with this process, which stops as a cold stage would (or not, as
        in an orphaned process group, where the kernel drops it), and continued when it continues."""
        pass_on(signal.SIGSTOP, frame)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # here until a SIGCONT (`fg`, `bg`)
        signal.signal(signal.SIGTSTP, stop)
        pass_on(signal.SIGCONT, frame)

    signal.signal(signal.SIGINT, pass_on)
    signal.signal(signal.SIGTERM, pass_on)
    if signal.getsignal(signal.SIGTSTP) is signal.SIG_DFL:  # (ignored: the fork ignores it too)
        signal.signal(signal.SIGTSTP, stop)
    try:
        status = sock.recv(4096).decode()
    except OSError:
        status = ""
    if not status.startswith("exit "):  # the warm process died under its child: killed
        return int(signal.SIGKILL)
    return int(status.split()[1])


def _exit_as(status: int) -> NoReturn:
    """Out with a wait status: its exit code, or its signal (with its own default action)."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal whose default action does not end the process
    os._exit(code)


def _start(path: str, dvc: tuple[int, int], folder: str) -> str:
    """The warm process started on a socket bound here ('' when it was), or why not. Connections
    made before it is ready wait for it; one bound by another stage of this run makes this a no-op."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind(path)
    except OSError as error:  # bound meanwhile by another stage of this run, or no room
        listener.close()
        return f"no warm process started: {error.strerror}"
    streams: list[int] = []
    try:
        listener.listen(16)
        streams = own_streams(folder)
        if len(streams) < STREAMS:
            _unlink(path)
            return "a stream of a kind the warm process cannot have"
        os.set_inheritable(listener.fileno(), True)
        command = ["-m", "stages.dvc_zygote", str(listener.fileno()), str(dvc[0]), str(dvc[1])]
        os.posix_spawn(
            sys.executable,
            [sys.executable, *command],
            dict(os.environ),
            file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(streams)],
            setsid=True,
        )
    except OSError as error:
        _unlink(path)
        return f"no warm process started: {error.strerror}"
    finally:
        listener.close()
        for fd in streams:
            os.close(fd)
    return ""


def own_streams(folder: str) -> list[int]:
    """New streams of the kinds this process has on fds 0-2 (what a fork's Python streams were set
    up for: a terminal, a pipe, a file...), none of them the same file: the warm process holds no
    pipe or file of DVC's open. Fewer than three where one is of another kind (or closed)."""
    streams = []
    for n in range(STREAMS):
        fd = _like(n, folder)
        if fd is None:
            break
        streams.append(fd)
    else:
        return streams
    for fd in streams:
        os.close(fd)
    return []


def _like(n: int, folder: str) -> int | None:
    try:
        kind = stat.S_IFMT(os.fstat(n).st_mode)
        if os.isatty(n):
            return os.open(os.ttyname(n), os.O_RDWR | os.O_NOCTTY)
        if kind == stat.S_IFCHR:
            return os.open(os.devnull, os.O_RDWR)
        if kind == stat.S_IFREG:
            return os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600)
        if kind == stat.S_IFIFO:
            read, write = os.pipe()
            os.close(write if n == 0 else read)
            return read if n == 0 else write
        if kind == stat.S_IFSOCK:
            ours, theirs = socket.socketpair()
            theirs.close()
            return ours.detach()
    except (OSError, AttributeError):
        return None
    return None


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
