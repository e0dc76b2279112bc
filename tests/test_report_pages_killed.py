"""A report run killed while it wrote the item pages leaves them in a hidden folder of a random name
beside the pages' folder (`.report-abcd1234.tmp`); the next run removes it (pipeline.reports.pages).
Only such a folder goes: named as the writer names it, not a link, holding only item pages, and
held by no live writer (another run still writing keeps its own); everything else is left be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from pipeline.reports.pages import write_pages
from tests.conftest import ROOT

# A run whose pages stop after the first: it waits there, to be killed.
STOPPED = """
import sys, time
from pathlib import Path
from pipeline.reports.pages import write_pages

def pages(part):
    yield "item-0.html", "<p>killed 0</p>"
    Path(sys.argv[2]).write_text("writing")
    time.sleep(600)
    yield "item-1.html", "<p>killed 1</p>"

write_pages(Path(sys.argv[1]), "<p>index</p>", pages, 2)
"""


def _pages(part: tuple[int, int]) -> Iterable[tuple[str, str]]:
    at, parts = part
    for n in range(at, 2, parts):
        yield f"item-{n}.html", f"<p>new {n}</p>"


def _staged(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".report-"))


def _stopped(tmp_path: Path) -> subprocess.Popen[bytes]:
    ready = tmp_path / "ready"
    run = subprocess.Popen(
        [sys.executable, "-c", STOPPED, str(tmp_path / "out" / "report.html"), str(ready)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    for _ in range(1200):
        if ready.exists() or run.poll() is not None:
            break
        time.sleep(0.05)
    assert ready.exists(), "the stopped run did not start writing"
    return run


def test_a_killed_run_s_pages_are_removed_by_the_next_run_and_a_live_one_s_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = _stopped(tmp_path)
    try:
        [live] = _staged(out)
        write_pages(out / "report.html", "<p>index</p>", _pages, 2)  # a run beside a live one
        assert _staged(out) == [live], "a live writer's pages were removed"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert _staged(out) == [live] and (out / live / "item-0.html").is_file()  # what the kill left
    write_pages(out / "report.html", "<p>index</p>", _pages, 2)
    assert _staged(out) == []
    assert sorted(p.name for p in (out / "report").iterdir()) == ["item-0.html", "item-1.html"]


def test_only_what_the_writer_makes_is_removed(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "item-0.html").write_text("not ours", encoding="utf-8")
    (out / ".report-link0000.tmp").symlink_to(elsewhere)  # a link: not followed
    (out / ".report-notes000.tmp").mkdir()
    (out / ".report-notes000.tmp" / "notes.txt").write_text("someone's", encoding="utf-8")
    (out / ".report-linked00.tmp").mkdir()  # a page that is a link
    (out / ".report-linked00.tmp" / "item-0.html").symlink_to(elsewhere / "item-0.html")
    for other in (".report-short.tmp", ".other-abcd1234.tmp", ".report-abcd1234.tmp.keep"):
        (out / other).mkdir()
        (out / other / "item-0.html").write_text("killed", encoding="utf-8")
    (out / ".report-abcd1234.tmp").mkdir()  # a killed run's
    (out / ".report-abcd1234.tmp" / "item-0.html").write_text("killed", encoding="utf-8")
    write_pages(out / "report.html", "<p>index</p>", _pages, 2)
    assert _staged(out) == [
        ".report-abcd1234.tmp.keep",
        ".report-link0000.tmp",
        ".report-linked00.tmp",
        ".report-notes000.tmp",
        ".report-short.tmp",
    ]
    assert (out / ".other-abcd1234.tmp" / "item-0.html").is_file()
    assert (elsewhere / "item-0.html").read_text(encoding="utf-8") == "not ours"
