"""The embedded model file's sha256, remembered in `file-hashes.json` in the cache folder so that
each stage does not re-read 100 MB.

The sha256 is the model's identity in every cache key, so a memo that someone else could write would
let them choose the digest new calls are recorded under. The memo is therefore trusted as ssh trusts
~/.ssh (StrictModes): only where its folder and the memo itself belong to this user and neither is
writable by the group or others. Where the cache folder is not such a folder, the memo is
kept in a folder of this user's own inside it (`memo_folder`, made 0700), so that a cache folder
the group may write (made under umask 002, Debian's and Ubuntu's default for a user with a group of
their own, or a team's cache on a shared disk) does not cost a hash of the model at every stage's
start. An entry names the file by its identity (device, inode, size, mtime_ns, ctime_ns), not by
its path: replacing the file, or writing it and setting its mtime back, changes the ctime the entry
was made under, so the file is hashed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from pathlib import Path

from pipeline.llm.files import READ_FLAGS, atomic_write_chunks

MEMO_NAME = "file-hashes.json"
MAX_MEMO_BYTES = 2**20  # a memo of a few models is a few hundred bytes
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHARED = stat.S_IWGRP | stat.S_IWOTH


def file_sha256(path: Path, hash_cache_dir: Path | None) -> str:
    """sha256 of the file at `path`, from the memo in `hash_cache_dir` where that memo can be trusted."""
    with path.open("rb") as handle:
        marker = identity(os.fstat(handle.fileno()))
        folder = memo_folder(hash_cache_dir) if hash_cache_dir else None
        memo = folder / MEMO_NAME if folder else None
        known = _read_memo(memo) if memo else {}
        if marker in known:
            return known[marker]
        digest = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    known[marker] = digest.hexdigest()
    if memo:
        _write_memo(memo, known)
    return known[marker]


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


def _read_memo(memo: Path) -> dict[str, str]:
    """The memo's (identity, sha256) pairs; a memo that is a link, is not a regular file, belongs to
    someone else or may be written by them, is unreadable or of another shape is ignored."""
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
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str) and _SHA256.fullmatch(v)}


def _write_memo(memo: Path, known: dict[str, str]) -> None:
    """The memo replaced in one step (a link planted at its name is replaced, not written through),
    by a file only this user may write from its creation (mkstemp's 0600, kept): a file writable by
    others for a moment could be opened then and written later. The memo is local state beside the
    cache, which may lie on another disk."""
    atomic_write_chunks(memo, [json.dumps(known, indent=1)], local_state=True, mode=0o600)
