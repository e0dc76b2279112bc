"""Where the report's pages go: the index (e.g. report.html) and beside it a folder of one page per item
(report/item-301.html), linked relatively, so the index and the folder can be zipped, mailed and
opened from the file system.

Item ids come from the names of the user's files, so a page's name is made from the id, never the id
itself: letters, digits, `-` and `_` only, short enough for any file system, distinct even where
the file system ignores case, and never a path out of the folder. The folder is written anew each
time, so the page of an item that is gone does not linger: in a hidden folder beside it, then put in
its place by renames that leave whole pages (the old or the new) under the folder's name or its aside
name at every step, so a run killed halfway loses nothing and the next run sets it right (_swap). A
run killed while it wrote the new pages leaves its hidden folder (`.report-abcd1234.tmp`); the next
run removes it (_clear_killed), told from a live writer's by the lock each writer holds on its own.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.llm.files import TMP_SUFFIX, atomic_write, folder_to_write, locked
from pipeline.reports.page_shares import Pages, write_shares

# Long enough to recognise the id, short enough that the whole name stays far below the 255 bytes file
# systems allow.
_MAX_SLUG = 64
PAGE_PREFIX = "item-"


def slug(text: str) -> str:
    """Letters, digits, `-` and `_` only: safe in a file name and in an HTML id."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


class PageStems:
    """page_stems one item at a time (`stem(item)` in the items' order), for a reader that streams
    its items: what it keeps is the stems taken, not the items."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def stem(self, item: str) -> str:
        base = slug(item)[:_MAX_SLUG].rstrip("-")
        if base != item:
            base = f"{base}-{hashlib.sha256(item.encode()).hexdigest()[:8]}"
        stem, n = f"{PAGE_PREFIX}{base}", 1
        while stem.casefold() in self._taken:
            stem, n = f"{PAGE_PREFIX}{base}-{n}", n + 1
        self._taken.add(stem.casefold())
        return stem


def page_stems(items: Sequence[str]) -> list[str]:
    """One file name stem per item, in order: `item-301` for an id that is already safe; an id that
    had to be changed (other characters, too long) gets its own hash, so distinct ids stay apart
    whatever their order; a counter settles what still collides, ignoring case."""
    stems = PageStems()
    return [stems.stem(item) for item in items]


def pages_folder(index_name: str) -> str:
    """The item pages' folder beside an index page: `report` for report.html."""
    index = Path(index_name)
    return index.stem if index.suffix.lower() in (".html", ".htm") else f"{index.name}-pages"


def _ours(folder: Path) -> bool:
    return all(
        p.is_file() and p.name.startswith(PAGE_PREFIX) and p.suffix == ".html" for p in folder.iterdir()
    )


def replaced_name(folder: Path) -> Path:
    """Where the old pages stand while the new ones are put in place: hidden, and a `.tmp` name
    (ignored by git and DVC), beside the folder."""
    return folder.with_name(f".{folder.name}.replaced{TMP_SUFFIX}")


def _settle(folder: Path) -> None:
    """A swap killed halfway, set right: old pages set aside and no folder in their place (killed
    between the two renames) are put back; old pages set aside beside the new folder (killed before
    they were removed) are removed. What is aside but is not item pages is someone else's: refused."""
    aside = replaced_name(folder)
    if not os.path.lexists(aside):
        return
    if aside.is_symlink() or not aside.is_dir() or not _ours(aside):
        raise ConfigError(
            f"{aside} holds more than the report's item pages; the report sets its old pages aside "
            f"there while it writes new ones. Fix: move it away"
        )
    if os.path.lexists(folder):
        shutil.rmtree(aside)
    else:
        aside.rename(folder)


def _swap(staging: Path, folder: Path) -> None:
    """`staging` put at `folder`'s name, the old folder there removed, with whole pages under one of
    the two names at every step: the old folder is renamed aside, the new one renamed in, and only
    then is the old one removed (a kill between the steps is set right by the next run's _settle).
    (An exchange of the two in one rename, Linux's renameat2, is not in Python's library.)"""
    aside = replaced_name(folder)
    if os.path.lexists(folder):
        folder.rename(aside)
    staging.rename(folder)
    if os.path.lexists(aside):
        shutil.rmtree(aside)


def write_pages(index: Path, index_html: str, pages: Pages, count: int) -> Path:
    """Write the index at `index` and exactly the `count` item pages `pages` gives ((file name, page) of
    a share of the items, each written as it comes, so that a caller may render them one at a time; by
    two processes where that pays, pipeline.reports.page_shares) in its folder; returns the folder. A
    folder there that holds anything but item pages is someone else's: it is left alone."""
    folder = index.parent / pages_folder(index.name)
    folder_to_write(folder.parent, index)  # never through a link out of the project
    with locked(folder.parent):  # one writer's swap at a time, across processes
        _settle(folder)
        _refuse_others(folder)
        _clear_killed(folder)
        # Written aside first, so an interrupted run leaves the old pages whole, not a mix.
        staging, hold = _staging(folder)
    try:
        _write_and_swap(staging, folder, pages, count)
    finally:
        os.close(hold)
    atomic_write(index, index_html)
    return folder


def _write_and_swap(staging: Path, folder: Path, pages: Pages, count: int) -> None:
    try:
        write_shares(staging, pages, count)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # a page that failed to render leaves nothing aside
        raise
    try:
        with locked(folder.parent):
            _settle(folder)  # (another run's swap, killed while this one wrote)
            _refuse_others(folder)  # (what was put there while this one wrote)
            _swap(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # (gone already where it was renamed in)
        raise


def _staging(folder: Path) -> tuple[Path, int]:
    """(under the parent's lock, so that no other run sees it unlocked) A new hidden folder beside
    `folder` for the new pages, and a descriptor that holds a lock on it while they are written: the
    kernel lets go when it is closed or the process (and the forked page writer) dies."""
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", suffix=TMP_SUFFIX, dir=folder.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the pages from other readers of a shared folder
    hold = os.open(staging, os.O_RDONLY)
    fcntl.flock(hold, fcntl.LOCK_EX)
    return staging, hold


def _clear_killed(folder: Path) -> None:
    """(under the parent's lock) The hidden folders that runs killed while they wrote left beside
    `folder`: only names as _staging makes them (mkdtemp's 8 characters), each a folder, not a link,
    holding only item pages as regular files, and locked by no live writer. Anything else is left be."""
    made = re.compile(rf"\.{re.escape(folder.name)}-[a-z0-9_]{{8}}{re.escape(TMP_SUFFIX)}")
    for name in os.listdir(folder.parent):
        if made.fullmatch(name):
            _remove_killed(folder.parent / name)


def _remove_killed(staging: Path) -> None:
    """Its pages and the folder removed through its descriptor, so that no link is followed."""
    try:
        fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # a link, a file, gone
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a live writer holds it
        names = os.listdir(fd)
        if not all(_a_page(name, os.lstat(name, dir_fd=fd)) for name in names):
            return
        for name in names:
            os.unlink(name, dir_fd=fd)
        os.rmdir(staging)
    except OSError:
        return
    finally:
        os.close(fd)


def _a_page(name: str, status: os.stat_result) -> bool:
    return name.startswith(PAGE_PREFIX) and name.endswith(".html") and stat.S_ISREG(status.st_mode)


def _refuse_others(folder: Path) -> None:
    # A link there (git keeps links) is not the report's folder, whatever it leads to, or whether it leads.
    if folder.is_symlink() or (folder.exists() and not (folder.is_dir() and _ours(folder))):
        raise ConfigError(
            f"{folder} exists and holds more than the report's item pages; the report writes its item "
            f"pages there and would replace it. Fix: move it away, or write the report elsewhere "
            f"(judgeloop report -o OTHER.html)"
        )
