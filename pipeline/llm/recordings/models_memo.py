"""A stage's recording read only for its models, answered from a private memo keyed by its files'
identities, so that a replay's stage process does not hash every other stage's recording and parse
its call lines again for the model's identity (issue 33).

Every stage process asks every stage's recording which models made its calls
(pipeline.llm.recordings.recorded_models). For content the verified memo holds, that was every file
hashed (sha256, and md5 for the pin) and every call line's model parsed (folder_scan.verified_models):
at 10k calls, about 14 us a call of a warm replay, the same bytes hashed by each of the three stages.
Here, once verified_models has answered for a folder, its answer is remembered with what it was
checked against: each file's sha256 and md5, keyed by the folder's path and each file's identity
(device, inode, size, mtime_ns, ctime_ns). A later read lists the folder (no file opened) and, where
an entry names exactly that listing, checks what it stated as before: the md5s against the folder's
pin in dvc.lock, the sha256s' digest against the verified memo (its HMAC under this user's key).
The models are then the entry's; anything else (a file added, replaced, written again, a link, no
entry, an entry of another shape) is read by verified_models as before, and remembered again.

The memo is trusted as the embedded model's hash memo is (pipeline.llm.backends.hash_memo, whose
reader and writer it uses): only in a folder of this user's own that no one else may write, a file
of theirs no one else may write, never through a link; and an entry is made only from the files as
they were read (their status after their last read equal to the listing taken before), none of
them changed within RACY_NS of now, git's racy-index rule: a file written again within its
filesystem clock's tick keeps its identity, so a recent one is never vouched for. What it spares
is reading; what it vouches for is no more than the file hash memo would: the bytes of a file with
that identity. A recording's own stage reads it in full as before (folder_scan.scan_folder), so
every line served is still read back against the digest of the bytes hashed.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import orjson

from pipeline.errors import LockMismatchError
from pipeline.llm.private_memo import identity, memo_folder, read_private, settled, write_private
from pipeline.llm.recordings.folder_scan import Models, verified_models
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.verified_memo import VerifiedMemo, files_digest, verifier

MEMO_NAME = "recording-models.json"
MAX_ENTRIES = 32  # a few experiments' stages; the oldest entry goes first
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MD5 = re.compile(r"(?:[0-9a-f]{32})?")  # "": read unpinned


def models(directory: Path, pins: Pins | None, memo: VerifiedMemo) -> Models | None:
    """verified_models(directory, pins, memo), answered from the memo where it holds the folder as it
    is now (see the module), and remembered where it does not."""
    folder = memo_folder(memo.folder) if memo.folder is not None else None
    listing = _listing(directory) if folder is not None else None
    if folder is None or listing is None:
        return verified_models(directory, pins, memo)
    path, key = folder / MEMO_NAME, _key(directory, listing)
    found = _remembered(read_private(path).get(key), directory, listing, pins, memo)
    if found is not None:
        return found

    def hashed(
        hashes: list[tuple[str, str]], md5s: dict[str, str], opened: dict[str, os.stat_result], found: Models
    ) -> None:
        as_listed = opened.keys() == listing.keys() == md5s.keys()
        if not as_listed or any(identity(s) != listing[n] or not settled(s) for n, s in opened.items()):
            return  # changed since listed, or too recently to be remembered by its identity
        if memo.writes:
            entry: dict[str, object] = {"hashes": hashes, "md5s": md5s, "models": sorted(found)}
            _remember(path, key, entry)

    return verified_models(directory, pins, memo, hashed)


def _listing(directory: Path) -> dict[str, str] | None:
    """Each file of the folder by name, its identity (lstat); None where the folder is a link or holds
    anything but plain files (read by verified_models, which refuses or hashes them)."""
    if directory.is_symlink():
        return None
    found: dict[str, str] = {}
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    return None
                found[entry.name] = identity(entry.stat(follow_symlinks=False))
    except OSError:
        return None
    return found or None


def _key(directory: Path, listing: dict[str, str]) -> str:
    body = orjson.dumps([verifier(), str(directory.resolve()), sorted(listing.items())])
    return hashlib.sha256(body).hexdigest()


def _remembered(
    entry: object, directory: Path, listing: dict[str, str], pins: Pins | None, memo: VerifiedMemo
) -> Models | None:
    """The entry's models, where it is of the memo's shape, its md5s match the folder's pin and the
    verified memo holds its files' digest; None otherwise."""
    parsed = _parsed(entry)
    if parsed is None:
        return None
    hashes, md5s, found = parsed
    if md5s.keys() != listing.keys():
        return None
    if pins is not None and pins.needs_hashes(directory):
        if not all(md5s.values()):
            return None  # remembered unpinned: read, and remembered with its md5s
        try:
            pins.check_hashes(directory, md5s)
        except LockMismatchError:
            return None  # verified_models then finds it does not match, and the reader says why
    return found if memo.holds_digest(files_digest(hashes)) is None else None


def _parsed(entry: object) -> tuple[list[tuple[str, str]], dict[str, str], Models] | None:
    if not isinstance(entry, dict):
        return None
    hashes, md5s, found = entry.get("hashes"), entry.get("md5s"), entry.get("models")
    if not (isinstance(hashes, list) and isinstance(md5s, dict) and isinstance(found, list)):
        return None
    pairs = [(h[0], h[1]) for h in hashes if _strings(h, 2) and _SHA256.fullmatch(h[1])]
    triples = frozenset((m[0], m[1], m[2]) for m in found if _strings(m, 3))
    if len(pairs) != len(hashes) or len(triples) != len(found):
        return None
    if not all(isinstance(v, str) and _MD5.fullmatch(v) for v in md5s.values()):
        return None
    return pairs, {str(k): str(v) for k, v in md5s.items()}, triples


def _strings(value: object, count: int) -> bool:
    return isinstance(value, list) and len(value) == count and all(isinstance(x, str) for x in value)


def _remember(path: Path, key: str, entry: dict[str, object]) -> None:
    """The entry added (the oldest let go of past MAX_ENTRIES); a memo that cannot be written, a
    read-only folder, say, is no error: the next read reads the recording again."""
    known = read_private(path)
    known.pop(key, None)
    known[key] = entry
    for stale in list(known)[: max(0, len(known) - MAX_ENTRIES)]:
        del known[stale]
    try:
        write_private(path, known)
    except OSError:
        return
