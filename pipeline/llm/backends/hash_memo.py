"""The embedded model file's sha256, remembered in `file-hashes.json` in the cache folder so that
each stage does not re-read 100 MB.

The sha256 is the model's identity in every cache key, so a memo that someone else could write would
let them choose the digest new calls are recorded under. The memo is therefore trusted as ssh trusts
~/.ssh (StrictModes): only where its folder and the memo itself belong to this user and neither is
writable by the group or others. Anywhere else (a cache folder shared with a group) the file is
hashed each time and no memo is written. An entry names the file by its identity (device, inode,
size, mtime_ns, ctime_ns), not by its path: replacing the file, or writing it and setting its mtime
back, changes the ctime the entry was made under, so the file is hashed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path

from pipeline.llm.files import READ_FLAGS

MEMO_NAME = "file-hashes.json"
MAX_MEMO_BYTES = 2**20  # a memo of a few models is a few hundred bytes
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHARED = stat.S_IWGRP | stat.S_IWOTH


def file_sha256(path: Path, hash_cache_dir: Path | None) -> str:
    """sha256 of the file at `path`, from the memo in `hash_cache_dir` where that memo can be trusted."""
    with path.open("rb") as handle:
        marker = identity(os.fstat(handle.fileno()))
        memo = hash_cache_dir / MEMO_NAME if hash_cache_dir and _private_folder(hash_cache_dir) else None
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


def _private_folder(folder: Path) -> bool:
    try:
        return _private(os.stat(folder))
    except OSError:
        return False


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
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str) and _SHA256.fullmatch(v)}


def _write_memo(memo: Path, known: dict[str, str]) -> None:
    """The memo replaced in one step (a link planted at its name is replaced, not written through),
    by a file only this user may write from its creation (mkstemp's 0600): a file writable by others
    for a moment could be opened then and written later."""
    fd, tmp = tempfile.mkstemp(prefix=f".{memo.name}.", suffix=".tmp", dir=memo.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(known, indent=1))
        os.replace(tmp, memo)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
