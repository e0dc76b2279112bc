"""A large stage's recording in shards, by its calls' keys (issue 33, proposal 3).

A stage's recording is one file (pipeline.llm.recordings.line_format), rewritten whole by every rerun, moved
whole by git and DVC, and read whole by a reader that wants one call. Past SHARD_AT calls a stage
is written instead as

    recordings/<stage>/calls.jsonl                      the manifest: one line a shard,
                                                        {"sha256": <its bytes' sha256>, "shard": <its file>}
    recordings/<stage>/calls-<d>-<sha256[:16]>.jsonl    the calls whose key's digest begins with the hex
                                                        digit <d>, sorted, as a recording's call lines
    recordings/<stage>/blocks-<d>-<sha256[:16]>.jsonl   the shared blocks whose id begins with <d>, by id

    recordings/<stage>/items-<d>-<sha256[:16]>.jsonl    each shard of calls' table of items: where each
                                                        item's lines lie in it, named after the shards

Sixteen shards of calls, by the key's first hex digit: a rerun that changes a few calls rewrites
(and git or DVC moves) only their shards, and a reader that wants one key reads the manifest, one
sixteenth of the calls and the blocks its line refers to, each found where it lies in its block
shard, sorted by id (key_reader.read_keys, pipeline.llm.recordings.block_places). The blocks
have shards of their own, by id, so that a transcript judged by calls in every shard is still stored
once (with a block each shard of calls holding its own, bytes grew with the number of shards a
transcript's calls fall in: up to 16x); a rerun whose calls bring new blocks rewrites their shards too.

The tables of items let `audit --item` read one item's lines and not every shard of calls whole
(pipeline.llm.recordings.item_table). A table is used only when it hashes to the sha256 the
manifest gives it and matches its shard; readers of the whole recording leave the tables out
(parse_manifest; manifest_entries names them too), and a recording written before them, with no
table in its manifest, is read as it always was.

Small recordings (every committed demo) stay one file, byte for byte: the threshold is a count of
calls, so the same calls always give the same layout. SHARD_AT = 4,096 calls is about 10-15 MB at
the synthetic bench's few kB a call: below it a rewrite costs little and git copes; above it a
rerun of one item no longer rewrites the whole stage.

Atomic per stage. A shard's name holds its content's hash, so a shard is written under a new name
(a temporary file, then renamed to that name; one whose bytes are unchanged keeps its file), and the
stage changes in one step: the rename of the manifest, calls.jsonl, over the old one. A writer killed
before that leaves the old manifest naming the old shards, all still there; killed after it, the new
manifest names the new shards; the shards it no longer names are deleted last. Readers check each
shard against its hash in the manifest, and refuse a file in the folder that looks like a shard but
is not named by it (a stray, or a look-alike), naming the file and the fix; dvc.lock's folder md5
pins the manifest and every shard together.

A writer killed between its first shard and its last cleanup (SIGKILL, a lost machine) leaves shard
files the manifest does not name. So a writer first notes in a journal (JOURNAL, a `.tmp` file that
DVC and the folder's pin skip) each shard it is about to add, and, before its manifest's rename,
each shard that rename leaves unnamed; it deletes the journal once done. The next reader or writer
that finds a journal and no writer holding the folder's lock deletes the files it lists that the
manifest now in place does not name, saying which (clear_killed_writer): a writer's own files, by
its own record, whichever side of the rename it was killed on. Any other unnamed look-alike (one
put there by hand, or a merge's other side) is still refused, naming it.

Merges: two collaborators who changed different shards change different manifest lines and files;
the same shard changed on both sides conflicts on its manifest line, resolved by rerunning the stage
(or `judgeloop cache merge`) rather than by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.files import READ_FLAGS, TMP_SUFFIX, atomic_write_chunks, in_command, named
from pipeline.llm.hard_links import refuse_hard_link
from pipeline.llm.keys import canonical_json
from pipeline.llm.killed_writes import clear_named, locked_temporary
from pipeline.llm.recordings.line_format import BLOCK_OPENING, CALL_OPENING

SHARD_AT = 4096  # more calls than this: the stage's recording is written in shards
SHARD_DIGITS = 1  # shards by the key's first hex digit: 16
HEX = frozenset("0123456789abcdef")
MANIFEST_OPENING = '{"sha256":'  # how a manifest line opens (a call line opens with its checksum)
_ONE_FILE_OPENINGS = (CALL_OPENING.decode(), BLOCK_OPENING.decode())  # how a recording in one file opens
SHARD_NAME = re.compile(rf"(calls|blocks|items)-([0-9a-f]{{{SHARD_DIGITS}}})-([0-9a-f]{{16}})\.jsonl")
TABLE_KIND = "items"  # a shard of calls' table of items (pipeline.llm.recordings.item_table), named last
LOOKS_LIKE_SHARD = re.compile(
    r"(calls|blocks)-.*\.jsonl", re.IGNORECASE
)  # a file a person could take for a shard
TEMPORARIES = (f".calls-*{TMP_SUFFIX}", f".blocks-*{TMP_SUFFIX}", f".items-*{TMP_SUFFIX}")  # write_shard's
JOURNAL = ".shards-writing" + TMP_SUFFIX  # what a writer at work adds and drops (see the module)
MANIFEST_FILE = "calls.jsonl"  # as pipeline.llm.recordings.stage_folders.CALLS_FILE
FIX = "Fix: restore the stage's folder from git (git checkout -- {folder}), or re-record the stage."


log = logging.getLogger(__name__)


def shard_of(key: str) -> str:
    """The shard a call of this key is written to: the first hex digit of its digest ("jl2:3f..." -> "3")."""
    digits = key.rsplit(":", 1)[-1][:SHARD_DIGITS].lower()
    return digits if len(digits) == SHARD_DIGITS and all(c in HEX for c in digits) else "0" * SHARD_DIGITS


def is_manifest(text: str) -> bool:
    return text.startswith(MANIFEST_OPENING)


def _hash_of(path: Path) -> str | None:
    """sha256 of the regular file at `path`; None where there is none. A symbolic link is never the
    file of that name, wherever it leads (into DVC's cache too): it is replaced, as anything else
    that is not a regular file is."""
    try:
        fd = os.open(path, READ_FLAGS | os.O_NOFOLLOW)  # a pipe is not waited on, a link not followed
    except OSError:
        return None
    try:  # (open() of a folder's descriptor raises, naming the number, and leaves it open: asked first)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, "rb", closefd=False) as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    finally:
        os.close(fd)


def _refuse_a_folder(path: Path) -> None:
    """CorruptRecordError where a folder stands at a shard's name: no rename replaces one."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise CorruptRecordError(
            f"{named(path)}: a folder at a shard's name, where only that shard's file belongs. Fix: "
            f"remove it (rm -r -- {in_command(path)}) and run again, or restore the stage's folder "
            "from git."
        )


def write_shard(directory: Path, kind: str, prefix: str, chunks: Iterable[bytes]) -> tuple[str, str]:
    """One shard ("calls", "blocks" or "items", a table) written under its content's name (a temporary
    file first, locked while it is written: pipeline.llm.killed_writes); its name and sha256. A shard
    of the same bytes already there, a regular file (never a link), keeps its file."""
    out, tmp = locked_temporary(directory, f".{kind}-{prefix}.")
    digest = hashlib.sha256()
    try:
        with out:  # closed, and its lock let go, only after the rename
            for chunk in chunks:
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
            sha = digest.hexdigest()
            name = f"{kind}-{prefix}-{sha[:16]}.jsonl"
            if _hash_of(directory / name) == sha:
                os.unlink(tmp)
            else:
                _refuse_a_folder(directory / name)
                os.fchmod(out.fileno(), 0o644)
                _journal(directory, [name])  # before the file is there, so that a kill leaves it listed
                os.replace(tmp, directory / name)
        return name, sha
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def commit(manifest_path: Path, shards: list[tuple[str, str]]) -> None:
    """The stage's one step: the manifest naming `shards` renamed into place (then the caller drops
    the shard files it no longer names, drop_unnamed)."""
    named = {name for name, _ in shards}
    _journal(manifest_path.parent, sorted(n for n in os.listdir(manifest_path.parent) if _unnamed(n, named)))
    atomic_write_chunks(manifest_path, [manifest_text(shards)])


def _unnamed(name: str, named: set[str]) -> bool:
    return SHARD_NAME.fullmatch(name) is not None and name not in named


def _journal(directory: Path, names: list[str]) -> None:
    """Note in the folder's journal the shard files a writer is about to add, or to leave unnamed."""
    if not names:
        return
    fd = os.open(directory / JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    try:
        refuse_hard_link(directory / JOURNAL, os.fstat(fd), "the writer's journal")  # appended in place
        os.write(fd, "".join(f"{name}\n" for name in names).encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)


def manifest_text(shards: Iterable[tuple[str, str]]) -> str:
    """A manifest naming `shards`, (file, sha256) in order."""
    return "".join(canonical_json({"sha256": sha, "shard": name}) + "\n" for name, sha in shards)


def prefix_of(name: str) -> tuple[str, str]:
    """A shard's kind and digits ("calls", "3") from its name; ("", "") for a name SHARD_NAME refuses."""
    found = SHARD_NAME.fullmatch(name)
    return ("", "") if found is None else (found.group(1), found.group(2))


def drop_unnamed(directory: Path, named: set[str]) -> None:
    """Delete the shard files `named` does not hold (an earlier layout's, or a killed writer's)."""
    for path in directory.iterdir():
        if SHARD_NAME.fullmatch(path.name) and path.name not in named:
            path.unlink(missing_ok=True)
    (directory / JOURNAL).unlink(missing_ok=True)  # the writer is done: nothing of its is left unnamed


def clear_killed_writer(directory: Path, *, holding_lock: bool = False) -> list[str]:
    """Delete what a killed writer left (see the module): the shard files its journal lists that the
    manifest in place does not name, its temporary files, and the journal; the shards deleted, each
    named in a warning. Nothing while a writer holds the folder's lock (its shards are not strays),
    unless it is the caller (`holding_lock`: the next writer), nor when the folder cannot be changed
    (a reader's copy: its strays are refused as before)."""
    journal = directory / JOURNAL
    if not journal.is_file():
        return []
    try:
        if holding_lock:
            return _cleared(directory, journal)
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return _cleared(directory, journal)
        finally:
            os.close(fd)  # closing the descriptor releases the lock taken
    except OSError:  # BlockingIOError among them: a writer at work
        return []


def _cleared(directory: Path, journal: Path) -> list[str]:
    """clear_killed_writer under the folder's lock."""
    if journal.is_symlink() or not journal.is_file():
        return []
    listed = set(journal.read_text(encoding="ascii", errors="replace").split())
    manifest = directory / MANIFEST_FILE
    text = manifest.read_bytes().decode("utf-8", "replace") if manifest.is_file() else ""
    if text and not text.startswith(_ONE_FILE_OPENINGS) and not is_manifest(text):
        return []  # neither a manifest nor one file as the writer opens it (a damaged opening, a
        # conflict marker): which files are the recording's is not known, so none deleted
    try:
        named = {name for name, _ in manifest_entries(manifest, text)} if is_manifest(text) else set()
    except CorruptRecordError:
        return []  # which files are the recording's is not known: none deleted (the reader says why)
    removed = sorted(name for name in listed & set(os.listdir(directory)) if _unnamed(name, named))
    for name in removed:
        (directory / name).unlink()
    clear_named(directory, TEMPORARIES)
    journal.unlink()
    if removed:
        log.warning(
            "%s: deleted %d shard file(s) that a writer killed before it finished left and that "
            "calls.jsonl does not name (the recording is as its manifest says): %s",
            directory,
            len(removed),
            ", ".join(removed),
        )
    return removed


def parse_manifest(path: Path, text: str) -> list[tuple[str, str]]:
    """The shards of calls and of blocks a manifest names, (file, sha256) in order; CorruptRecordError
    naming its line. The tables of items it names (manifest_entries) are left out: what a recording
    holds is its shards, and a reader of the whole recording has no use for them."""
    return [(name, sha) for name, sha in manifest_entries(path, text) if not name.startswith(TABLE_KIND)]


def manifest_entries(path: Path, text: str) -> list[tuple[str, str]]:
    """Every file a manifest names, its tables of items (pipeline.llm.recordings.item_table) among
    them, (file, sha256) in order; CorruptRecordError naming its line."""
    fix = FIX.format(folder=in_command(path.parent))
    shards: list[tuple[str, str]] = []
    prefixes: list[tuple[str, str]] = []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        try:
            entry = orjson.loads(line)
            name, sha = entry["shard"], entry["sha256"]
            found = SHARD_NAME.fullmatch(name) if isinstance(name, str) else None
            if found is None or set(entry) != {"shard", "sha256"}:
                raise ValueError(
                    "a shard is named calls-, blocks- or items-<hex digit>-<16 hex digits>.jsonl"
                )
            if not isinstance(sha, str) or not sha.startswith(found.group(3)) or len(sha) != 64:
                raise ValueError("its sha256 does not match its name")
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(f"{path}:{number}: not a shard of the manifest ({exc}). {fix}") from None
        kind_digits = (found.group(1), found.group(2))
        if prefixes and kind_digits <= prefixes[-1]:
            raise CorruptRecordError(f"{path}:{number}: shard {name} out of order or twice. {fix}")
        prefixes.append(kind_digits)
        shards.append((name, sha))
    return shards


def refuse_strays(directory: Path, names: Iterable[str], named: set[str]) -> None:
    """CorruptRecordError for a file among `names` (the folder's) that looks like a shard but that the
    manifest does not name: a stray a killed writer left, or a look-alike put there by hand. What a
    killed writer left by its own journal is deleted first, and said so (clear_killed_writer)."""
    cleared = set(clear_killed_writer(directory))
    for name in sorted(names):
        if (
            name not in named
            and name not in cleared
            and LOOKS_LIKE_SHARD.fullmatch(name)
            and not _writing(directory)
            and (directory / name).exists()  # (another reader may have just deleted a killed writer's)
        ):
            raise StrayShardError(
                f"{directory / name}: looks like a shard of the stage's recording, but its calls.jsonl "
                "does not name it, so it is not read. Fix: delete it (a writer killed before it cleaned "
                f"up leaves one), or restore the folder from git (git checkout -- {in_command(directory)})."
            )


def _writing(directory: Path) -> bool:
    """Whether a writer holds the folder's lock (pipeline.llm.files.locked) now: the shards it has
    written for its manifest are there before the manifest names them, and are not strays."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor releases a lock taken
    return False


class MissingShardError(CorruptRecordError):
    """A shard the manifest names is not in the folder (a writer may have replaced both just now)."""


class StrayShardError(CorruptRecordError):
    """A file like a shard that the manifest does not name (or a writer replaced both just now)."""


RACES = (MissingShardError, StrayShardError)  # what a writer between a reader's two reads can cause


def shard_bytes(directory: Path, name: str, sha: str, given: dict[str, bytes] | None) -> bytes:
    """A shard's bytes (from `given`, the folder's files as read, when given), checked against the
    manifest's hash."""
    fix = FIX.format(folder=in_command(directory))
    path = directory / name
    data = given.get(name) if given is not None else None
    if data is None:
        if given is not None:
            raise MissingShardError(f"{path}: named by calls.jsonl but missing. {fix}")
        try:
            data = path.read_bytes()
        except OSError:
            raise MissingShardError(f"{path}: named by calls.jsonl but missing. {fix}") from None
    if hashlib.sha256(data).hexdigest() != sha:
        raise CorruptRecordError(f"{path}: does not hash to the sha256 calls.jsonl gives it (edited). {fix}")
    return data
