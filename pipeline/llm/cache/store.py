"""The local call store: one diskcache, key -> CallRecord as JSON, checked on every read.

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
- Every hit is verified before it is served (see "format" below).

Format. A value is `jlr3 <seal>\\n<header>\\n<request>`: the record without its request (key, full
checksum, model, reply, when) as one JSON line, then the request (zlib-compressed JSON) with its
messages' long text as references to content-addressed blocks, stored once each in the block store
beside the records (`blocks/`, pipeline.llm.cache.blocks): an interview in a hundred prompts is held
once. A hit already holds a request that hashes to the key it looked up, so it reads only the
header; the seal, sha256 of the header's bytes, binds the reply to the key on every hit, at the cost
of hashing a few hundred bytes rather than the 20 kB request (bench/cache_overhead.py). The header's
key must be the key looked up (an entry copied under another key is "foreign"). The record's full
checksum, over the request too, is checked by `judgeloop cache verify`, which also re-derives the
key from the stored request, rebuilt from its blocks (each checked against its id; a block missing
or damaged makes the entry damaged, never a request with other text). An entry of the previous
format (`jlr2`, the request whole) is read as it is, and rewritten as blocks by the next write of
its key. An entry written before the seal (judgeloop 0.1: `<header>\\n<request>` or one JSON
document) is read and fully verified, then rewritten in today's format.

Seeding. Calls served from the recordings are copied into the store (so they stay served offline
when the recordings change), but not one write each: `seed` gathers them and writes them in batches,
one transaction each, and at `close`; they are copies of verified recorded calls, so a crash that
loses a batch loses nothing the recordings do not hold. A seeded call's request is packed from its
recording line's own layout where that is the rule's cut (pipeline.llm.cache.blocks.pack_laid): the
same entry as a live call's, without cutting and hashing its prompt again. Nothing in how an entry
is read or checked depends on how it was written.

diskcache's default size limit (1 GB) evicts entries silently; a cache that forgets recorded calls
would turn a replay into a live run, so eviction is off. SQLite in WAL mode with a busy timeout
lets several processes (parallel `dvc exp run`s) read and write one store safely.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import orjson

from pipeline.errors import CorruptRecordError, UnsafeNameError
from pipeline.llm.blocks import Laid
from pipeline.llm.bounds import depth_problem
from pipeline.llm.cache import bulk
from pipeline.llm.cache.blocks import (
    BlockStore,
    MissingBlock,
    pack_laid,
    pack_request,
    references,
    unpack_request,
)
from pipeline.llm.cache.errors import database_errors, guarded
from pipeline.llm.cache.schema import schema_problems
from pipeline.llm.files import refuse_links
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity

MAGIC = b"jlr3 "  # today's format: the request as block references
WHOLE_REQUEST = b"jlr2 "  # the previous one: the request whole (read, never written)
_SEAL_END = len(MAGIC) + 64  # the seal: 64 hex digits, then a newline
REPAIR = (
    "Fix: run `judgeloop cache verify --repair`, which deletes the damaged entry; the call is then "
    "made again (or, in replay, taken from the recordings)."
)
DB_FILE = "cache.db"
BLOCKS_DIR = "blocks"  # the block store: a diskcache of its own inside the cache folder
SEED_BATCH = 512  # seeded records written per transaction
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
# The page cache of the blocks' connection while a tool reads the whole store
# (CallStore.inspect_in_order): 65,536 pages, 256 MB at most, filled only as pages are read. Each
# record's request is rebuilt from its blocks, 6 to 30 lookups by id in the blocks' key index, whose
# pages 256 held at 96k calls and not at 964k (a 3.3M-block index of about 130 MB): an assessment
# record then read 43 pages from the file against 24.5 at 96k, and 5.6 with this (bench/README,
# "cache verify's growth"). A tool holds one connection to it, not a replay's ~17 threads of them.
WHOLE_READ_PAGES = 65_536


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
                f"{linked}: a symbolic link in the cache folder (to {os.readlink(linked)}), refused: the "
                f"value file would be written outside {self._directory}. Fix: remove the link (rm {linked})."
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


def check_database(directory: Path) -> None:
    """Refuse a cache database that holds settings diskcache never writes, or a table, index or
    trigger that is not exactly diskcache's (pipeline.llm.cache.schema), before diskcache opens it
    (it would apply the settings, and the triggers run on every write)."""
    path = directory / DB_FILE
    if not path.exists():
        return
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            settings = (
                {k for (k,) in con.execute("SELECT key FROM Settings")} if "Settings" in tables else set()
            )
            objects = schema_problems(con, SETTINGS)
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


@dataclass(frozen=True)
class Collected:
    """What `cache gc` did to the blocks: deleted (or would), of how many, bytes freed."""

    deleted: int
    blocks: int
    freed: int


class Damage(Exception):
    """Why a stored entry cannot be served (internal: CallStore turns it into CorruptRecordError)."""


def _shallow(fields: Any) -> None:
    """ValueError for a row nested deeper than a record is (pipeline.llm.bounds), before anything
    walks it: a RecursionError would name neither the row nor the fix."""
    if (deep := depth_problem(fields)) is not None:
        raise ValueError(deep)


def seal(header: bytes) -> bytes:
    return hashlib.sha256(header).hexdigest().encode()


def _open(directory: Path) -> diskcache.Cache:
    refuse_links(directory, "the cache folder", LINK_FIX)
    check_database(directory)
    return diskcache.Cache(str(directory), timeout=60, disk=SafeDisk, **SETTINGS)


class CallStore:
    """Every method that touches the database says a failure of it (read-only, full, damaged) with
    its path and the fix (pipeline.llm.cache.errors), never as a sqlite3 traceback."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.db_path = directory / DB_FILE
        with database_errors(self.db_path):
            directory.mkdir(parents=True, exist_ok=True)
            self._cache = _open(directory)
        blocks_dir = directory / BLOCKS_DIR
        with database_errors(blocks_dir / DB_FILE):
            if blocks_dir.exists() and not blocks_dir.is_dir():  # a link was refused above
                raise CorruptRecordError(
                    f"{blocks_dir}: not a folder, where the cache keeps its blocks. Fix: move it away "
                    "(a run then starts the blocks anew; entries whose blocks are gone are rebuilt)."
                )
            blocks_dir.mkdir(exist_ok=True)
            self.blocks = BlockStore(_open(blocks_dir))
        self._identities: dict[tuple[Any, ...], ModelIdentity] = {}
        self._seeds: dict[str, tuple[CallRecord, list[Laid] | None]] = {}
        self._seeds_lock = threading.Lock()

    def get(self, key: str, request: ChatRequest | None = None) -> CallRecord | None:
        """The record stored under key, verified, or None. Given the request the key was derived
        from, only the header is parsed (its seal checked); without it (audits, verify) the stored
        request is read too, rebuilt from its blocks. CorruptRecordError, naming the file, the key and
        the fix, for an entry that is damaged, edited, foreign, or not judgeloop's."""
        seeded = self._seeds.get(key)
        if seeded is not None:
            return seeded[0]
        try:
            return self._read(key, request)
        except Damage as exc:
            raise CorruptRecordError(f"{self.db_path}: the entry for {key} {exc}. {REPAIR}") from exc

    def inspect(self, key: str | ForeignKey) -> tuple[CallRecord | None, str | None]:
        """(record, None) for an entry that reads and seals, (None, why) for one that does not; the
        record's full verification (CallRecord.problem) is the caller's. (None, None): gone."""
        if isinstance(key, ForeignKey):
            return None, f"{key}: judgeloop writes text keys only; refused, not decoded"
        self.flush()
        try:
            return self._read(key, None, upgrade=False), None
        except Damage as exc:
            return None, str(exc)

    @guarded
    def _read(self, key: str, request: ChatRequest | None, *, upgrade: bool = True) -> CallRecord | None:
        try:
            raw = self._cache.get(key)
        except RefusedValue as exc:
            raise Damage(f"holds {exc}") from exc
        if raw is None:
            return None
        return self._decoded(key, raw, request, upgrade)

    def _decoded(self, key: str, raw: bytes, request: ChatRequest | None, upgrade: bool) -> CallRecord:
        if not raw.startswith((MAGIC, WHOLE_REQUEST)):
            return self._read_unsealed(key, raw, upgrade)
        header_end = raw.find(b"\n", _SEAL_END + 1)
        if raw[_SEAL_END : _SEAL_END + 1] != b"\n" or header_end < 0:
            raise Damage("is cut short or not in the store's format")
        # Slicing the header alone: a hit does not copy the request it already holds.
        header = raw[_SEAL_END + 1 : header_end]
        if seal(header) != raw[len(MAGIC) : _SEAL_END]:
            raise Damage("does not match its seal (reply or metadata damaged or edited)")
        try:
            fields = orjson.loads(header)
            stored_key = fields.get("key")
            if stored_key != key:
                raise Damage(f"is foreign: stored under {key} but the record is for {stored_key}")
            fields["request"] = request if request is not None else self._request(raw, header_end)
            _shallow(fields)
            fields["model"] = self._interned(fields.get("model"))
            return CallRecord.model_validate(fields)
        except (ValueError, TypeError, AttributeError) as exc:  # not a record's shape, whatever it is
            raise Damage(f"cannot be read ({exc})") from exc

    def _request(self, raw: bytes, header_end: int) -> Any:
        """The stored request's fields: whole (the previous format), or rebuilt from its blocks."""
        stored = raw[header_end + 1 :]
        if raw.startswith(WHOLE_REQUEST):
            return orjson.loads(stored)
        try:
            return unpack_request(stored, self.blocks.text)
        except MissingBlock as exc:
            raise Damage(str(exc)) from exc
        except RefusedValue as exc:
            raise Damage(f"refers to a block that holds {exc}") from exc

    def _read_unsealed(self, key: str, raw: bytes, upgrade: bool) -> CallRecord:
        """An entry from before the seal: verified in full (key and checksum), then (upgrade) sealed."""
        end = raw.find(b"\n")
        try:
            fields = orjson.loads(raw[:end] if end >= 0 else raw)
            if end >= 0:
                fields["request"] = orjson.loads(raw[end + 1 :])
            _shallow(fields)
            record = CallRecord.model_validate(fields)
        except (ValueError, TypeError, AttributeError) as exc:
            raise Damage(f"cannot be read ({exc})") from exc
        if record.key != key:
            raise Damage(f"is foreign: stored under {key} but the record is for {record.key}")
        problem = record.problem()
        if problem is not None:
            raise Damage(f"cannot be trusted: {problem}")
        if upgrade:
            self.put(record)
        return record

    def _interned(self, model: Any) -> Any:
        # Every record of a run names the same model: one object for it, not one per hit.
        try:
            seen = tuple(model.items())
            identity = self._identities.get(seen)
        except (AttributeError, TypeError):  # not an object of strings: let validation say so
            return model
        if identity is None:
            identity = self._identities[seen] = ModelIdentity.model_validate(model)
        return identity

    def inspect_in_order(self) -> Generator[tuple[str | ForeignKey, CallRecord | None, str | None]]:
        """(key, record, problem) as `inspect` gives them, for every entry (foreign ones too), in the
        order they were stored (see `entries`), for the tools that read the whole store (`cache
        verify`, `cache export`).

        Read a page of rows a statement (pipeline.llm.cache.bulk.rows_in_order), not a key listed,
        then looked up: a lookup searched the key index and read the row's table page again, which
        at a million entries SQLite's page cache of 1 MB no longer held (issue 33). And while the
        tool reads, this thread's connection to the blocks holds WHOLE_READ_PAGES pages, not 256:
        every record's request is rebuilt from its blocks, 6 to 30 lookups by id in their index."""
        self.flush()
        with self._roomy_pages():
            after = 0
            while True:
                with database_errors(self.db_path):
                    rows = bulk.rows_in_order(self._cache, after)
                if not rows:
                    return
                for rowid, stored_key, raw_key, mode, filename, value in rows:
                    after = rowid
                    key = self._cache.disk.get(stored_key, raw_key)
                    yield key, *self._inspect_row(key, mode, filename, value)

    @guarded
    def _inspect_row(
        self, key: str | ForeignKey, mode: int, filename: str | None, value: Any
    ) -> tuple[CallRecord | None, str | None]:
        if isinstance(key, ForeignKey):
            return self.inspect(key)
        try:
            return self._decoded(key, self._cache.disk.fetch(mode, filename, value, False), None, False), None
        except RefusedValue as exc:
            return None, f"holds {exc}"
        except Damage as exc:
            return None, str(exc)

    @contextlib.contextmanager
    def _roomy_pages(self) -> Iterator[None]:
        """This thread's connection to the blocks with WHOLE_READ_PAGES of page cache, then as before (a
        connection closed meanwhile is left closed)."""
        with database_errors(self.db_path):
            connections = [self.blocks.cache._con]  # the records themselves are read in order
            for connection in connections:
                connection.execute(f"PRAGMA cache_size = {WHOLE_READ_PAGES}")
        try:
            yield
        finally:
            for connection in connections:
                with contextlib.suppress(sqlite3.Error):  # closed: nothing to put back
                    connection.execute(f"PRAGMA cache_size = {SETTINGS['sqlite_cache_size']}")

    @guarded
    def get_raw(self, key: str) -> bytes | None:
        try:
            raw = self._cache.get(key)
        except RefusedValue:
            return None
        return None if raw is None else bytes(raw)

    @guarded
    def put(self, record: CallRecord) -> None:
        key, value, blocks = self._packed(record)
        self.blocks.add(blocks)  # before the record that refers to them
        self._cache.set(key, value)

    def _packed(
        self, record: CallRecord, layout: list[Laid] | None = None
    ) -> tuple[str, bytes, dict[str, bytes] | dict[str, bytes | str]]:
        header = record.model_dump_json(exclude={"request"}).encode()
        laid = None if layout is None else pack_laid(record.request, layout)
        request, blocks = pack_request(record.request) if laid is None else laid
        return record.key, b"".join((MAGIC, seal(header), b"\n", header, b"\n", request)), blocks

    def seed(self, record: CallRecord, layout: list[Laid] | None = None) -> None:
        """Keep a verified record from the recordings here too, unless its key is stored already;
        written with others in one transaction (see "Seeding" above), at the latest by `close`.
        `layout`: its messages as its verified recording line lays them out, each joining to the
        message's text (pipeline.llm.blocks.Laid): the entry is then built from the recording's own
        blocks, not by cutting and hashing the prompts again, and is the same bytes."""
        with self._seeds_lock:
            self._seeds.setdefault(record.key, (record, layout))
            if len(self._seeds) < SEED_BATCH:
                return
        self.flush()

    @guarded
    def flush(self) -> None:
        """Write the records `seed` gathered (those whose keys are not stored yet)."""
        with self._seeds_lock:
            records, self._seeds = self._seeds, {}
            if not records:
                return
            held = bulk.stored(self._cache, list(records))  # one statement a batch (pipeline.llm.cache.bulk)
            packed = [self._packed(*seeded) for key, seeded in records.items() if key not in held]
            self.blocks.add({ident: data for _, _, blocks in packed for ident, data in blocks.items()})
            # As add: an entry written since by another process stays.
            bulk.add_new(self._cache, ((key, value) for key, value, _ in packed))

    @guarded
    def put_raw(self, key: str, raw: bytes) -> None:
        self._cache.set(key, raw)

    @guarded
    def delete(self, key: str | ForeignKey) -> bool:
        self.flush()
        return bool(self._cache.delete(key))

    @guarded
    def __contains__(self, key: str) -> bool:
        return key in self._seeds or key in self._cache

    @guarded
    def __len__(self) -> int:
        self.flush()
        return len(self._cache)

    def entries(self) -> Iterator[str | ForeignKey]:
        """Every key, foreign ones too (undecoded), for the tools that check and repair, in the order
        they were stored (issue 33), for two reasons:

        - diskcache's `iterkeys` (by key) is quadratic: each page of 100 keys is found by a scan of
          the key index from its start (its WHERE's OR defeats the seek), 65 ms a page at 329k
          blocks; listing by rowid seeks. At 96,355 calls `cache gc` took 52 s of CPU for
          7.4 at 28,773.
        - A tool that reads every record whole reads an item's calls together, as a stage stores
          them, and they share the item's blocks, which the block store then finds among those it
          verified last (VERIFIED_CHARS) instead of reading, inflating and hashing them again. By
          key, all items interleave: `cache verify` at 28,773 calls read 13.0 blocks a record by
          key and 8.4 as stored (3.7 at 9,683 calls in either order)."""
        self.flush()
        with database_errors(self.db_path):
            yield from self._cache  # by rowid

    def keys(self) -> Iterator[str]:
        """Every key; CorruptRecordError at a key judgeloop never writes (see `entries`)."""
        for key in self.entries():
            if isinstance(key, ForeignKey):
                raise CorruptRecordError(
                    f"{self.db_path}: holds {key}, which judgeloop never writes: refused. "
                    "Fix: run `judgeloop cache verify --repair`, which deletes it."
                )
            yield key

    @guarded
    def volume(self) -> int:
        """Bytes held: the records and their blocks."""
        self.flush()
        return int(self._cache.volume()) + int(self.blocks.cache.volume())

    @guarded
    def collect_blocks(self, *, dry_run: bool = False, dropping: frozenset[str] = frozenset()) -> Collected:
        """Delete the blocks no record refers to (`dropping`: records counted as gone already, for a
        dry run). The blocks are listed before the records are read, so a block stored meanwhile
        by a run is never taken."""
        self.flush()
        listed = list(self.blocks.cache)  # by rowid: iterkeys is quadratic (see `entries`)
        referred: set[bytes] = set()
        for key in list(self._cache):
            if key in dropping:
                continue
            with contextlib.suppress(RefusedValue):  # a refused entry refers to nothing we keep
                raw = self._cache.get(key)
                if isinstance(raw, bytes) and raw.startswith(MAGIC):
                    referred.update(references(raw[raw.find(b"\n", _SEAL_END + 1) + 1 :]))
        unused = [ident for ident in listed if not isinstance(ident, str) or ident.encode() not in referred]
        freed = 0
        for ident in unused:
            with contextlib.suppress(RefusedValue):
                freed += len(self.blocks.cache.get(ident) or b"")
            if not dry_run:
                self.blocks.cache.delete(ident)
        if not dry_run:
            self.blocks.forget()
        return Collected(len(unused), len(listed), freed)

    def close(self) -> None:
        self.flush()
        self._cache.close()
        self.blocks.cache.close()
