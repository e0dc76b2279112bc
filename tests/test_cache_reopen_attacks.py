"""review15's attacks on the local cache's reopen (pipeline.llm.cache.reopen): a database someone else
prepared, in every way that still passes the trust checks, is opened by the reopen into exactly the
Cache diskcache's own open makes of it (attributes, disk, every pragma, and the file after a write); and
the folder diskcache opens is the one judgeloop checked."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import diskcache
import pytest

from pipeline.errors import CorruptRecordError, UnsafeNameError
from pipeline.llm.cache.safe_disk import DB_FILE, SETTINGS, SafeDisk, check_database, open_cache
from pipeline.llm.cache.store import BLOCKS_DIR, CallStore
from tests.test_cache_reopen import a_cache

PRAGMAS = (
    *("cache_size", "mmap_size", "synchronous", "journal_mode", "auto_vacuum", "busy_timeout"),
    *("page_size", "encoding", "user_version", "application_id", "locking_mode", "secure_delete"),
    *("foreign_keys", "recursive_triggers", "temp_store", "wal_autocheckpoint", "journal_size_limit"),
    *("cache_spill", "query_only", "trusted_schema", "cell_size_check", "automatic_index"),
)
ON_THE_FILE = ("auto_vacuum", "journal_mode", "page_size", "encoding", "freelist_count", "user_version")
# A database held as wanted (same settings, same objects) whatever else its file says.
PREPARED = {
    "as left": [],
    "rollback journal": ["PRAGMA journal_mode=delete"],
    "no auto-vacuum": [
        "PRAGMA journal_mode=delete",
        "PRAGMA auto_vacuum=0",
        "VACUUM",
        "PRAGMA journal_mode=wal",
    ],
    "incremental vacuum": ["PRAGMA auto_vacuum=2", "VACUUM"],
    "512-byte pages": [
        "PRAGMA journal_mode=delete",
        "PRAGMA page_size=512",
        "VACUUM",
        "PRAGMA journal_mode=wal",
    ],
    "odd counters": [
        "UPDATE Settings SET value = 'abc' WHERE key = 'count'",
        "UPDATE Settings SET value = 1.5 WHERE key = 'size'",
        "UPDATE Settings SET value = NULL WHERE key = 'hits'",
    ],
    "versions in the header": ["PRAGMA user_version=7", "PRAGMA application_id=9"],
    "a bool stored for 1": ["UPDATE Settings SET value = TRUE WHERE key = 'sqlite_synchronous'"],
    "rows reordered": [
        "CREATE TEMP TABLE s AS SELECT * FROM Settings ORDER BY key DESC",
        "DELETE FROM Settings",
        "INSERT INTO Settings SELECT * FROM s",
    ],
}
# Lookalikes of a setting: each is opened (and written) by diskcache, never taken as held.
LOOKALIKES = {
    "1.0 for 1": "UPDATE Settings SET value = 1.0 WHERE key = 'sqlite_synchronous'",
    "'1' for 1": "UPDATE Settings SET value = '1' WHERE key = 'sqlite_synchronous'",
    "'WAL' for 'wal'": "UPDATE Settings SET value = 'WAL' WHERE key = 'sqlite_journal_mode'",
    "2**62 as a float": "UPDATE Settings SET value = 4611686018427387904.0 WHERE key = 'size_limit'",
    "another policy": "UPDATE Settings SET value = 'least-recently-used' WHERE key = 'eviction_policy'",
    "another size limit": "UPDATE Settings SET value = 1024 WHERE key = 'size_limit'",
    "another cull limit": "UPDATE Settings SET value = 0 WHERE key = 'cull_limit'",
    "another pickle protocol": "UPDATE Settings SET value = 5 WHERE key = 'disk_pickle_protocol'",
    "memory-mapped": "UPDATE Settings SET value = 67108864 WHERE key = 'sqlite_mmap_size'",
    "synchronous off": "UPDATE Settings SET value = 0 WHERE key = 'sqlite_synchronous'",
    "journal off": "UPDATE Settings SET value = 'off' WHERE key = 'sqlite_journal_mode'",
    "a tag index asked": "UPDATE Settings SET value = 1 WHERE key = 'tag_index'",
}


def run(path: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        for statement in statements:
            con.execute(statement)


def state(cache: diskcache.Cache) -> tuple[object, ...]:
    """Everything a Cache is, less the folder it was opened in (the two opens below use two copies)."""
    kept = {key: value for key, value in vars(cache).items() if key not in {"_local", "_disk", "_directory"}}
    disk = {key: value for key, value in vars(cache.disk).items() if key != "_directory"}
    pragmas = {name: cache._sql(f"PRAGMA {name}").fetchall() for name in PRAGMAS}
    return type(cache), kept, type(cache.disk), disk, pragmas


def on_the_file(path: Path) -> dict[str, object]:
    with contextlib.closing(sqlite3.connect(path)) as con:
        return {name: con.execute(f"PRAGMA {name}").fetchall() for name in ON_THE_FILE}


def two_copies(tmp_path: Path, statements: list[str]) -> tuple[Path, Path]:
    folder, _ = a_cache(tmp_path)
    run(folder / DB_FILE, *statements)
    return shutil.copytree(folder, tmp_path / "reopened"), shutil.copytree(folder, tmp_path / "diskcache")


@pytest.mark.parametrize("statements", PREPARED.values(), ids=PREPARED)
def test_a_prepared_database_held_as_wanted_is_reopened_as_diskcache_opens_it(
    tmp_path: Path, statements: list[str]
) -> None:
    fast, full = two_copies(tmp_path, statements)
    assert check_database(fast)  # the reopen is what is under test
    reopened = open_cache(fast)
    opened = diskcache.Cache(str(full), timeout=60, disk=SafeDisk, **SETTINGS)
    try:
        assert state(reopened) == state(opened)
        for cache in (reopened, opened):
            cache.set("key", b"value")
            assert cache.get("key") == b"value"
            assert cache.cull() == 0  # eviction off: nothing culled, both ways
    finally:
        reopened.close()
        opened.close()
    assert on_the_file(fast / DB_FILE) == on_the_file(full / DB_FILE)


@pytest.mark.parametrize("statement", LOOKALIKES.values(), ids=LOOKALIKES)
def test_a_lookalike_setting_is_opened_by_diskcache_and_then_reopened_as_it(
    tmp_path: Path, statement: str
) -> None:
    fast, full = two_copies(tmp_path, [statement])
    assert not check_database(fast)
    open_cache(fast).close()  # diskcache's open: our settings written over the lookalike
    assert check_database(fast)
    reopened = open_cache(fast)
    opened = diskcache.Cache(str(full), timeout=60, disk=SafeDisk, **SETTINGS)
    try:
        assert state(reopened) == state(opened)
    finally:
        reopened.close()
        opened.close()


@pytest.mark.parametrize(
    "path", ["$JUDGELOOP_REVIEW15_ELSEWHERE/cache", "~/cache", "a/${JUDGELOOP_REVIEW15_ELSEWHERE}"]
)
def test_a_cache_folder_diskcache_would_read_as_another_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """diskcache expands `~` and `$NAME` in the folder it is given: it would open (and create) the
    database elsewhere than the folder whose links, hard links and schema judgeloop checked, and there
    a database nobody checked (a trigger that rewrites every reply) would be used as is."""
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("JUDGELOOP_REVIEW15_ELSEWHERE", str(elsewhere))
    monkeypatch.setenv("HOME", str(elsewhere))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafeNameError, match="diskcache would open"):
        CallStore(Path(path))
    assert not elsewhere.exists()
    assert list(tmp_path.iterdir()) == []  # nor the folder as named


def test_a_cache_folder_with_a_dollar_that_names_no_variable_is_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUDGELOOP_REVIEW15_UNSET", raising=False)
    folder = tmp_path / "$JUDGELOOP_REVIEW15_UNSET" / "cache"
    CallStore(folder).close()
    assert (folder / DB_FILE).is_file() and (folder / BLOCKS_DIR / DB_FILE).is_file()


# Objects that wear diskcache's names: never held as wanted, and refused unopened where diskcache
# does not create them as they are.
TRIGGER = "CREATE TRIGGER Settings_count_insert AFTER INSERT ON Cache FOR EACH ROW BEGIN "
LOOKALIKE_OBJECTS = {
    "a trigger of diskcache's name, other SQL": [
        "DROP TRIGGER Settings_count_insert",
        TRIGGER + 'UPDATE Settings SET value = value + 2 WHERE key = "count"; END',
    ],
    "a trigger of diskcache's name, its SQL spaced otherwise": [
        "DROP TRIGGER Settings_count_insert",
        TRIGGER + ' UPDATE Settings SET value = value + 1 WHERE key = "count"; END',
    ],
    "an index of diskcache's name on other columns": [
        "DROP INDEX Cache_expire_time",
        "CREATE INDEX Cache_expire_time ON Cache (store_time)",
    ],
    "a partial index of diskcache's name": [
        "DROP INDEX Cache_expire_time",
        "CREATE INDEX Cache_expire_time ON Cache (expire_time) WHERE 0",
    ],
    "a view named as a policy's index": ["CREATE VIEW Cache_store_time AS SELECT * FROM Cache"],
    "an extra trigger": ["CREATE TRIGGER Cache_more AFTER UPDATE ON Settings BEGIN SELECT 1; END"],
    "ANALYZE's table": ["ANALYZE"],
}


@pytest.mark.parametrize("statements", LOOKALIKE_OBJECTS.values(), ids=LOOKALIKE_OBJECTS)
def test_an_object_wearing_diskcache_s_name_is_refused_unopened(
    tmp_path: Path, statements: list[str]
) -> None:
    folder, _ = a_cache(tmp_path)
    run(folder / DB_FILE, *statements)
    before = (folder / DB_FILE).read_bytes()
    with pytest.raises(CorruptRecordError, match="holds what diskcache never writes"):
        CallStore(folder)
    assert (folder / DB_FILE).read_bytes() == before


def test_diskcache_s_own_tag_index_is_dropped_by_its_open_then_reopened(tmp_path: Path) -> None:
    folder, record = a_cache(tmp_path)
    run(folder / DB_FILE, "CREATE INDEX Cache_tag_rowid ON Cache(tag, rowid)")
    assert not check_database(folder)
    store = CallStore(folder)
    assert store.get(record.key) == record
    store.close()
    assert check_database(folder)


def test_a_wal_beside_the_database_is_what_the_checks_read(tmp_path: Path) -> None:
    """A collaborator's copy of cache.db with its -wal (no -shm): the trigger committed in the WAL is
    seen by the read-only check, as by the connection that would run it."""
    folder, _ = a_cache(tmp_path)
    with contextlib.closing(sqlite3.connect(folder / DB_FILE, isolation_level=None)) as writer:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TRIGGER Cache_wipe AFTER INSERT ON Cache BEGIN DELETE FROM Cache; END")
        copy = tmp_path / "copy"
        copy.mkdir()
        for name in (DB_FILE, f"{DB_FILE}-wal"):
            shutil.copyfile(folder / name, copy / name)
    assert (copy / f"{DB_FILE}-wal").stat().st_size > 0
    with pytest.raises(CorruptRecordError, match="trigger Cache_wipe"):
        check_database(copy)


def test_a_cache_plain_diskcache_made_under_other_settings_is_opened_as_diskcache_opens_it(
    tmp_path: Path,
) -> None:
    """Its policy's index stays (diskcache never drops one), so it is opened by diskcache every time,
    under judgeloop's settings: no eviction, whatever size and cull limit it was made with."""
    made = tmp_path / "made"
    other = {"eviction_policy": "least-recently-used", "size_limit": 2**16, "cull_limit": 3}
    plain = diskcache.Cache(str(made), disk_pickle_protocol=2, sqlite_mmap_size=2**20, **other)
    plain.set("a key", b"x" * 600)
    plain.close()
    for _ in range(2):
        assert not check_database(made)
        copy = shutil.copytree(made, tmp_path / "copy", dirs_exist_ok=True)
        ours = open_cache(made)
        theirs = diskcache.Cache(str(copy), timeout=60, disk=SafeDisk, **SETTINGS)
        try:
            assert state(ours) == state(theirs)
            assert ours.eviction_policy == "none" and ours.size_limit == 2**62
            for i in range(3):  # value files, over the old size limit: nothing evicted
                ours.set(f"k{i}", b"y" * 40_000)
            assert ours.volume() > 2**16
            assert ours.get("a key") == b"x" * 600 and len(ours) == 4
        finally:
            ours.close()
            theirs.close()


def test_a_cache_database_that_is_a_pipe_is_refused_rather_than_waited_on(tmp_path: Path) -> None:
    """SQLite opens a `cache.db` that is a named pipe and waits, for ever, for someone to write into
    it. Opened in a child process, so that a wait fails this test rather than hanging it."""
    folder = tmp_path / "cache"
    folder.mkdir()
    os.mkfifo(folder / DB_FILE)
    opening = "from pathlib import Path; from pipeline.llm.cache.store import CallStore; "
    opening += f"CallStore(Path({str(folder)!r}))"
    try:
        done = subprocess.run([sys.executable, "-c", opening], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the open waited on the pipe")
    assert "CorruptRecordError" in done.stderr and "not a file" in done.stderr
