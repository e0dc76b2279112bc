"""The item pages' folder replaced with whole pages under a name a later run recognises at every step
(pipeline.reports.pages): a run killed between the steps of the swap leaves the old pages whole, and
the next run sets right what it left (writers-red: the old folder was removed before the new one was
renamed in, so a kill there left neither, the new pages only in a hidden folder of a random name)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.reports.pages import write_pages

# Where the old pages stand while the new ones are put in place: what the next run looks for.
ASIDE = ".report.replaced.tmp"


class Killed(BaseException):
    """The run ends here, as a kill would end it (nothing after runs but the `finally`s)."""


def _pages(version: str, count: int = 3) -> Callable[[tuple[int, int]], Iterable[tuple[str, str]]]:
    def share(part: tuple[int, int]) -> Iterable[tuple[str, str]]:
        at, parts = part
        for n in range(at, count, parts):
            yield f"item-{n}.html", f"<p>{version} {n}</p>"

    return share


def _whole(folder: Path, version: str, count: int = 3) -> bool:
    """`folder` holds exactly the `count` pages of `version`."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    found = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()}
    return found == {f"item-{n}.html": f"<p>{version} {n}</p>" for n in range(count)}


def _write(tmp_path: Path, version: str) -> Path:
    return write_pages(tmp_path / "report.html", f"<p>{version}</p>", _pages(version), 3)


def _steps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kill_at: int) -> list[str]:
    """Every rename and removal of a folder the swap makes is a step: before each, whole pages (the
    old ones or the new) stand at the folder's name or at its aside name; the run is killed before
    step `kill_at`. Returns the steps taken."""
    taken: list[str] = []
    rename, rmtree = Path.rename, shutil.rmtree
    folder, aside = tmp_path / "report", tmp_path / ASIDE

    def step(what: str) -> None:
        held = [f for f in (folder, aside) if _whole(f, "old") or _whole(f, "new")]
        there = sorted(p.name for p in tmp_path.iterdir())
        assert held, f"before {what}: no whole pages at {folder.name} or {ASIDE}: {there}"
        if len(taken) == kill_at:
            raise Killed(what)
        taken.append(what)

    def renamed(self: Path, target: Any) -> Path:
        step(f"rename {self.name} -> {Path(target).name}")
        return rename(self, target)

    def removed(path: Any, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("ignore_errors"):
            step(f"remove {Path(path).name}")
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(Path, "rename", renamed)
    monkeypatch.setattr(shutil, "rmtree", removed)
    return taken


@pytest.mark.parametrize("kill_at", [0, 1, 2])
def test_a_run_killed_between_the_swap_s_steps_leaves_whole_pages_the_next_run_recognises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_at: int
) -> None:
    _write(tmp_path, "old")
    with monkeypatch.context() as patched:
        taken = _steps(patched, tmp_path, kill_at)
        try:
            _write(tmp_path, "new")
        except Killed:
            pass
        else:
            assert len(taken) <= kill_at  # a swap of fewer steps: never killed, finished whole
    # A next run that fails before its own swap (a page that fails to render) leaves whole pages at
    # the folder's name: the old ones, or the new ones where the kill came after they were in place.
    with pytest.raises(ValueError, match="no page"):
        write_pages(tmp_path / "report.html", "", _failing, 3)
    folder = tmp_path / "report"
    assert _whole(folder, "old") or _whole(folder, "new"), sorted(p.name for p in tmp_path.iterdir())
    assert not (tmp_path / ASIDE).exists()
    # And a run that succeeds writes its pages whole, nothing of the killed run's swap left beside.
    _write(tmp_path, "newer")
    assert _whole(folder, "newer")
    left = {p.name for p in tmp_path.iterdir()} - {"report", "report.html"}
    assert all(name.startswith(".report-") for name in left), left  # at most the killed run's own staging


def _failing(part: tuple[int, int]) -> Iterable[tuple[str, str]]:
    raise ValueError("no page")
    yield ("", "")  # pragma: no cover (a generator that fails at its first page)


def test_a_swap_takes_whole_pages_from_old_to_new_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "old")
    with monkeypatch.context() as patched:
        taken = _steps(patched, tmp_path, kill_at=99)
        _write(tmp_path, "new")
    assert len(taken) == 3, taken  # the old folder aside, the new one in, the old one removed
    assert taken[0] == f"rename report -> {ASIDE}" and taken[2] == f"remove {ASIDE}"
    assert taken[1].startswith("rename .report-") and taken[1].endswith(" -> report")
    assert _whole(tmp_path / "report", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "report.html"]


def test_what_is_not_item_pages_at_the_aside_name_is_refused_and_left(tmp_path: Path) -> None:
    _write(tmp_path, "old")
    mine = tmp_path / ASIDE
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"report\.replaced\.tmp holds more than the report's item pages"):
        _write(tmp_path, "new")
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert _whole(tmp_path / "report", "old")


def test_what_is_put_in_the_folder_while_its_pages_are_written_is_refused_and_left(tmp_path: Path) -> None:
    """The folder is looked at before its new pages are written, which takes a while (the pages of
    thousands of items): a file someone puts in it meanwhile makes it someone else's, and the swap
    then leaves it as it is (review7: the swap set it aside and removed it, the user's file with it)."""
    _write(tmp_path, "old")
    notes = tmp_path / "report" / "notes.txt"

    def pages(part: tuple[int, int]) -> Iterable[tuple[str, str]]:
        notes.write_text("mine", encoding="utf-8")  # while the new pages are written
        yield from _pages("new")(part)

    with pytest.raises(ConfigError, match=r"report exists and holds more than the report's item pages"):
        write_pages(tmp_path / "report.html", "<p>new</p>", pages, 3)
    assert notes.read_text(encoding="utf-8") == "mine"
    assert {p.name for p in (tmp_path / "report").iterdir()} == {
        "notes.txt",
        *(f"item-{n}.html" for n in range(3)),
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "report.html"]  # no staging left
