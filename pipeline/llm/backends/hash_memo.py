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
was made under, so the file is hashed again. An entry is made only for a file last changed more than
RACY_NS ago (git's racy-index rule): a file written again within one tick of its filesystem's clock
(a second on some, a few milliseconds on others) right after it was hashed keeps its whole identity,
and an entry made then would vouch for bytes that are gone.
(The rules are pipeline.llm.private_memo's, shared with the recordings' models memo.)
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from pipeline.llm import private_memo
from pipeline.llm.private_memo import identity, memo_folder, read_private, settled, write_private

__all__ = ["MEMO_NAME", "file_sha256", "identity", "memo_folder"]

MEMO_NAME = "file-hashes.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def file_sha256(path: Path, hash_cache_dir: Path | None) -> str:
    """sha256 of the file at `path`, from the memo in `hash_cache_dir` where that memo can be trusted."""
    began = private_memo.now_ns()  # the racy rule is judged at the read's start (private_memo.settled)
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
        after = os.fstat(handle.fileno())
    if memo and identity(after) == marker and settled(after, began):  # else hashed again next time
        known[marker] = digest.hexdigest()
        write_private(memo, known)
    return digest.hexdigest()


def _read_memo(memo: Path) -> dict[str, str]:
    """The memo's (identity, sha256) pairs (see read_private)."""
    found = read_private(memo)
    return {k: v for k, v in found.items() if isinstance(v, str) and _SHA256.fullmatch(v)}
