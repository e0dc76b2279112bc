"""What a failing cache database means, said with its path and the fix, never as a raw sqlite3
traceback.

The local cache (pipeline.llm.cache.store) is a SQLite file that a person may have made read-only, that
may sit on a disk that fills up, or that may be damaged (a copy cut short, a crash of the disk, a
file that is no database at all). Each of these reaches us as sqlite3.Error or OSError from deep in
diskcache; here it becomes a CacheError (CorruptRecordError for a damaged file) that names the file
and says what to do.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

from pipeline.errors import CacheError, CorruptRecordError

R = TypeVar("R")

ELSEWHERE = "or point cache.dir (JUDGELOOP_CACHE_DIR) at another folder"
REBUILD = (
    "a run starts a new one, and takes every recorded call from the recordings (`judgeloop cache seed` "
    "refills it now)"
)


def database_error(path: Path, why: str, errno_: int | None = None) -> CacheError:
    """The CacheError for a failure of the cache database at `path` (sqlite's words in `why`)."""
    said = why.lower()
    folder = path.parent
    if "readonly" in said or "read-only" in said or errno_ in (errno.EACCES, errno.EPERM, errno.EROFS):
        return CacheError(
            f"{path}: the local cache cannot be written ({why}): the file or its folder is read-only. "
            f"Fix: make it writable (chmod -R u+w {folder}), {ELSEWHERE}, or run with "
            "JUDGELOOP_CACHE_MODE=off to keep nothing locally (the recordings are still written)."
        )
    if "full" in said or errno_ in (errno.ENOSPC, errno.EDQUOT):
        return CacheError(
            f"{path}: the disk holding the local cache is full ({why}). Fix: free space there, "
            f"{ELSEWHERE} on another disk; every call stored before this one is kept."
        )
    if "locked" in said or "busy" in said:
        return CacheError(
            f"{path}: the local cache stayed locked by another process ({why}). Fix: let the other run "
            f"finish, {ELSEWHERE} for this one."
        )
    return CorruptRecordError(
        f"{path}: the local cache database is damaged ({why}). Fix: move the folder away "
        f"(mv {folder} {folder}.damaged); {REBUILD}."
    )


@contextmanager
def database_errors(path: Path) -> Iterator[None]:
    """Turn the sqlite3 and disk errors of the block into the CacheError saying what to do."""
    try:
        yield
    except sqlite3.Error as exc:
        raise database_error(path, str(exc)) from exc
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO):
            raise
        raise database_error(path, exc.strerror or str(exc), exc.errno) from exc


def guarded(method: Callable[..., R]) -> Callable[..., R]:
    """A CallStore method whose database errors are said with the path and the fix."""

    @wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> R:
        with database_errors(self.db_path):
            return method(self, *args, **kwargs)

    return call
