"""The item pages written by two processes where the machine has a second core: the report's pages
are its stage's main work (bench/README.md, "The paper's aggregate stage"), each page a function of
its own item alone, and while the stage runs nothing else of the pipeline does (DVC waits for it).

The pages are dealt out by position (a process takes every other item), each process reading the
results itself and rendering only its share, so the pages are the bytes one process writes. The
second process is forked (it has the first pass's rows, the records and the templates already) and
leaves by os._exit, running none of the parent's exit handlers and flushing none of its buffers.
Anything it fails at, the parent does again itself, and a failure of the parent's own share has
the pages rendered again in the items' order up to the first failure, so that the failure raised is
the one a run in one process raises. A fork refused (no process to be had) leaves the parent writing
every page; an interrupt is held back across the fork, so that the forked process meets it only
where it leaves by os._exit, never in its callers' code.

A fork is taken only where it is safe and can pay: no other thread in the process (a lock another
thread held would stay held in the child): none of Python's threading, and none started outside it
(a BLAS or OpenMP pool, a C extension's own), which only the kernel's list of the process's threads
shows (Linux's /proc; without it, no fork); a second core this process may run on and its
container pays for (Linux only: its affinity and the smallest CPU quota on its cgroups,
pipeline.reports.cpu_quota); and enough pages to outweigh the fork.

The forked process dies with this one, however this one ends (a SIGTERM to the stage's process
alone, which ends it at once): the kernel is asked to kill it then (_death_tie).

A forked process that hangs (a lock it inherited after all, a read that never returns) must not
hang the stage: it has as much to do as this one (at most a page more), so once this process's
share is written it is given WAIT_FACTOR times as long again as that share took (at least
MIN_WAIT_S seconds); a process not ended by then is stopped and its share written here, as for one
that failed. A slow process taken for hung costs its share written twice, never other bytes.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pipeline.reports import cpu_quota

# (part, parts): the items at the positions p with p % parts == part.
Share = tuple[int, int]
WHOLE: Share = (0, 1)
# A page costs about 3-4 ms of CPU at the paper's scale; forking a stage's process a few ms.
MIN_PAGES = 16
# How long a forked process not yet ended is waited for, after this process's share is written: its
# time for that share, WAIT_FACTOR times over, and at least MIN_WAIT_S seconds (a loaded machine may
# keep one process waiting for the CPU for a while; taking a slow process for a hung one costs its
# share written again, waiting for a hung one costs this long).
WAIT_FACTOR = 4
MIN_WAIT_S = 2.0

_log = logging.getLogger(__name__)

Pages = Callable[[Share], Iterable[tuple[str, str]]]


def write_shares(folder: Path, pages: Pages, count: int) -> None:
    """Every item page (`pages(share)`: that share's (file name, page) in the items' order) written
    into `folder`, by two processes where that pays (see the module's docstring), else by this one."""
    if not _forks(count) or (tie := _death_tie()) is None:
        _write(folder, pages(WHOLE))
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # What the process holds so far out of the collector's sight while the two run: a collection
    # walks every object it tracks, which would copy the whole heap into the forked process. (A
    # caller's own freeze, pipeline.tools.dvc_run's, is left as it was.)
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    # An interrupt is held back until each process stands where it is handled: one in the forked
    # process before that must never return into this process's code (its callers' cleanup).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    parent = os.getpid()
    try:
        try:
            child = os.fork()
        except OSError:  # no process to be had (a limit on processes, memory): this one writes all
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            _write(folder, pages(WHOLE))
            return
        if child == 0:  # pragma: no cover (the forked process: coverage does not follow it)
            code = 1
            try:
                tie(parent)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                _write(folder, pages((1, 2)))
                code = 0
            finally:
                os._exit(code)
        failed, status = _written(folder, pages((0, 2)), child, mask)
        if failed is not None:
            # The failure one process meets first, which may be of an earlier page of the other
            # share: the pages again here, in the items' order, up to it (this one if none is).
            _write(folder, pages(WHOLE))
            raise failed
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # (let through already, unless this raised first)
        if not frozen_before:
            gc.unfreeze()
    if status is None or os.waitstatus_to_exitcode(status) != 0:
        _write(folder, pages((1, 2)))  # its share again here: what failed there is raised here


def _death_tie() -> Callable[[int], None] | None:
    """What the forked process calls first, with this process's pid: the kernel is asked to kill it
    when this process ends, however it ends (Linux's PR_SET_PDEATHSIG), for a SIGTERM to the
    stage's process alone, not its group, ends the stage at once, and its page writer went on
    writing into a folder no one would read. Where this process ended before the ask (the forked
    one's parent is another by then), or the ask is refused, the forked process leaves at once and
    its share is written here. Looked up before the fork (None where there is no prctl to be had:
    then no fork); the forked process only calls it."""
    import ctypes  # here, not at import: only a stage that forks pays for it

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def tie(parent: int) -> None:
        if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
            raise OSError("not tied to the life of the process that forked it")

    return tie


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _write(folder: Path, pages: Iterable[tuple[str, str]]) -> None:
    for name, html in pages:
        (folder / name).write_text(html, encoding="utf-8")


def _written(
    folder: Path, pages: Iterable[tuple[str, str]], child: int, mask: set[int | signal.Signals]
) -> tuple[Exception | None, int | None]:
    """This process's share written (its signals let through again, `mask`) and the forked process
    waited for, within the bound (see the module's docstring): (None, its wait status), (None, None)
    where it had not ended by then, or (the error this process's share failed at, None). Wherever it
    has not ended, past the bound, on that error or on an interrupt (then raised) from the share's
    first page to the wait's end, the forked process is stopped (killed and waited for) before
    anything else is done here."""
    started = time.monotonic()
    failed: Exception | None = None
    ended, seconds = False, 0.0
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        try:
            _write(folder, pages)
        except Exception as error:
            failed = error
        else:
            now = time.monotonic()
            seconds = max(MIN_WAIT_S, WAIT_FACTOR * (now - started))
            ended = _ended(child, now + seconds)
    finally:
        if not ended:  # (once ended, it is only left to be waited for: no other process has its pid)
            _stop(child)
    if failed is None and not ended:
        _log.warning(
            "the second page writer had not ended %.1f s after this one; its pages written here", seconds
        )
    return failed, os.waitpid(child, 0)[1] if ended else None


def _stop(child: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child, 0)


def _ended(child: int, deadline: float) -> bool:
    """Whether the forked process has ended by `deadline` (left to be waited for): told by the
    kernel through a descriptor of the process (Linux 5.3), else asked every few milliseconds."""
    try:
        process = os.pidfd_open(child)
    except OSError:  # no pidfd to be had: an older kernel, a sandbox's filter
        return _polled(child, deadline)
    try:
        ready = select.poll()
        ready.register(process, select.POLLIN)
        return bool(ready.poll(max(0.0, deadline - time.monotonic()) * 1000))
    finally:
        os.close(process)


def _polled(child: int, deadline: float) -> bool:
    pause = 0.001
    while os.waitid(os.P_PID, child, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 0.05)
    return True


def _forks(count: int, proc: Path = cpu_quota.PROC) -> bool:
    """`proc`: where /proc is (a test's own)."""
    return count >= MIN_PAGES and _alone(proc) and _cores(proc) >= 2


def _alone(proc: Path) -> bool:
    """No thread in this process but this one: Python's own count, and the kernel's (which sees the
    threads started outside Python's threading too), counted no further than two."""
    if threading.active_count() != 1:
        return False
    try:
        with os.scandir(proc / "self" / "task") as tasks:
            return len(list(itertools.islice(tasks, 2))) == 1
    except OSError:  # no /proc: the other threads cannot be counted
        return False


def _cores(proc: Path = cpu_quota.PROC) -> int:
    """The cores this process may run on and its container pays for, where a fork is known safe
    here: on Linux. (macOS forks, but a process that has loaded some of its frameworks may not,
    which is why Python's own multiprocessing spawns there.) A quota not read is taken for one core."""
    if not sys.platform.startswith("linux"):
        return 1
    cores = len(os.sched_getaffinity(0))
    try:
        paid = cpu_quota.cores_paid(proc)
    except cpu_quota.Unreadable:
        return 1
    return cores if paid is None else min(cores, paid)
