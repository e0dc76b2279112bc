"""The local call store: one diskcache, key -> CallRecord as JSON, checked on every read.

A cache folder may come from someone else (a shared folder, a colleague's copy, a remote), so
opening and reading it must be safe whoever wrote it:

- No pickle, no settings or schema from the file, nothing written outside the folder: the store
  opens its databases through pipeline.llm.cache.safe_disk.
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
import sqlite3
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import CorruptRecordError
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
from pipeline.llm.cache.safe_disk import (
    DB_FILE,
    SETTINGS,
    ForeignKey,
    RefusedValue,
    open_cache,
    refuse_expanded,
)
from pipeline.llm.closing import each_step
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity

MAGIC = b"jlr3 "  # today's format: the request as block references
WHOLE_REQUEST = b"jlr2 "  # the previous one: the request whole (read, never written)
_SEAL_END = len(MAGIC) + 64  # the seal: 64 hex digits, then a newline
REPAIR = (
    "Fix: run `judgeloop cache verify --repair`, which deletes the damaged entry; the call is then "
    "made again (or, in replay, taken from the recordings)."
)
BLOCKS_DIR = "blocks"  # the block store: a diskcache of its own inside the cache folder
SEED_BATCH = 512  # seeded records written per transaction
# The page cache of the blocks' connection while a tool reads the whole store
# (CallStore.inspect_in_order): 65,536 pages, 256 MB at most, filled only as pages are read. Each
# record's request is rebuilt from its blocks, 6 to 30 lookups by id in the blocks' key index, whose
# pages 256 held at 96k calls and not at 964k (a 3.3M-block index of about 130 MB): an assessment
# record then read 43 pages from the file against 24.5 at 96k, and 5.6 with this (bench/README,
# "cache verify's growth"). A tool holds one connection to it, not a replay's ~17 threads of them.
WHOLE_READ_PAGES = 65_536


@dataclass(frozen=True)
class Collected:
    """What `cache gc` did to the blocks: deleted (or would), of how many, bytes freed."""

    deleted: int
    blocks: int
    freed: int


Seed = tuple[CallRecord, list[Laid] | None]  # a verified record to seed and its layout (CallStore.seed)


def _built(key: str, seed: Seed | Callable[[], Seed]) -> Seed:
    """The record and layout to seed under `key`, built now where it was seeded to build later."""
    if not callable(seed):
        return seed
    built = seed()
    if built[0].key != key:
        raise CorruptRecordError(f"the record built to seed the local cache under {key} is {built[0].key}'s")
    return built


def _all_built(
    seeds: dict[str, Seed | Callable[[], Seed]], held: set[str]
) -> tuple[list[Seed], CorruptRecordError | None]:
    """The seeds whose keys are not `held`, each built where it was seeded to build later, and the
    first build that failed (that seed left out): the others are still written (issue 33, review10:
    a line changed on disk after it was served lost its whole batch, up to SEED_BATCH calls)."""
    built: list[Seed] = []
    failed: CorruptRecordError | None = None
    for key, seed in seeds.items():
        if key in held:
            continue
        try:
            built.append(_built(key, seed))
        except CorruptRecordError as exc:
            failed = failed or exc
    return built, failed


class Damage(Exception):
    """Why a stored entry cannot be served (internal: CallStore turns it into CorruptRecordError)."""


def _shallow(fields: Any) -> None:
    """ValueError for a row nested deeper than a record is (pipeline.llm.bounds), before anything
    walks it: a RecursionError would name neither the row nor the fix."""
    if (deep := depth_problem(fields)) is not None:
        raise ValueError(deep)


def seal(header: bytes) -> bytes:
    return hashlib.sha256(header).hexdigest().encode()


class CallStore:
    """Every method that touches the database says a failure of it (read-only, full, damaged) with
    its path and the fix (pipeline.llm.cache.errors), never as a sqlite3 traceback."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.db_path = directory / DB_FILE
        with database_errors(self.db_path):
            refuse_expanded(directory)  # before anything is made there (open_cache asks again)
            directory.mkdir(parents=True, exist_ok=True)
            self._cache = open_cache(directory)
        blocks_dir = directory / BLOCKS_DIR
        with database_errors(blocks_dir / DB_FILE):
            if blocks_dir.exists() and not blocks_dir.is_dir():  # a link was refused above
                raise CorruptRecordError(
                    f"{blocks_dir}: not a folder, where the cache keeps its blocks. Fix: move it away "
                    "(a run then starts the blocks anew; entries whose blocks are gone are rebuilt)."
                )
            blocks_dir.mkdir(exist_ok=True)
            self.blocks = BlockStore(open_cache(blocks_dir))
        self._identities: dict[tuple[Any, ...], ModelIdentity] = {}
        self._seeds: dict[str, Seed | Callable[[], Seed]] = {}  # by key: to write (`seed`, `seed_later`)
        self._seeds_lock = threading.Lock()

    def get(self, key: str, request: ChatRequest | None = None) -> CallRecord | None:
        """The record stored under key, verified, or None. Given the request the key was derived
        from, only the header is parsed (its seal checked); without it (audits, verify) the stored
        request is read too, rebuilt from its blocks. CorruptRecordError, naming the file, the key and
        the fix, for an entry that is damaged, edited, foreign, or not judgeloop's."""
        seeded = self._seeds.get(key)
        if seeded is not None:
            return _built(key, seeded)[0]
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

    def seed(self, record: CallRecord, layout: list[Laid] | None = None) -> int:
        """Keep a verified record from the recordings here too, unless its key is stored already;
        written with others in one transaction (see "Seeding" above), at the latest by `close`.
        `layout`: its messages as its verified recording line lays them out, each joining to the
        message's text (pipeline.llm.blocks.Laid): the entry is then built from the recording's own
        blocks, not by cutting and hashing the prompts again, and is the same bytes. Returns how
        many records the write it made, if it made one, stored (`flush`); 0 while it gathers."""
        return self._gather(record.key, (record, layout))

    def seed_later(self, key: str, build: Callable[[], Seed]) -> int:
        """As `seed`, for a verified record not built yet: `build` makes it and its layout when its
        batch is written, and only if `key` is not stored by then (issue 33: a call a stage adopts
        from its recording, served from its line; a warm replay builds none). The same entry as
        `seed` with what `build` returns, in the same place among the batch's. CorruptRecordError
        where it builds another key's record, or raises as `build` does."""
        return self._gather(key, build)

    def _gather(self, key: str, seed: Seed | Callable[[], Seed]) -> int:
        with self._seeds_lock:
            self._seeds.setdefault(key, seed)
            if len(self._seeds) < SEED_BATCH:
                return 0
        return self.flush()

    def flush(self) -> int:
        """Write the records `seed` gathered (those whose keys are not stored yet): how many were
        written, the others' keys being stored already (batch ingest's count, without a lookup of
        each key on its own). CorruptRecordError, once the others are written, where a record seeded
        to build later cannot be built (`seed_later`)."""
        with self._seeds_lock:
            seeds, self._seeds = self._seeds, {}
            if not seeds:
                return 0
            held = self._stored(list(seeds))
            # Built outside `guarded`: a recording's error is the recording's, not the database's.
            built, failed = _all_built(seeds, held)
            written = self._add_seeds(built)
        if failed is not None:
            raise failed  # once the others are written: one recording's fault costs no other seed
        return written

    @guarded
    def _stored(self, keys: list[str]) -> set[str]:
        return bulk.stored(self._cache, keys)  # one statement a batch (pipeline.llm.cache.bulk)

    @guarded
    def _add_seeds(self, seeds: list[Seed]) -> int:
        packed = [self._packed(*seed) for seed in seeds]
        self.blocks.add({ident: data for _, _, blocks in packed for ident, data in blocks.items()})
        # As add: an entry written since by another process stays (and is not counted).
        return bulk.add_new(self._cache, ((key, value) for key, value, _ in packed))

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
        """The seeds gathered written, then both databases closed, though the write failed
        (pipeline.llm.closing): its error raised after."""
        each_step(self.flush, self._cache.close, self.blocks.cache.close)
