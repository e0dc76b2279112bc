"""The report's item pages written by two processes (pipeline.reports.page_shares, issue 31): the same
bytes and names as one process writes, a share the second process fails at done again by the first,
a failure raised as one process raises it, and no fork where it is not safe or cannot pay."""

from __future__ import annotations

import _thread
import contextlib
import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.experiments.paper.aggregation import compute_metrics
from pipeline.experiments.paper.report import html
from pipeline.experiments.paper.report.html import WrittenReport, write_report
from pipeline.loops.results import Refinement
from pipeline.reports import page_shares
from pipeline.reports.cpu_quota import PROC
from tests.test_cpu_quota import cgroup, fake_proc, v1_mount, v2_mount
from tests.test_report_html import METRICS, build_sample

ITEMS = page_shares.MIN_PAGES + 3  # an odd count: the shares differ by one page


def _many() -> tuple[list[Refinement], dict[str, Any], dict[str, Any]]:
    """ITEMS items, copies of the sample's two under ids of their own (their calls shared)."""
    refinements, _, records = build_sample()
    many = [refinements[n % 2].model_copy(update={"item": f"{900 + n}"}) for n in range(ITEMS)]
    return many, compute_metrics(many, METRICS), records


@pytest.fixture
def renderers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each item page's rendering logged as `pid item` to the file returned (the forked process
    inherits the wrapper); two cores, whatever the machine running the tests has."""
    log = tmp_path / "rendered.log"
    page = html._item_page

    def logged(r: Refinement, *args: Any, **kwargs: Any) -> str:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {r.item}\n")
        return page(r, *args, **kwargs)

    monkeypatch.setattr(html, "_item_page", logged)
    monkeypatch.setattr(page_shares, "_cores", lambda _proc: 2)
    return log


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The processes forked (their pids), as this process saw them."""
    forked: list[int] = []
    fork = os.fork

    def counted() -> int:
        child = fork()
        if child:
            forked.append(child)
        return child

    monkeypatch.setattr(os, "fork", counted)
    return forked


_FRESH = "JUDGELOOP_TEST_SHARES_FRESH"


@pytest.fixture
def ran_elsewhere(request: pytest.FixtureRequest) -> bool:
    """True where this test has just run, and passed, in a pytest process of its own. The writer
    rightly forks only where no other thread runs (a lock another thread held would stay held in
    the forked process), and a test run after others may find their threads alive in this process
    (a server a session-wide fixture keeps; a BLAS pool numpy started, which only the kernel's
    count of threads shows): a test that needs the real fork then runs alone in a fresh process,
    rather than passing or failing on what ran before it."""
    if page_shares._alone(PROC) or os.environ.get(_FRESH):
        return False
    alone = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
        cwd=request.config.rootpath,
        env={**os.environ, _FRESH: "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert alone.returncode == 0, alone.stdout[-6000:] + alone.stderr[-2000:]
    assert "1 passed" in alone.stdout, alone.stdout[-2000:]
    return True


def _pids(log: Path) -> dict[int, list[str]]:
    pids: dict[int, list[str]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        pid, item = line.split()
        pids.setdefault(int(pid), []).append(item)
    return pids


def _files(folder: Path) -> dict[str, bytes]:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in files}


def _alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: Any) -> tuple[WrittenReport, Path]:
    """The report as one process writes it."""
    with monkeypatch.context() as one:
        one.setattr(page_shares, "_cores", lambda _proc: 1)
        alone = tmp_path / "alone"
        alone.mkdir()
        return write_report(alone / "report.html", *args), alone


def test_two_processes_write_the_pages_one_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, ran_elsewhere: bool
) -> None:
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    (tmp_path / "shared").mkdir()
    written = write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    pids = _pids(renderers)
    assert len(pids) == 2 and os.getpid() in pids  # this process and one forked from it
    ours = pids[os.getpid()]
    theirs = next(items for pid, items in pids.items() if pid != os.getpid())
    items = [r.item for r in refinements]
    assert ours == items[0::2] and theirs == items[1::2]  # every other item, each page once
    renderers.unlink()
    alone, folder = _alone(tmp_path, monkeypatch, refinements, summary, records, "t")
    assert set(_pids(renderers)) == {os.getpid()}
    assert written == alone
    assert written.pages == tuple(f"item-{item}.html" for item in items)
    assert _files(tmp_path / "shared") == _files(folder)


def test_a_share_the_second_process_fails_at_is_done_again_by_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, ran_elsewhere: bool
) -> None:
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    parent, page = os.getpid(), html._item_page

    def failing_there(r: Refinement, *args: Any, **kwargs: Any) -> str:
        if os.getpid() != parent and r.item == refinements[5].item:
            raise RuntimeError("a page the forked process cannot render")
        return page(r, *args, **kwargs)

    monkeypatch.setattr(html, "_item_page", failing_there)
    (tmp_path / "shared").mkdir()
    written = write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    pids = _pids(renderers)
    assert len(pids) == 2
    # Its share again, here: every odd item, after this process's own.
    items = [r.item for r in refinements]
    assert pids[parent] == items[0::2] + items[1::2]
    alone, folder = _alone(tmp_path, monkeypatch, refinements, summary, records, "t")
    assert written == alone
    assert _files(tmp_path / "shared") == _files(folder)


def test_results_that_change_between_the_passes_are_refused_as_by_one_process(
    tmp_path: Path, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    if ran_elsewhere:
        return
    refinements, summary, records = _many()

    class Shrinking:
        """The second pass (in both processes) one item short."""

        passes = 0

        def __iter__(self) -> Iterator[Refinement]:
            self.passes += 1
            return iter(refinements if self.passes == 1 else refinements[:-1])

    with pytest.raises(ConfigError, match="changed while the report was written"):
        write_report(tmp_path / "report.html", Shrinking(), summary, records, "t")
    assert len(forks) == 1
    assert list(tmp_path.iterdir()) == [renderers]  # no page, no staging folder left


def test_a_failure_here_stops_the_forked_process_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    parent, page = os.getpid(), html._item_page

    def failing_here(r: Refinement, *args: Any, **kwargs: Any) -> str:
        if os.getpid() == parent and r.item == refinements[4].item:
            raise RuntimeError("a page this process cannot render")
        return page(r, *args, **kwargs)

    monkeypatch.setattr(html, "_item_page", failing_here)
    before = _children()
    with pytest.raises(RuntimeError, match="this process cannot render"):
        write_report(tmp_path / "report.html", refinements, summary, records, "t")
    assert list(tmp_path.iterdir()) == [renderers]
    assert len(forks) == 1  # it had forked
    assert _children() == before  # and the forked process is gone, waited for (no zombie)


def test_the_failure_raised_is_the_first_one_process_meets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    """Item 1 (the forked process's share) and item 4 (this one's) both fail: one process meets item
    1 first and raises its error, so the two processes raise that one too, not this share's own."""
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    page, failing = html._item_page, {refinements[1].item, refinements[4].item}

    def failing_at(r: Refinement, *args: Any, **kwargs: Any) -> str:
        if r.item in failing:
            raise RuntimeError(f"cannot render item {r.item}")
        return page(r, *args, **kwargs)

    monkeypatch.setattr(html, "_item_page", failing_at)
    with monkeypatch.context() as one:
        one.setattr(page_shares, "_cores", lambda _proc: 1)
        with pytest.raises(RuntimeError, match=f"item {refinements[1].item}$"):
            write_report(tmp_path / "alone" / "report.html", refinements, summary, records, "t")
    assert forks == []
    with pytest.raises(RuntimeError, match=f"item {refinements[1].item}$"):
        write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    assert len(forks) == 1  # it had forked
    assert not (tmp_path / "shared").exists() or not any((tmp_path / "shared").iterdir())


def test_no_process_to_be_had_writes_the_pages_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path
) -> None:
    """A fork refused (a limit on processes, no memory) is no failure: one process writes them all."""
    refinements, summary, records = _many()

    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    (tmp_path / "shared").mkdir()
    written = write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    assert set(_pids(renderers)) == {os.getpid()}
    alone, folder = _alone(tmp_path, monkeypatch, refinements, summary, records, "t")
    assert written == alone
    assert _files(tmp_path / "shared") == _files(folder)


def test_an_interrupt_in_the_forked_process_never_returns_into_this_ones_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, ran_elsewhere: bool
) -> None:
    """An interrupt the forked process meets at once, before it stands in its own guarded code, is
    handled there (it leaves; this process writes its share): it never runs this process's callers'
    cleanup, which would remove the pages being written, and go on into the caller's code."""
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    parent, fork, came_back = os.getpid(), os.fork, tmp_path / "came-back"

    def interrupted_at_once() -> int:
        child = fork()
        if child == 0:
            signal.raise_signal(signal.SIGINT)
        return child

    monkeypatch.setattr(os, "fork", interrupted_at_once)
    (tmp_path / "shared").mkdir()
    try:
        written = write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    except BaseException:
        if os.getpid() != parent:  # pragma: no cover (the forked process, come back here)
            came_back.touch()
            os._exit(99)
        raise
    assert not came_back.exists()
    monkeypatch.setattr(os, "fork", fork)
    alone, folder = _alone(tmp_path, monkeypatch, refinements, summary, records, "t")
    assert written == alone
    assert _files(tmp_path / "shared") == _files(folder)


def _children() -> set[str]:
    """This process's child processes, live or not yet waited for (Linux's /proc)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        pytest.skip("no /proc to list child processes")
    return {pid for task in tasks.iterdir() for pid in (task / "children").read_text().split()}


def test_no_fork_with_a_thread_running_few_pages_or_one_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        write_report(tmp_path / "thread" / "report.html", refinements, summary, records, "t")
    finally:
        stop.set()
        thread.join()
    few = refinements[: page_shares.MIN_PAGES - 1]
    write_report(tmp_path / "few" / "report.html", few, compute_metrics(few, METRICS), records, "t")
    monkeypatch.setattr(page_shares, "_cores", lambda _proc: 1)
    write_report(tmp_path / "one" / "report.html", refinements, summary, records, "t")
    assert set(_pids(renderers)) == {os.getpid()}
    assert forks == []


def _one_python_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's own count of threads 1, whatever other tests left running: for the checks that
    read a fake /proc and fork nothing."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})  # four cores to run on


@pytest.mark.parametrize(("tasks", "forks"), [(["7"], True), (["7", "8"], False), ([], False), (None, False)])
def test_no_fork_with_a_thread_python_does_not_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tasks: list[str] | None, forks: bool
) -> None:
    """The kernel's list of the process's threads (/proc/self/task) must hold this one alone: a BLAS
    pool or a C extension's thread, which Python's threading does not see, stops the fork; so does
    a /proc whose list cannot be read (here: empty, or none)."""
    _one_python_thread(monkeypatch)
    proc = fake_proc(tmp_path, {"": "/"}, [])  # no cgroup mounted: no quota
    shutil.rmtree(proc / "self" / "task")
    for task in tasks or []:
        (proc / "self" / "task" / task).mkdir(parents=True)
    if tasks == []:
        (proc / "self" / "task").mkdir()
    assert page_shares._forks(page_shares.MIN_PAGES, proc) is forks


@pytest.mark.parametrize(
    ("quota", "forks"),
    [("max 100000\n", True), ("200000 100000\n", True), ("100000 100000\n", False), ("0 1\n", False)],
)
def test_no_fork_where_a_quota_above_the_process_pays_for_one_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quota: str, forks: bool
) -> None:
    """Four cores to run on; a quota two cgroups above the process's own (cgroup v2), or one not
    understood (no fork: an unread quota may be one core)."""
    _one_python_thread(monkeypatch)
    mount = tmp_path / "cg"
    cgroup(mount / "a", cpu_max=quota)
    cgroup(mount / "a" / "b" / "c", cpu_max="max 100000\n")
    proc = fake_proc(tmp_path, {"": "/a/b/c"}, [v2_mount(mount)])
    assert page_shares._forks(page_shares.MIN_PAGES, proc) is forks


def test_no_fork_where_a_v1_quota_on_a_parent_pays_for_one_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_python_thread(monkeypatch)
    mount = tmp_path / "cpu"
    cgroup(mount / "docker", quota="100000\n", period="100000\n")
    cgroup(mount / "docker" / "abc", quota="-1\n", period="100000\n")
    proc = fake_proc(tmp_path, {"cpu,cpuacct": "/docker/abc"}, [v1_mount(mount)])
    assert page_shares._forks(page_shares.MIN_PAGES, proc) is False
    (mount / "docker" / "cpu.cfs_quota_us").write_text("-1\n")
    assert page_shares._forks(page_shares.MIN_PAGES, proc) is True


def test_no_fork_with_a_thread_started_outside_threading(
    tmp_path: Path, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    """A thread threading never hears of (started by _thread, as a C extension's is started
    outside Python altogether), alive while the report is written: this process writes every page."""
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    held = _thread.allocate_lock()
    held.acquire()
    started = _thread.allocate_lock()
    started.acquire()

    def waiting() -> None:
        started.release()
        held.acquire()

    _thread.start_new_thread(waiting, ())
    started.acquire()
    try:
        assert threading.active_count() == 1  # threading does not see it
        write_report(tmp_path / "report.html", refinements, summary, records, "t")
    finally:
        held.release()
    assert forks == []
    assert set(_pids(renderers)) == {os.getpid()}


class _Hung(Exception):
    pass


@contextlib.contextmanager
def _hang_guard(stopping: list[int]) -> Iterator[None]:
    """A wait that never ends (the code before the forked process had a bound) failed rather than
    hung, after a minute, and the forked processes `stopping` stopped if still running."""

    def hung(signum: int, frame: object) -> None:
        raise _Hung("the stage waited for the forked process for a minute")

    before = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 60)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        _stopped(stopping)


def _stopped(forks: list[int]) -> None:
    for child in forks:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)


@pytest.mark.parametrize("pidfd", [True, False])
def test_a_forked_process_that_hangs_is_stopped_and_its_share_written_here(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    renderers: Path,
    forks: list[int],
    pidfd: bool,
    ran_elsewhere: bool,
) -> None:
    """The forked process hangs at its first page: once this process's share is written and the
    wait's bound has passed, it is stopped and waited for (no zombie), its pages written here, the
    same bytes; with the kernel's descriptor of a process, and without (asked every few ms)."""
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    parent, page = os.getpid(), html._item_page

    def hanging_there(r: Refinement, *args: Any, **kwargs: Any) -> str:
        if os.getpid() != parent:
            time.sleep(3600)
        return page(r, *args, **kwargs)

    monkeypatch.setattr(html, "_item_page", hanging_there)
    monkeypatch.setattr(page_shares, "MIN_WAIT_S", 0.2, raising=False)
    monkeypatch.setattr(page_shares, "WAIT_FACTOR", 1, raising=False)
    if not pidfd:
        monkeypatch.setattr(os, "pidfd_open", _no_pidfd, raising=False)
    before = _children()
    (tmp_path / "shared").mkdir()
    with _hang_guard(forks):
        written = write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    assert len(forks) == 1 and _children() == before
    items = [r.item for r in refinements]
    assert _pids(renderers)[parent] == items[0::2] + items[1::2]  # its share again, here
    assert "had not ended" in caplog.text
    alone, folder = _alone(tmp_path, monkeypatch, refinements, summary, records, "t")
    assert written == alone
    assert _files(tmp_path / "shared") == _files(folder)


def _no_pidfd(pid: int, flags: int = 0) -> int:
    raise OSError(errno.ENOSYS, "Function not implemented")


def test_without_a_process_descriptor_the_forked_process_is_waited_for_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    if ran_elsewhere:
        return
    monkeypatch.setattr(os, "pidfd_open", _no_pidfd, raising=False)
    refinements, summary, records = _many()
    (tmp_path / "shared").mkdir()
    written = write_report(tmp_path / "shared" / "report.html", refinements, summary, records, "t")
    assert len(forks) == 1 and len(_pids(renderers)) == 2  # the forked process wrote its share
    alone, folder = _alone(tmp_path, monkeypatch, refinements, summary, records, "t")
    assert written == alone
    assert _files(tmp_path / "shared") == _files(folder)


def test_an_interrupt_while_waiting_stops_the_forked_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: Path, forks: list[int], ran_elsewhere: bool
) -> None:
    """An interrupt (here: the guard's, a second after this process's last page) while this
    process waits for a forked process that hangs: it is raised, and the forked process stopped and
    waited for, not left running."""
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    parent, page, last = os.getpid(), html._item_page, refinements[-1 if len(refinements) % 2 else -2].item

    def hanging_there(r: Refinement, *args: Any, **kwargs: Any) -> str:
        if os.getpid() != parent:
            time.sleep(3600)
        if r.item == last:
            signal.setitimer(signal.ITIMER_REAL, 1.0)
        return page(r, *args, **kwargs)

    monkeypatch.setattr(html, "_item_page", hanging_there)
    monkeypatch.setattr(page_shares, "MIN_WAIT_S", 3600.0, raising=False)
    before = _children()
    try:
        with pytest.raises(_Hung), _hang_guard(stopping=[]):  # what is left running is seen below
            write_report(tmp_path / "report.html", refinements, summary, records, "t")
        assert len(forks) == 1
        assert _children() == before
    finally:
        _stopped(forks)


class _Raising(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["as the wait's bound is measured", "as the warning is logged"])
def test_an_interrupt_from_this_process_share_to_the_wait_stops_the_forked_process(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    renderers: Path,
    forks: list[int],
    ran_elsewhere: bool,
    where: str,
) -> None:
    """An interrupt anywhere between this process's last page and the end of the wait for a forked
    process that hangs (here: as the clock is read for the wait's bound, right after this process's
    share; or as the warning that the forked process had not ended is logged, a write to a stderr
    that may block): raised, and the forked process stopped and waited for, not left running."""
    if ran_elsewhere:
        return
    refinements, summary, records = _many()
    parent, page, last = os.getpid(), html._item_page, refinements[-1 if len(refinements) % 2 else -2].item
    shared = {"done": False}

    def hanging_there(r: Refinement, *args: Any, **kwargs: Any) -> str:
        if os.getpid() != parent:
            time.sleep(3600)
        shared["done"] |= r.item == last
        return page(r, *args, **kwargs)

    def clock() -> float:
        if where.startswith("as the wait") and shared["done"]:
            raise KeyboardInterrupt  # as a SIGINT's handler raises it, at the next line of Python
        return time.monotonic()

    monkeypatch.setattr(html, "_item_page", hanging_there)
    monkeypatch.setattr(page_shares, "time", types.SimpleNamespace(monotonic=clock, sleep=time.sleep))
    monkeypatch.setattr(page_shares, "MIN_WAIT_S", 0.2, raising=False)
    monkeypatch.setattr(page_shares, "WAIT_FACTOR", 1, raising=False)
    raising = _Raising()
    page_shares._log.addHandler(raising)
    before = _children()
    try:
        with pytest.raises(KeyboardInterrupt), _hang_guard(stopping=[]):  # what is left is seen below
            write_report(tmp_path / "report.html", refinements, summary, records, "t")
        assert len(forks) == 1
        assert _children() == before
    finally:
        page_shares._log.removeHandler(raising)
        _stopped(forks)
