"""A SIGTERM to the process writing the item pages, sent to it alone (not its process group), ends
the forked page writer too (pipeline.reports.page_shares._death_tie). Before, the stage ended at
once (Python leaves SIGTERM's default) and the forked process went on writing pages into a folder
no one would read (review3, review4).

The writer here is a real process of its own running the real write_shares (forking for real, as a
stage does on two cores), whose pages come slowly, so that the signal lands while both write."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

# The stage's part, as a script: two cores whatever the machine; the forked process says its pid
# and writes a page every few milliseconds without end, this one says it is writing and waits.
_WRITER = """
import os, sys, time
from pathlib import Path
from pipeline.reports import page_shares

page_shares._cores = lambda proc=None: 2
folder = Path(sys.argv[1])

def pages(share):
    if share == (1, 2):
        (folder.parent / "child.pid").write_text(str(os.getpid()))
        n = 0
        while True:
            yield f"item-{n}.html", "page"
            n += 1
            time.sleep(0.005)
    (folder.parent / "parent.ready").write_text(str(os.getpid()))
    while True:
        time.sleep(1)
    yield

page_shares.write_shares(folder, pages, 1000)
"""

_BOUND_S = 60  # a bound on a hang, far above what any step here takes: no timing is asserted


def _until(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + _BOUND_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what} after {_BOUND_S} s")
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Whether `pid` runs: a process that has ended but not been waited for (its parent gone, and
    this machine's first process not reaping) has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


@contextlib.contextmanager
def _stopped_at_the_end(pids: list[int]) -> Iterator[None]:
    """Whatever the test finds, no process it started outlives it."""
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the page writer forks on Linux only")
def test_a_sigterm_to_the_stage_alone_ends_its_forked_page_writer(tmp_path: Path) -> None:
    folder = tmp_path / "pages"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    stage = subprocess.Popen([sys.executable, "-c", _WRITER, str(folder)], env=env, cwd=tmp_path)
    pids = [stage.pid]
    with _stopped_at_the_end(pids):
        _until("writing in two processes", lambda: (tmp_path / "parent.ready").exists())
        _until("writing in two processes", lambda: (tmp_path / "child.pid").exists())
        child = int((tmp_path / "child.pid").read_text(encoding="ascii"))
        pids.append(child)
        _until("writing pages in the forked process", lambda: any(folder.iterdir()))
        assert stage.poll() is None and _alive(child)
        os.kill(stage.pid, signal.SIGTERM)  # the stage's process alone, not its group
        assert stage.wait(timeout=_BOUND_S) == -signal.SIGTERM
        _until("ended: the forked page writer outlived the stage", lambda: not _alive(child))
