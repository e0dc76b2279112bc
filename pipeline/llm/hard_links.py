"""A file written in place must have no other name.

A folder's inside-the-folder checks (no symbolic link in it, /proc/self/fd naming the file opened)
see names, not files: a hard link planted in a folder judgeloop writes is a name inside it for a
file that other names share, anywhere on the same file system. A file replaced by a rename (every
output, recording and memo: pipeline.llm.files.atomic_write) is safe, since the rename replaces the
name and leaves the other file as it was; a file opened and written where it stands would change the
other file too. Those writers ask refuse_hard_link first: a SQLite database and its -wal and -shm
files (the cache), and a recording folder's journal, appended to.

DVC's `hardlink` cache type (cache.recordings_store: dvc) makes every recording's file another name
of the file in DVC's cache, shared by every checkout linked to it: none of those is refused for its
other name, since none is written in place (each is replaced by a rename, so DVC's file is left as
it was; tests/test_recordings_dvc_links.py), and the journal, a temporary file DVC ignores, is never
one of them. The same holds for the `symlink` type's links (pipeline.llm.recordings.dvc_links).
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.errors import UnsafeNameError
from pipeline.llm.files import in_command, named


def refuse_hard_link(path: Path, status: os.stat_result, what: str) -> None:
    """UnsafeNameError where `status` (of `path`, from lstat or the descriptor to be written) is a
    file with more than one name: writing it would change the file at its other names too."""
    if status.st_nlink > 1:
        # The fix keeps what the file holds: a project copied with `cp -al` links its cache database,
        # whose finished calls (and a stopped run's -wal rows) removing would lose.
        name, own = in_command(path), in_command(f"{path}.own")
        raise UnsafeNameError(
            f"{named(path)}: {what} has {status.st_nlink - 1} other name(s) (a hard link), so writing it "
            "where it stands would change another file. It is refused before anything is written. Fix: "
            f"give it a file of its own, keeping what it holds (cp -p -- {name} {own} && mv -- {own} "
            f"{name}), or remove it (rm -- {name}) where someone else put the other name there."
        )


def refuse_hard_links_at(folder: Path, names: tuple[str, ...], what: str) -> None:
    """refuse_hard_link for each of `names` in `folder` that exists (links are not followed)."""
    for name in names:
        try:
            status = os.lstat(folder / name)
        except FileNotFoundError:
            continue
        refuse_hard_link(folder / name, status, what)
