"""Recordings verified once, remembered by the hash of exactly what was verified.

Reading a stage's recording verifies every record in it: its key derived again from its request, its
checksum computed again over the whole record (pipeline.llm.recordings.stage_reader.read_stage).
That is most of the cost of reading a recording, and a replay reads each recording in several
processes (its own stage, the later stages that look a call up elsewhere, the report). The memo
remembers that a recording was verified in full, keyed by the sha256 of what was verified: every
call line as parsed (with its number) and every blob, and the verifier itself (see below). A later
read of the same recording still reads, splits and parses every line, and hashes all of it; only
when that hash is remembered does it skip deriving each key and checksum again. Any other content,
one byte changed, is a new hash and is verified in full.

What the memo holds is local state, as untrusted as any file: a folder (`.judgeloop/verified/`
beside the local cache, or JUDGELOOP_VERIFIED_DIR) of empty files, written only after a full
verification succeeded, each named by an HMAC of that digest under a key of this user's
(~/.cache/judgeloop/memo.key, made on first use, readable by its owner only, and refused
where anyone else may read or write it; JUDGELOOP_MEMO_KEY
names another file). A file in it can say no more than "content with this hash was verified by
this user's judgeloop", and the content is hashed on every read, so an entry cannot vouch for
different content, and a memo folder copied from someone else (inside a project folder handed
over, say) or written by someone without the key vouches for nothing: that content is verified
in full. Without a key (a home folder that cannot be written) the memo lives in memory only.
A recording's pin in dvc.lock is checked on every read as before, memo or not. Within one process
the digests are also kept in memory (a report that reads a recording twice verifies it once). The
verifier is part of the digest: judgeloop's version and the bytes of the code that verifies
(records.py, keys.py, types.py), so a change to it verifies everything again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import logging
import os
import shlex
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from pipeline import __version__
from pipeline.llm import keys, records, types
from pipeline.llm.keys import RECIPES
from pipeline.llm.terminal import shown

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_reader import RecordingLines

MEMO_FORMAT = 2  # 2: a recording's digest covers its files' sha256s (what a scan by offsets hashes)
ENV = "JUDGELOOP_VERIFIED_DIR"
FOLDER = "verified"  # beside the local cache folder: .judgeloop/verified
_seen_here: set[str] = set()  # digests verified (or found remembered) in this process
_seen_lock = threading.Lock()
log = logging.getLogger(__name__)


@functools.cache
def _verifying_code() -> list[str]:
    code = [records.__file__, keys.__file__, types.__file__]
    return [hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in code if path]


def verifier() -> list[object]:
    """What a verification is, as far as the memo knows it: this format, judgeloop's version, the key
    recipes, and the code that verifies a parsed record (its key recipes, its checksum, the models'
    JSON), so that changed code never trusts what older code verified."""
    return [MEMO_FORMAT, __version__, sorted(RECIPES), _verifying_code()]


def digest(parts: RecordingLines) -> str:
    """sha256 of what a verification reads: the verifier and each file read with its bytes' sha256
    (the lines and blobs are those bytes split); for lines put together otherwise, each call line
    with its number and each blob."""
    if parts.hashes:
        return files_digest(list(parts.hashes))
    body = orjson.dumps([verifier(), parts.calls, sorted(parts.blobs.items())])
    return hashlib.sha256(body).hexdigest()


def files_digest(hashes: list[tuple[str, str]]) -> str:
    """digest of a recording read as these files (name, sha256 of its bytes), in this order."""
    return hashlib.sha256(orjson.dumps([verifier(), "files", hashes])).hexdigest()


KEY_ENV = "JUDGELOOP_MEMO_KEY"


MAX_KEY_BYTES = 4096


@functools.cache
def _key() -> bytes | None:
    """This user's memo key: 32 random bytes in a file of their own, made on first use. A key file
    that is not a plain file of this user's that no one else may read or write (through a link or
    not) is no key: whoever could read it could seal entries this user's judgeloop would believe
    (the memo then lives in memory only, as without a key)."""
    named = os.environ.get(KEY_ENV)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = Path(named) if named else base / "judgeloop" / "memo.key"
    with contextlib.suppress(OSError):
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with contextlib.suppress(FileExistsError):
                fd = os.open(path, flags, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(os.urandom(32))
        with path.open("rb") as file:
            status = os.fstat(file.fileno())
            if not _secret(status):
                _say_refused(path, status)
                return None
            key = file.read(MAX_KEY_BYTES + 1)
        return key if 32 <= len(key) <= MAX_KEY_BYTES else None
    return None


def _secret(status: os.stat_result) -> bool:
    """A plain file of this user's that no one else may read or write (Windows: a plain file)."""
    geteuid = getattr(os, "geteuid", None)  # not on Windows, which has no owner bits to check
    if geteuid is None:
        return stat.S_ISREG(status.st_mode)
    return stat.S_ISREG(status.st_mode) and status.st_uid == geteuid() and not status.st_mode & 0o077


def _say_refused(path: Path, status: os.stat_result) -> None:
    """A warning (once: `_key` is read once a process) that the key file is no key, naming it and
    its fix: recordings are then verified in full on every run, which costs time only."""
    name = shlex.quote(str(path))
    geteuid = getattr(os, "geteuid", None)  # not on Windows, where only a plain file is asked for
    if geteuid is not None and stat.S_ISREG(status.st_mode) and status.st_uid == geteuid():
        why, fix = (
            f"others may read or write it (mode {stat.S_IMODE(status.st_mode):o})",
            f"chmod 600 -- {name}",
        )
    else:
        why, fix = "it is not a plain file of this user's", f"rm -- {name} (judgeloop makes a new one)"
    log.warning(
        "%s: not used as the key of the verified-recordings memo, since %s: every recording is "
        "verified in full on each run. Fix: %s",
        shown(str(path), one_line=True),
        why,
        shown(fix, one_line=True),
    )


def seal(data: bytes) -> str | None:
    """HMAC-SHA256 of `data` under this user's memo key, hex (None: no key): what binds an entry of
    another memo of local state (pipeline.llm.recordings.models_memo) to this user's judgeloop."""
    key = _key()
    return None if key is None else hmac.new(key, data, hashlib.sha256).hexdigest()


def _entry(found: str) -> str | None:
    """The memo file's name for a digest: its HMAC under this user's key (None: no key)."""
    key = _key()
    return None if key is None else hmac.new(key, found.encode("ascii"), hashlib.sha256).hexdigest()


class VerifiedMemo:
    """The digests of recordings verified in full: in this process, and in `folder` when given."""

    def __init__(self, folder: Path | None, *, writes: bool = True) -> None:
        self.folder = folder
        self.writes = writes  # False: consulted, never written (a command that writes nothing)

    @classmethod
    def beside(cls, cache_dir: Path, *, writes: bool = True) -> VerifiedMemo:
        """The memo of a local cache folder: JUDGELOOP_VERIFIED_DIR, or `verified/` beside it."""
        named = os.environ.get(ENV)
        return cls(Path(named) if named else cache_dir.parent / FOLDER, writes=writes)

    def holds(self, parts: RecordingLines) -> str | None:
        """None when this content was verified in full before; else its digest, for `remember`."""
        return self.holds_digest(digest(parts))

    def holds_digest(self, found: str) -> str | None:
        """holds, for content of this digest (files_digest)."""
        with _seen_lock:
            if found in _seen_here:
                return None
        if self.folder is not None and self._on_disk(found):
            with _seen_lock:
                _seen_here.add(found)
            return None
        return found

    def _on_disk(self, found: str) -> bool:
        name = _entry(found)
        if self.folder is None or name is None:
            return False
        entry = self.folder / name
        # A plain file only: a link or anything else there is not the memo's.
        return not entry.is_symlink() and entry.is_file()

    def remember(self, found: str) -> None:
        """Note that content with this digest was verified in full (a memo that cannot be written,
        a read-only folder, say, is no error: the next read verifies again)."""
        with _seen_lock:
            _seen_here.add(found)
        name = _entry(found)
        if self.folder is None or name is None or not self.writes:
            return
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            if self.folder.is_symlink():
                return
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            os.close(os.open(self.folder / name, flags, 0o644))


IN_PROCESS = VerifiedMemo(None)  # what read_stage remembers when given no memo of a cache folder


def forget_in_process() -> None:
    """Forget what this process verified (tests that tamper with a recording between two reads)."""
    with _seen_lock:
        _seen_here.clear()
