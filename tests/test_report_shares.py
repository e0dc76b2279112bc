"""The report's item pages written by two processes (pipeline.reports.page_shares, issue 31): the same
bytes and names as one process writes, a share the second process fails at done again by the first,
a failure raised as one process raises it, and no fork where it is not safe or cannot pay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
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
    monkeypatch.setattr(page_shares, "_cores", lambda: 2)
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
    (a server a session-wide fixture keeps): a test that needs the real fork then runs alone in a
    fresh process, rather than passing or failing on what ran before it."""
    if threading.active_count() == 1 or os.environ.get(_FRESH):
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
        one.setattr(page_shares, "_cores", lambda: 1)
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
        one.setattr(page_shares, "_cores", lambda: 1)
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
    monkeypatch.setattr(page_shares, "_cores", lambda: 1)
    write_report(tmp_path / "one" / "report.html", refinements, summary, records, "t")
    assert set(_pids(renderers)) == {os.getpid()}
    assert forks == []


@pytest.mark.parametrize(
    ("cpu_max", "cores"),
    [
        ("100000 100000\n", 1),
        ("50000 100000\n", 1),  # less than a core: still one
        ("150000 100000\n", 1),  # rounded down
        ("400000 100000\n", 4),
        ("max 100000\n", None),  # no quota
        ("", None),  # not understood: no quota
        ("100000 0\n", None),
        (None, None),  # no file (cgroup v1, none mounted)
    ],
)
def test_a_cgroup_cpu_quota_pays_for_its_whole_cores(
    tmp_path: Path, cpu_max: str | None, cores: int | None
) -> None:
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max, encoding="ascii")
    assert page_shares._quota_cores(path) == cores


def test_an_unreadable_cpu_quota_is_none(tmp_path: Path) -> None:
    assert page_shares._quota_cores(tmp_path) is None  # a folder: reading it fails


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
@pytest.mark.parametrize(
    ("cpu_max", "forked"), [("100000 100000\n", 0), ("200000 100000\n", 1), ("max 100000\n", 1)]
)
def test_no_fork_where_the_containers_quota_pays_for_one_core(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    forks: list[int],
    cpu_max: str,
    forked: int,
    ran_elsewhere: bool,
) -> None:
    """Four cores this process may run on (its affinity), as many as its cgroup's quota pays for."""
    if ran_elsewhere:
        return
    quota = tmp_path / "cpu.max"
    quota.write_text(cpu_max, encoding="ascii")
    monkeypatch.setattr(page_shares, "CPU_MAX", quota, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    refinements, summary, records = _many()
    write_report(tmp_path / "report.html", refinements, summary, records, "t")
    assert len(forks) == forked
