"""A stage re-opening an existing local cache writes nothing to it (pipeline.llm.cache.reopen), and
gets the cache diskcache's own open would give; any other database is opened, and written, as before."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
from pathlib import Path

import diskcache
import pytest

from pipeline.errors import CacheError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.safe_disk import DB_FILE, SETTINGS, SafeDisk, check_database, open_cache
from pipeline.llm.cache.schema import PINNED_OPENED, PINNED_VERSION, read_schema
from pipeline.llm.cache.store import BLOCKS_DIR, CallStore
from pipeline.llm.records import CallRecord
from tests.helpers import request

PRAGMAS = ("cache_size", "mmap_size", "synchronous", "journal_mode", "auto_vacuum", "busy_timeout")


def a_cache(tmp_path: Path) -> tuple[Path, CallRecord]:
    folder = tmp_path / "cache"
    store = CallStore(folder)
    fake = FakeBackend()
    req = request("judge this")
    record = CallRecord.new(fake.identity(), req, fake.chat(req))
    store.put(record)
    store.close()
    return folder, record


def databases(folder: Path) -> list[Path]:
    return [folder / DB_FILE, folder / BLOCKS_DIR / DB_FILE]


def settings_rows(path: Path) -> list[tuple[int, str, object]]:
    with contextlib.closing(sqlite3.connect(path)) as con:
        return con.execute("SELECT rowid, key, value FROM Settings ORDER BY key").fetchall()


def test_a_stage_reopening_the_cache_writes_nothing_to_it(tmp_path: Path) -> None:
    """diskcache's open rewrote every setting (INSERT OR REPLACE: each row anew) and checkpointed the
    WAL it wrote, three fdatasyncs a database, at every stage's start (issue 31)."""
    folder, record = a_cache(tmp_path)
    before = {path: (path.read_bytes(), settings_rows(path)) for path in databases(folder)}
    store = CallStore(folder)
    assert store.get(record.key) == record  # served as before, from the same entry
    store.close()
    for path, (data, rows) in before.items():
        assert settings_rows(path) == rows  # not one settings row rewritten
        assert path.read_bytes() == data
        assert not path.with_name(f"{DB_FILE}-wal").exists()  # nothing written, nothing left to checkpoint


def test_a_reopened_cache_is_the_one_diskcache_opens(tmp_path: Path) -> None:
    folder, _ = a_cache(tmp_path)
    assert check_database(folder)
    full = diskcache.Cache(str(folder), timeout=60, disk=SafeDisk, **SETTINGS)
    reopened = open_cache(folder)
    try:

        def state(cache: diskcache.Cache) -> tuple[object, ...]:
            kept = {key: value for key, value in vars(cache).items() if key not in {"_local", "_disk"}}
            pragmas = [cache._sql(f"PRAGMA {name}").fetchall() for name in PRAGMAS]
            return type(cache), kept, type(cache.disk), vars(cache.disk), pragmas

        assert state(reopened) == state(full)
    finally:
        full.close()
        reopened.close()


def test_a_new_cache_holds_the_pinned_objects_of_an_open_one(tmp_path: Path) -> None:
    if diskcache.__version__ != PINNED_VERSION:
        pytest.skip("the pin is for diskcache's pinned version; other versions are opened by diskcache")
    folder, _ = a_cache(tmp_path)
    for path in databases(folder):
        with contextlib.closing(sqlite3.connect(path)) as con:
            assert read_schema(con) == PINNED_OPENED


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE Settings SET value = 8192 WHERE key = 'sqlite_cache_size'",  # an older judgeloop's setting
        "UPDATE Settings SET value = 256.0 WHERE key = 'sqlite_cache_size'",  # equal, but another type
        "DELETE FROM Settings WHERE key = 'sqlite_mmap_size'",
        "DELETE FROM Settings WHERE key = 'hits'",
        "DROP INDEX Cache_expire_time",
        "CREATE INDEX Cache_store_time ON Cache (store_time)",  # diskcache's, of another eviction policy
    ],
)
def test_a_database_not_as_an_open_leaves_it_is_opened_by_diskcache_and_then_is(
    tmp_path: Path, statement: str
) -> None:
    folder, record = a_cache(tmp_path)
    with contextlib.closing(sqlite3.connect(folder / DB_FILE)) as con, con:
        con.execute(statement)
    assert not check_database(folder)
    store = CallStore(folder)
    assert store.get(record.key) == record
    assert store._cache.sqlite_cache_size == 256
    assert store._cache._sql("PRAGMA cache_size").fetchone() == (256,)
    store.close()
    with contextlib.closing(sqlite3.connect(folder / DB_FILE)) as con:
        assert dict(con.execute("SELECT key, value FROM Settings").fetchall())["sqlite_cache_size"] == 256
    if "store_time" not in statement:  # diskcache keeps another policy's index: opened by it every time
        assert check_database(folder)


def test_a_cache_that_cannot_be_written_fails_when_it_is_reopened(tmp_path: Path) -> None:
    """The reopen writes nothing, yet a database that cannot be written still fails at the open,
    before any call is made (as tests/test_cache_database_errors.py's batch run shows end to end)."""
    folder, _ = a_cache(tmp_path)
    assert check_database(folder)
    chattr = shutil.which("chattr")
    path = folder / DB_FILE
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here: a read-only file cannot be made for root")
    try:
        with pytest.raises(CacheError, match="the local cache cannot be written"):
            CallStore(folder)
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)
