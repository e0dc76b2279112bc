"""What a write killed outright (SIGKILL, OOM, power) leaves beside its target, and the next writer's
sweep of it.

    locked_temporary(folder, prefix)  a new temporary file, held under an flock until it is closed
    temporary_prefix(path)            `.<target>.`, cut short to fit the folder's limit on a name
    sweep_killed_writers(folder)      a folder's temporary files that killed writes left, removed
    clear_named(folder, patterns)     the same, under the folder's own lock (a recording's), by name

Every temporary file judgeloop writes a file through (pipeline.llm.files' replacements, the
recordings' shards, the results' ordered staging in pipeline.data.jsonl) is made here, hidden, in its
target's folder (so that os.replace is an atomic rename on one file system), and its writer holds an
flock on it from its creation until after the rename. So one that a killed writer left is told from a
live writer's: the next write into that folder (its first there in a process) removes it. Until then
it is never read: DVC, `judgeloop check` and the recordings' readers leave `*.tmp` out of what they
hash.

What the sweep removes, and nothing else (each checked through the folder's descriptor, so no link is
followed):
- a name as mkstemp makes it here, `.<target>.<8 characters>.locked.tmp`, or as an older judgeloop
  made one, unlocked: `.<target>.<8 characters>.tmp` (its replacements') and
  `.<target>.<8 characters>.ordered.tmp` (its results' staging). Such an older name is also one a
  person or another tool gives a hidden file (`.notes.20261128.tmp`), which no lock tells apart, so
  one is taken only as an older judgeloop's killed write left it: mkstemp's 0600 (it was chmod-ed
  only just before its rename), this user's, and `<target>` a regular file beside it (the file it
  was replacing, which stood; a killed first write's is left, as it was before). (An older shard's
  `.calls-….tmp` is the recording's writer's to clear, under that folder's lock: clear_named.) No
  writer of this judgeloop makes an unlocked file of these names; one that an older judgeloop writes
  at the same moment, in the same folder, would be taken (its write then fails, the old file
  standing: nothing is lost but that run);
- a regular file of no other name (not a link, a folder, a pipe or a device; not a hard link);
- one no live writer holds locked: locked here (LOCK_NB), and still the file of that name (not
  renamed over its target by a writer that let go just now), it is unlinked while the lock is held.
Linux has no unlink by inode, so a file renamed into that exact random name, by someone who can write
the folder, in the microseconds between the recheck and the unlink, would go.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".tmp"
LOCKED_SUFFIX = ".locked" + TMP_SUFFIX  # a temporary file made here, locked while its writer lives
# The names a killed writer leaves (mkstemp's 8 characters): this judgeloop's, locked while it lives,
# and an older one's, unlocked (the target's name its group), taken only as such a write left it.
_KILLED_NAME = re.compile(r"\..+\.[a-z0-9_]{8}" + re.escape(LOCKED_SUFFIX), re.DOTALL)
_OLDER_NAME = re.compile(r"\.(.+)\.[a-z0-9_]{8}(?:\.ordered)?" + re.escape(TMP_SUFFIX), re.DOTALL)
_MKSTEMP_MODE = 0o600
_SHORT_NAME = 100  # a target's name of at most this many bytes fits a temporary file's on any file system
_swept: set[tuple[int, int]] = set()  # the folders (device, inode) this process has swept


def locked_temporary(folder: Path, prefix: str) -> tuple[BinaryIO, str]:
    """A new temporary file in `folder` named `prefix` + 8 characters + LOCKED_SUFFIX, opened to be
    written and read back, and its name, held under an flock until it is closed. Made, then locked,
    then asked whether its name still names it: a sweep in another process that took it between the
    two (unlocked, so a killed writer's to that sweep) removed it, and another is made."""
    while True:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=LOCKED_SUFFIX, dir=folder)
        try:
            with contextlib.suppress(OSError):  # a file system without flock: no sweep there takes one
                fcntl.flock(fd, fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(fd), os.lstat(tmp)):
                return os.fdopen(fd, "w+b"), tmp
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def temporary_prefix(path: Path) -> str:
    """`.<target>.`, the target's name cut short where the temporary file's whole name would pass the
    folder's limit on a name (NAME_MAX, 255 bytes on most file systems; the random part and the suffix
    add 21): a target whose own name a plain write can make is written, not refused with a raw
    ENAMETOOLONG about a name the user never chose. (The cut name still has a character: the sweep's
    pattern wants one.)"""
    name = path.name
    if len(os.fsencode(name)) <= _SHORT_NAME:
        return f".{name}."
    try:
        limit = os.pathconf(path.parent, "PC_NAME_MAX")
    except (OSError, ValueError):  # not asked here (no pathconf, no folder yet): the usual limit
        limit = 255
    room = max(1, limit - len(f"..{'x' * 8}{LOCKED_SUFFIX}".encode()))
    while len(name) > 1 and len(os.fsencode(name)) > room:
        name = name[:-1]  # a whole character (or an undecodable byte) at a time
    return f".{name}."


def sweep_killed_writers(folder: Path) -> list[str]:
    """Remove from `folder` the temporary files that writes killed outright left (see the module),
    the first time this process writes there. A file a process killed before this one began is found
    here; one killed later, by the next process. The names removed."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # missing, not a folder: the write itself says so
        return []
    try:
        seen = os.fstat(folder_fd)
        if (seen.st_dev, seen.st_ino) in _swept:
            return []
        _swept.add((seen.st_dev, seen.st_ino))
        try:
            names = os.listdir(folder_fd)
        except OSError:  # not listed (an I/O error of a network file system): left, the write goes on
            return []
        return [name for name in names if _swept_one(folder_fd, name)]
    finally:
        os.close(folder_fd)


def _swept_one(folder_fd: int, name: str) -> bool:
    if _KILLED_NAME.fullmatch(name):
        return removed_if_killed(folder_fd, name)
    older = _OLDER_NAME.fullmatch(name)
    return older is not None and removed_if_killed(folder_fd, name, replacing=older[1])


def _as_an_older_write_left_it(folder_fd: int, seen: os.stat_result, target: str) -> bool:
    """An unlocked temporary file as an older judgeloop's killed write left it (see the module)."""
    if stat.S_IMODE(seen.st_mode) != _MKSTEMP_MODE or seen.st_uid != os.geteuid():
        return False
    try:
        return stat.S_ISREG(os.stat(target, dir_fd=folder_fd, follow_symlinks=False).st_mode)
    except (OSError, ValueError):
        return False


def removed_if_killed(folder_fd: int, name: str, replacing: str | None = None) -> bool:
    """`name` in the folder removed if it is a regular file of no other name that no one holds locked:
    locked here, and still the file it was when looked at (not renamed over its target by a writer
    that let go just now, nor swapped for another), it is unlinked while the lock is held. `replacing`:
    an older judgeloop's unlocked name, for this target, taken only as its killed write left it."""
    try:
        seen = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if not stat.S_ISREG(seen.st_mode) or seen.st_nlink != 1:
            return False  # a link, a folder, a pipe, a device, or a file with another name: not ours
        if replacing is not None and not _as_an_older_write_left_it(folder_fd, seen, replacing):
            return False  # a person's or another tool's file of such a name
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except OSError:  # gone, or not ours to read
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a live writer's
        held = os.fstat(fd)
        if not (
            os.path.samestat(held, seen)
            and held.st_nlink == 1
            and os.path.samestat(held, os.stat(name, dir_fd=folder_fd, follow_symlinks=False))
        ):
            return False
        os.unlink(name, dir_fd=folder_fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (and the lock with it)


def clear_named(folder: Path, patterns: tuple[str, ...]) -> list[str]:
    """(under `folder`'s lock, which every writer there takes: pipeline.llm.files.locked) Remove the
    temporary files whose names match one of `patterns` (glob patterns): each a killed writer's, as
    no live one can be at work, and each removed by the sweep's rules (removed_if_killed), so that a
    link, a folder or a file of another name at such a name is left, not followed nor failed on."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []
    try:
        names = os.listdir(folder_fd)
        matched = [name for name in names if any(fnmatch.fnmatchcase(name, p) for p in patterns)]
        return [name for name in matched if removed_if_killed(folder_fd, name)]
    finally:
        os.close(folder_fd)
