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
where it leaves by os._exit, never in its callers' code. A fork is taken only where it is safe and
can pay: no other thread running (a lock another thread held would stay held in the child), a second
core this process may run on and its container pays for (Linux only: its affinity and its cgroup's
CPU quota), and enough pages to outweigh the fork.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

# (part, parts): the items at the positions p with p % parts == part.
Share = tuple[int, int]
WHOLE: Share = (0, 1)
# The CPU quota of the container (cgroup v2): "QUOTA PERIOD", QUOTA microseconds of CPU each PERIOD.
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
# A page costs about 3-4 ms of CPU at the paper's scale; forking a stage's process a few ms.
MIN_PAGES = 16

Pages = Callable[[Share], Iterable[tuple[str, str]]]


def write_shares(folder: Path, pages: Pages, count: int) -> None:
    """Every item page (`pages(share)`: that share's (file name, page) in the items' order) written
    into `folder`, by two processes where that pays (see the module's docstring), else by this one."""
    if not _forks(count):
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
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                _write(folder, pages((1, 2)))
                code = 0
            finally:
                os._exit(code)
        failed = _written(folder, pages((0, 2)), child, mask)
        if failed is not None:
            # The failure one process meets first, which may be of an earlier page of the other
            # share: the pages again here, in the items' order, up to it (this one if none is).
            _write(folder, pages(WHOLE))
            raise failed
        _, status = os.waitpid(child, 0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # (let through already, unless this raised first)
        if not frozen_before:
            gc.unfreeze()
    if os.waitstatus_to_exitcode(status) != 0:
        _write(folder, pages((1, 2)))  # its share again here: what failed there is raised here


def _write(folder: Path, pages: Iterable[tuple[str, str]]) -> None:
    for name, html in pages:
        (folder / name).write_text(html, encoding="utf-8")


def _written(
    folder: Path, pages: Iterable[tuple[str, str]], child: int, mask: set[int | signal.Signals]
) -> Exception | None:
    """This process's share written (its signals let through again, `mask`), or the error it failed
    at, the forked process then stopped (stopped too, and the exception raised, on an interrupt)."""
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _write(folder, pages)
    except Exception as failed:
        _stop(child)
        return failed
    except BaseException:
        _stop(child)
        raise
    return None


def _stop(child: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child, 0)


def _forks(count: int) -> bool:
    return count >= MIN_PAGES and threading.active_count() == 1 and _cores() >= 2


def _cores() -> int:
    """The cores this process may run on and its container pays for, where a fork is known safe
    here: on Linux. (macOS forks, but a process that has loaded some of its frameworks may not,
    which is why Python's own multiprocessing spawns there.)"""
    if not sys.platform.startswith("linux"):
        return 1
    cores = len(os.sched_getaffinity(0))
    paid = _quota_cores(CPU_MAX)
    return cores if paid is None else min(cores, paid)


def _quota_cores(cpu_max: Path) -> int | None:
    """The whole cores a cgroup v2 CPU quota pays for (at least one), or None where there is none:
    "max", or no file to read (cgroup v1, no cgroup mounted) or one not understood."""
    try:
        quota, period = cpu_max.read_text(encoding="ascii").split()
        return max(1, int(quota) // int(period))
    except (OSError, ValueError, ZeroDivisionError):  # "max" among them: int() refuses it
        return None
