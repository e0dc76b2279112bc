"""A stage's recording read only for its models, answered from a private memo of its files' hashes
keyed by their identities, so that a replay's stage process does not hash every other stage's
recording and parse its call lines again for the model's identity (issue 33).

Every stage process asks every stage's recording which models made its calls
(pipeline.llm.recordings.recorded_models). For content the verified memo holds, that was every file
hashed (sha256, and md5 for the pin) and every call line's model parsed (folder_scan.verified_models):
at 10k calls, about 14 us a call of a warm replay, the same bytes hashed by each of the three stages.
Here, once verified_models has answered for a folder, the memo keeps two things: each file's sha256
and md5 by the file's identity (device, inode, size, mtime_ns, ctime_ns), and the models by the
content (the files' names and sha256s), with the order the scan hashed them in. A later read lists
the folder (lstat, no file opened), takes each file's hashes from the memo by its identity (a file
it does not know, a manifest written again, say, is hashed now), and, where the memo knows that
content, checks what it states as before: the md5s against the folder's pin in dvc.lock, the
sha256s' digest against the verified memo (its HMAC under this user's key). The models are then the
memo's; anything else (no entry, an entry of another shape, a link, a folder, a file that changed
while read) is read by verified_models as before, and remembered.

The memo is trusted as the embedded model's hash memo is (pipeline.llm.private_memo): only in a
folder of this user's own that no one else may write, a file of theirs no one else may write, never
through a link; and a file is remembered only as read (its status after its last read equal to the
listing taken before) and only where it did not change within RACY_NS of now, git's racy-index rule:
a file written again within its filesystem clock's tick keeps its identity, so a recent one is never
vouched for. What it vouches for is no more than the bytes of a file with that identity. A
recording's own stage reads it in full as before (folder_scan.scan_folder), so every line served is
still read back against the digest of the bytes hashed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from pathlib import Path

import orjson

from pipeline.errors import LockMismatchError
from pipeline.llm import private_memo
from pipeline.llm.files import READ_FLAGS
from pipeline.llm.private_memo import identity, memo_folder, read_private, settled, write_private
from pipeline.llm.recordings.folder_scan import Models, verified_models
from pipeline.llm.recordings.offsets import READ_BUFFER
from pipeline.llm.recordings.pins import MAX_FILE_BYTES, Pins
from pipeline.llm.recordings.verified_memo import VerifiedMemo, files_digest, seal, verifier

MEMO_NAME = "recording-models.json"
MAX_FILES = 1024  # files by identity; the oldest go first
MAX_CONTENTS = 64  # recordings' models by content
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HASHES = re.compile(r"[0-9a-f]{64} (?:[0-9a-f]{32})?")  # sha256, md5 ("": read unpinned)


class _Changed(Exception):
    """A file not as listed (replaced, written, not a plain file) while it was hashed here."""


def models(directory: Path, pins: Pins | None, memo: VerifiedMemo) -> Models | None:
    """verified_models(directory, pins, memo), answered from the memo where it holds the folder's
    files and their content as they are now (see the module), and remembered where it does not."""
    folder = memo_folder(memo.folder) if memo.folder is not None else None
    began = private_memo.now_ns()  # before the listing: the racy rule is judged at the read's start (settled)
    listing = _listing(directory) if folder is not None else None
    if folder is None or listing is None:
        return verified_models(directory, pins, memo)
    path = folder / MEMO_NAME
    known = read_private(path)
    files, contents = _sealed_files(known), _sealed_contents(known)
    pinned = pins is not None and pins.needs_hashes(directory)
    hashed: dict[str, tuple[str, bool]] = {}  # by name: "sha256 md5", and whether it may be remembered
    try:
        found = _remembered(directory, listing, files, contents, hashed, pins if pinned else None, memo)
    except (OSError, _Changed):
        found = None
    if found is not None:
        settled_now = {listing[name]: value for name, (value, steady) in hashed.items() if steady}
        if settled_now and memo.writes:
            _remember(path, settled_now, {})
        return found

    def read(
        hashes: list[tuple[str, str]], md5s: dict[str, str], opened: dict[str, os.stat_result], found: Models
    ) -> None:
        if memo.writes:
            _remember_read(path, directory, (listing, began), hashes, md5s, opened, found)

    return verified_models(directory, pins, memo, read)


def _remember_read(
    path: Path,
    directory: Path,
    listed: tuple[dict[str, str], int],
    hashes: list[tuple[str, str]],
    md5s: dict[str, str],
    opened: dict[str, os.stat_result],
    found: Models,
) -> None:
    """What verified_models read remembered, where each file it read is the file listed, unchanged
    and settled; the folder's other files (a sharded recording's item tables, which only the pin
    covers) hashed here, under the same rule. `listed`: the listing and the clock before it."""
    listing, began = listed
    order = [name for name, _ in hashes]
    if opened.keys() != md5s.keys() or set(order) != opened.keys() or not opened.keys() <= listing.keys():
        return
    if any(identity(s) != listing[n] or not settled(s, began) for n, s in opened.items()):
        return  # changed since listed, or too recently to be remembered by its identity
    by_name = {name: f"{sha} {md5s[name]}" for name, sha in hashes}
    try:
        for name in listing.keys() - opened.keys():
            value, steady = _hashes(directory / name, listing[name])
            if not steady:
                return
            by_name[name] = value
    except (OSError, _Changed):
        return
    sha256s = {name: value.split(" ")[0] for name, value in by_name.items()}
    content: dict[str, object] = {"order": order, "models": sorted(found)}
    _remember(path, {listing[n]: value for n, value in by_name.items()}, {_content_key(sha256s): content})


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


def _section(known: dict[str, object], name: str) -> dict[str, object]:
    section = known.get(name)
    return section if isinstance(section, dict) else {}


def _content_key(sha256s: dict[str, str]) -> str:
    return hashlib.sha256(orjson.dumps([verifier(), sorted(sha256s.items())])).hexdigest()


def _remembered(
    directory: Path,
    listing: dict[str, str],
    files: dict[str, object],
    contents: dict[str, object],
    hashed: dict[str, tuple[str, bool]],
    pins: Pins | None,
    memo: VerifiedMemo,
) -> Models | None:
    """The models the memo states for the folder's content, where its md5s match the folder's pin
    (`pins`: pinned) and the verified memo holds its files' digest; None otherwise. Each file's
    hashes from the memo by its identity, or (`hashed`, by name) read now."""
    unknown = [marker for marker in listing.values() if not _known(files.get(marker), pins)]
    if sum(map(_size, unknown)) * 2 > sum(map(_size, listing.values())):
        return None  # mostly new to the memo: read once, by verified_models, not hashed here first
    sha256s, md5s = {}, {}
    for name, marker in listing.items():
        value = files.get(marker)
        if not (isinstance(value, str) and _known(value, pins)):
            hashed[name] = _hashes(directory / name, marker)
            value = hashed[name][0]
        sha256s[name], md5s[name] = value.split(" ")
    entry = _content(contents.get(_content_key(sha256s)), listing)
    if entry is None:
        return None
    order, found = entry
    if pins is not None:
        try:
            pins.check_hashes(directory, md5s)
        except LockMismatchError:
            return None  # verified_models then finds it does not match, and the reader says why
    return found if memo.holds_digest(files_digest([(n, sha256s[n]) for n in order])) is None else None


def _known(value: object, pins: Pins | None) -> bool:
    """Whether a file's entry gives its "sha256 md5" (an md5 too, where the folder is pinned)."""
    return (
        isinstance(value, str) and _HASHES.fullmatch(value) is not None and not (pins and value.endswith(" "))
    )


def _size(marker: str) -> int:
    """The size an identity names (device|inode|size|mtime_ns|ctime_ns)."""
    return int(marker.split("|")[2])


def _hashes(path: Path, marker: str) -> tuple[str, bool]:
    """The file at `path` read now: its "sha256 md5", and whether it may be remembered (settled);
    _Changed unless it is the file listed, unchanged while read."""
    began = private_memo.now_ns()  # the racy rule is judged at the read's start (settled)
    fd = os.open(path, READ_FLAGS | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", buffering=0) as stream:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or identity(before) != marker or before.st_size > MAX_FILE_BYTES:
            raise _Changed(path)
        sha256, md5 = hashlib.sha256(), hashlib.md5()
        while chunk := stream.read(READ_BUFFER):
            sha256.update(chunk)
            md5.update(chunk)
        after = os.fstat(fd)
        if identity(after) != marker:
            raise _Changed(path)
    return f"{sha256.hexdigest()} {md5.hexdigest()}", settled(after, began)


def _content(entry: object, listing: dict[str, str]) -> tuple[list[str], Models] | None:
    """A content entry's order (the files verified_models read: files of the listing, each once) and
    models; None if of another shape."""
    if not isinstance(entry, dict):
        return None
    order, found = entry.get("order"), entry.get("models")
    if not (isinstance(order, list) and _strings(order) and isinstance(found, list)):
        return None
    names = [str(name) for name in order]
    if len(set(names)) != len(names) or not set(names) <= listing.keys():
        return None
    triples = frozenset((m[0], m[1], m[2]) for m in found if _strings(m, 3))
    return (names, triples) if len(triples) == len(found) else None


def _strings(value: object, count: int | None = None) -> bool:
    """Whether it is a list of strings (of `count` of them, when given)."""
    return (
        isinstance(value, list)
        and (count is None or len(value) == count)
        and all(isinstance(x, str) for x in value)
    )


def _file_seal(marker: str, value: str) -> str | None:
    return seal(f"file {marker} {value}".encode())


def _content_seal(key: str, entry: dict[str, object]) -> str | None:
    return seal(orjson.dumps(["models", key, entry.get("order"), entry.get("models")]))


def _sealed_files(known: dict[str, object]) -> dict[str, object]:
    """The file entries sealed under this user's key ("sha256 md5 seal"), as "sha256 md5"."""
    found: dict[str, object] = {}
    for marker, value in _section(known, "files").items():
        # ASCII only: hmac.compare_digest refuses to compare other str, and a lone surrogate (which
        # json reads from "\ud800") cannot be encoded for the seal: either would raise, not refuse.
        if isinstance(value, str) and value.count(" ") == 2 and (marker + value).isascii():
            hashes, mark = value.rsplit(" ", 1)
            if (expected := _file_seal(marker, hashes)) is not None and hmac.compare_digest(mark, expected):
                found[marker] = hashes
    return found


def _sealed_contents(known: dict[str, object]) -> dict[str, object]:
    """The content entries whose seal is this user's."""
    found: dict[str, object] = {}
    for key, entry in _section(known, "models").items():
        mark = entry.get("seal") if isinstance(entry, dict) else None
        if not (isinstance(entry, dict) and isinstance(mark, str) and (key + mark).isascii()):
            continue  # (ASCII: see _sealed_files)
        try:
            expected = _content_seal(key, entry)
        except TypeError:  # what orjson does not write: a lone surrogate, an int past 64 bits, 255 levels
            continue
        if expected is not None and hmac.compare_digest(mark, expected):
            found[key] = entry
    return found


def _remember(path: Path, files: dict[str, str], contents: dict[str, dict[str, object]]) -> None:
    """These entries added, each sealed under this user's memo key (none without one), the oldest let
    go of past MAX_FILES and MAX_CONTENTS; a memo that cannot be written, a read-only folder, say, is
    no error: the next read reads the recording again."""
    sealed_files = {marker: f"{value} {_file_seal(marker, value)}" for marker, value in files.items()}
    sealed_contents = {key: {**entry, "seal": _content_seal(key, entry)} for key, entry in contents.items()}
    if seal(b"") is None:
        return
    known = read_private(path)
    merged: dict[str, object] = {}
    new_sections: tuple[tuple[str, dict[str, object], int], ...] = (
        ("files", dict(sealed_files), MAX_FILES),
        ("models", dict(sealed_contents), MAX_CONTENTS),
    )
    for name, new, most in new_sections:
        section = {k: v for k, v in _section(known, name).items() if k not in new}
        section.update(new)
        merged[name] = dict(list(section.items())[-most:])
    try:
        write_private(path, merged)
    except OSError:
        return
