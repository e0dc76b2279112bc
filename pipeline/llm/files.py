"""Writing files that others read, and turning names into paths, safely.

    atomic_write(path, text)       readers see the old file or the new one, never a part
    locked(directory)              one writer at a time in a folder, across processes
    safe_name(name, what, fix)     a name that becomes a path: a plain name, or UnsafeNameError
    child(folder, name, ...)       folder / name, checked to stay inside folder

Why unique temporary names: two writers of one file (two processes recording the same stage, a
stage and `judgeloop cache merge`) that shared `calls.jsonl.tmp` renamed each other's half-written
file away, and the second rename failed with a raw FileNotFoundError. Each write now has its own
temporary file in the target's folder (so os.replace is an atomic rename on one file system), named
`.<target>.<random>.tmp`: hidden, ignored by git (.gitignore) and DVC (.dvcignore), and removed when
the write fails. A write killed outright (SIGKILL) can leave one behind; it is never read.

A name read from the command line or from a file (a stage's recordings folder, an exported stage)
becomes a path only if it is a plain name: letters, digits, `.`, `_`, `-`, not starting with a dot,
at most 100 characters; and the path it makes must resolve inside its folder (a symbolic link
pointing out is refused too).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import UnsafeNameError

TMP_SUFFIX = ".tmp"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data` in one step: through a temporary file of its own in the same folder,
    flushed to disk, then renamed over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the file from other readers of a shared folder
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on `directory` (created if missing) while the block runs: writers that
    read, change and replace a file in it take turns, across threads and processes. The lock is on
    the folder itself, so no lock file is left in it; the kernel lets go if the process dies."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def safe_name(name: str, what: str, fix: str) -> str:
    """`name` if it is a plain name that can become one path component, else UnsafeNameError."""
    if not isinstance(name, str) or _PLAIN_NAME.fullmatch(name) is None:
        raise UnsafeNameError(
            f"{what} {name!r} is not a plain name (letters, digits, '.', '_', '-'; not starting with a "
            f"dot; at most 100 characters), so it cannot name a folder or file. Fix: {fix}"
        )
    return name


def child(folder: Path, name: str, what: str, fix: str) -> Path:
    """folder / name, for a plain `name` whose path resolves inside `folder`."""
    path = folder / safe_name(name, what, fix)
    if not path.resolve().is_relative_to(folder.resolve()):
        raise UnsafeNameError(f"{what} {name!r}: {path} leads outside {folder} (a link?). Fix: {fix}")
    return path
