"""Local state that only this user may have written: a JSON memo kept in a folder of this user's own,
trusted as ssh trusts ~/.ssh (StrictModes), and keyed by a file's identity, never its path.

Used by the embedded model's hash memo (pipeline.llm.backends.hash_memo: the model file's sha256)
and the recordings' models memo (pipeline.llm.recordings.models_memo: what a recording's files hash
to). A memo is believed only where its folder and the memo itself belong to this user and neither is
writable by the group or others (`memo_folder` makes a folder of this user's own, 0700, inside a
folder others may write). A file is named by its identity (device, inode, size, mtime_ns,
ctime_ns): replacing the file, or writing it and setting its mtime back, changes the ctime an entry
was made under. And an entry is made only for a file last changed more than RACY_NS ago (`settled`,
git's racy-index rule): a file written again within one tick of its filesystem's clock (a second on
some, a few milliseconds on others) right after it was hashed keeps its whole identity, and an entry
made then would vouch for bytes that are gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from pipeline.llm.files import READ_FLAGS, atomic_write_chunks

MAX_MEMO_BYTES = 2**20  # a memo of a few models is a few hundred bytes, of a few recordings some kB
_SHARED = stat.S_IWGRP | stat.S_IWOTH
RACY_NS = 2 * 10**9  # a file changed this recently may change again without its identity moving


def now_ns() -> int:
    """The clock an entry's age is read against (a function, so that tests can move it)."""
    return time.time_ns()


def settled(status: os.stat_result, began: int) -> bool:
    """Whether a file with this status, read from `began` on (now_ns() taken before the file was
    listed or opened), may be remembered by its identity: neither its mtime nor its ctime within
    RACY_NS before `began` (nor after it: a clock set back, or a time set ahead by hand). Judged at
    the read's start, not its end: a write in the same tick as the last change may come while the
    file is read, and a read that outlasts RACY_NS (a model of several GB, a recording of a million
    calls) would otherwise make the file look settled."""
    return began - max(status.st_mtime_ns, status.st_ctime_ns) >= RACY_NS


def identity(status: os.stat_result) -> str:
    """The memo's key for a file: what changes when it is replaced or written."""
    fields = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
    return "|".join(map(str, fields))


def memo_folder(cache: Path) -> Path | None:
    """Where the memo is kept: `cache` where only this user may write it; else a folder of this
    user's own in it, made 0700 (what stands at its name is used only where it is such a folder, not
    a link); None where there is neither, and the file is hashed each time."""
    if _private_folder(cache):
        return cache
    geteuid = getattr(os, "geteuid", None)
    own = cache / f".file-hashes-{geteuid() if geteuid else 'user'}"
    with contextlib.suppress(OSError):  # there already, or the cache folder is not ours to write
        os.mkdir(own, 0o700)
    return own if _private_folder(own, follow=False) else None


def _private_folder(folder: Path, *, follow: bool = True) -> bool:
    try:
        status = os.stat(folder, follow_symlinks=follow)
    except OSError:
        return False
    return stat.S_ISDIR(status.st_mode) and _private(status)


def _private(status: os.stat_result) -> bool:
    """Whether this user owns it and no one else may write it."""
    geteuid = getattr(os, "geteuid", None)  # not on Windows, which has no owner bits to check
    owned = geteuid is None or status.st_uid == geteuid()
    return owned and not status.st_mode & _SHARED


def read_private(memo: Path) -> dict[str, object]:
    """A private memo's JSON object; a memo that is a link, is not a regular file, belongs to someone
    else or may be written by them, is unreadable or of another shape is ignored ({})."""
    try:
        fd = os.open(memo, READ_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or not _private(status):
            return {}
        data = file.read(MAX_MEMO_BYTES + 1)
    try:
        found = json.loads(data) if len(data) <= MAX_MEMO_BYTES else None
    except (ValueError, RecursionError):  # bad JSON, or nested past json's recursion
        return {}
    return found if isinstance(found, dict) else {}


def write_private(memo: Path, known: Mapping[str, object]) -> None:
    """The memo replaced in one step (a link planted at its name is replaced, not written through),
    by a file only this user may write from its creation (mkstemp's 0600, kept): a file writable by
    others for a moment could be opened then and written later. The memo is local state beside the
    cache, which may lie on another disk."""
    atomic_write_chunks(memo, [json.dumps(known, indent=1)], local_state=True, mode=0o600)
