"""Opening a diskcache folder that someone else may have written: no pickle, no settings from the
file, nothing outside the folder.

A cache folder may come from someone else (a shared folder, a colleague's copy, a remote), so
opening and reading it must be safe whoever wrote it:

- No pickle, anywhere. diskcache pickles every key and value that is not a str, bytes or number, and
  unpickles them when read, which runs whatever code the pickle names. `SafeDisk` stores only str
  keys and bytes values and refuses to read anything else: a pickled value, a pickled or non-text
  key, a text value, a file path outside the cache folder. A refused row is never decoded; it is
  named (file, key, why) with the fix, `judgeloop cache verify --repair`, which deletes it.
- Nothing else from the file steers us: diskcache applies the settings stored in its database
  (pragmas, disk options) over its defaults, so every setting is passed explicitly, and a database
  holding settings diskcache never writes, or a table, index or trigger whose SQL is not exactly
  diskcache's (pipeline.llm.cache.schema), is refused before it is opened.
- Nothing is written outside the folder: a symbolic link in it (a `cache.db`, even a dangling one,
  its WAL, a shard folder `00`..`ff`) is refused when the store opens, and a value file is written or
  read only when neither of its two shard folders is a link (pipeline.llm.files.refuse_links).
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache

from pipeline.errors import CorruptRecordError, UnsafeNameError
from pipeline.llm.cache.reopen import held_as_wanted, reopened
from pipeline.llm.cache.schema import schema_problems
from pipeline.llm.files import in_command, named, refuse_links
from pipeline.llm.hard_links import refuse_hard_links_at

DB_FILE = "cache.db"
LINK_FIX = (
    "or point cache.dir (JUDGELOOP_CACHE_DIR) at a folder of its own; to keep the cache on another "
    "disk, make the cache folder itself the link"
)
# Files diskcache writes for large values: two levels of hex folders, a random hex name.
_VALUE_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")
_KNOWN_SETTINGS = frozenset(diskcache.DEFAULT_SETTINGS) | frozenset(diskcache.core.METADATA)
SETTINGS: dict[str, Any] = {
    **diskcache.DEFAULT_SETTINGS,
    "eviction_policy": "none",
    "size_limit": 2**62,
    "sqlite_journal_mode": "wal",
    "disk_pickle_protocol": 0,  # never used: SafeDisk pickles nothing
    # No memory-mapped reads: diskcache opens a connection per thread, and each mapped up to 64 MB
    # of its database into the process (1.7 GB of a 96k-call replay's 4.4 GB peak; bench/README,
    # "side-by-side threads and mapped databases"). Reads go through each connection's page cache
    # (sqlite_cache_size) instead; a 29k-call replay spent no more CPU.
    "sqlite_mmap_size": 0,
    # Each connection's page cache at 256 pages (1 MB), not diskcache's 8,192 (32 MB): a replay
    # holds a connection to both databases on each of its ~17 threads, and their caches filled
    # with pages read once (bench/README, "SQLite's page cache capped"). A hit reads a handful of
    # pages (the key's index path and its row), which 1 MB a connection keeps hot.
    "sqlite_cache_size": 256,
}


@dataclass(frozen=True)
class ForeignKey:
    """A key that judgeloop never writes (pickled, bytes or a number), held undecoded so that its row
    can be named and deleted without reading it."""

    data: bytes | int | float
    raw: bool

    def __str__(self) -> str:
        kind = "a pickled key" if not self.raw else f"a key of type {type(self.data).__name__}"
        return f"<{kind}, not decoded>"


class RefusedValue(Exception):
    """Raised by SafeDisk instead of decoding a value judgeloop never writes."""


class SafeDisk(diskcache.Disk):  # type: ignore[misc]
    """diskcache's Disk without pickle: str keys and bytes values in, and nothing else out; value
    files only in shard folders that are no links."""

    def filename(
        self, key: Any = diskcache.core.UNKNOWN, value: Any = diskcache.core.UNKNOWN
    ) -> tuple[str, str]:
        name, full_path = super().filename(key, value)
        linked = _linked_shard(self._directory, name)
        if linked is not None:  # before the value is written, and before its row is
            raise UnsafeNameError(
                f"{named(linked)}: a symbolic link in the cache folder (to {named(os.readlink(linked))}), "
                f"refused: the value file would be written outside {named(self._directory)}. Fix: remove "
                f"the link (rm -- {in_command(linked)})."
            )
        return name, full_path

    def put(self, key: Any) -> tuple[Any, bool]:
        if isinstance(key, ForeignKey):  # to delete a refused row, found by its stored bytes
            data = key.data
            return (sqlite3.Binary(data) if isinstance(data, bytes) else data), key.raw
        if type(key) is not str:
            raise TypeError(f"the call store takes text keys only, not {type(key).__name__}")
        return key, True

    def get(self, key: Any, raw: bool) -> Any:
        if raw and type(key) is str:
            return key
        return ForeignKey(bytes(key) if isinstance(key, bytes | memoryview) else key, bool(raw))

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if type(value) is not bytes or read:
            raise TypeError(f"the call store takes bytes values only, not {type(value).__name__}")
        return super().store(value, read, key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> bytes:
        if mode == diskcache.core.MODE_RAW and isinstance(value, bytes | memoryview):
            return bytes(value)
        if mode == diskcache.core.MODE_BINARY and not read and self._own_file(filename):
            data: bytes = super().fetch(mode, filename, value, read)
            return data
        kinds = {diskcache.core.MODE_PICKLE: "a pickle", diskcache.core.MODE_TEXT: "a text value"}
        what = kinds.get(mode, f"a value of mode {mode}")
        if mode == diskcache.core.MODE_BINARY:
            what = f"a value file named {filename!r}, outside the cache's own files"
        raise RefusedValue(f"{what}, which judgeloop never writes: refused, not read")

    def remove(self, file_path: str) -> None:
        if self._own_file(file_path):  # never delete a file a row names outside the cache's own files
            super().remove(file_path)

    def _own_file(self, name: str | None) -> bool:
        return _value_file(name) and _linked_shard(self._directory, str(name)) is None


def _value_file(name: str | None) -> bool:
    return name is not None and _VALUE_FILE.fullmatch(name) is not None


def _linked_shard(directory: str, name: str) -> str | None:
    """The shard folder of value file `name` (`ab/cd/...`) that is a symbolic link, if one is."""
    top = os.path.join(directory, name[:2])
    for folder in (top, os.path.join(top, name[3:5])):
        if os.path.islink(folder):
            return folder
    return None


def check_database(directory: Path) -> bool:
    """Refuse a cache database that holds settings diskcache never writes, or a table, index or
    trigger that is not exactly diskcache's (pipeline.llm.cache.schema), before diskcache opens it
    (it would apply the settings, and the triggers run on every write). Whether it is held as
    opening it would write it (pipeline.llm.cache.reopen): False where there is none yet."""
    path = directory / DB_FILE
    try:
        kind = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(kind):  # a named pipe would be waited on for ever (links are refused before)
        raise CorruptRecordError(
            f"{path}: not a file (a folder, a pipe, a device), where the cache keeps its database. "
            "Fix: move it away; a run starts a new one."
        )
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            settings = (
                {k for (k,) in con.execute("SELECT key FROM Settings")} if "Settings" in tables else set()
            )
            objects = schema_problems(con, SETTINGS)
            as_wanted = not objects and held_as_wanted(con, SETTINGS)
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise CorruptRecordError(
            f"{path}: not a readable cache database ({exc}). "
            "Fix: move the folder away; a run starts a new one."
        ) from exc
    odd = sorted(map(str, settings - _KNOWN_SETTINGS)) + objects
    if odd:
        raise CorruptRecordError(
            f"{path}: holds what diskcache never writes ({', '.join(odd)}), so it was not made by judgeloop "
            "and is refused unopened. Fix: move the folder away (a run starts a new one), or seed a new "
            "cache from recordings: `judgeloop cache seed`."
        )
    return as_wanted


def refuse_expanded(directory: Path) -> None:
    """UnsafeNameError for a folder whose path diskcache would read as another: it expands `~` and
    `$NAME` in the folder it is given, and would open (and create) its database there, where none of
    the checks here looked (links, hard links, the schema: a database nobody checked, used as is)."""
    named = str(directory)
    read = os.path.expanduser(os.path.expandvars(named))
    if read != named:
        raise UnsafeNameError(
            f"{named}: diskcache would open {read} instead (it expands ~ and $VARIABLES in a cache "
            f"folder's path), a folder judgeloop has not checked. Fix: write the path out in full in "
            f"cache.dir (JUDGELOOP_CACHE_DIR), e.g. {read}, or rename the folder."
        )


def open_cache(directory: Path) -> diskcache.Cache:
    refuse_expanded(directory)
    refuse_links(directory, "the cache folder", LINK_FIX)
    # SQLite writes these where they stand (pipeline.llm.hard_links); value files are made new ("xb").
    refuse_hard_links_at(
        directory, (DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"), "the cache's database file"
    )
    if check_database(directory):  # every open after the first: nothing to write (issue 31)
        return reopened(str(directory), 60, SafeDisk, SETTINGS)
    return diskcache.Cache(str(directory), timeout=60, disk=SafeDisk, **SETTINGS)
