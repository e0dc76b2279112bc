"""What a cache database made by diskcache holds: every table, index and trigger, with its full SQL.

A cache folder may come from someone else, and SQLite runs whatever a database's triggers say on
every write: a trigger that wears diskcache's own name (`Settings_count_insert`) but whose body
rewrites the value just stored, or deletes every row, would swap in forged replies or empty the
cache behind judgeloop's back. So names are not enough: `schema_problems` compares each object of
the database (type, name, table, SQL as SQLite stores it) with what diskcache itself creates, and
names every one that differs or that diskcache never creates (a view, another table).

The expected schema is pinned for the diskcache judgeloop is tested with (deriving it costs a few
hundred milliseconds, once per process, and every stage opens the cache): for any other diskcache
version it is derived from fresh caches made in a temporary folder, one per eviction policy and
tag-index setting, since a cache made under other settings keeps the index of its policy.
tests/test_trust_schema.py checks the pin against the derivation.
"""

from __future__ import annotations

import functools
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import diskcache

SchemaObject = tuple[str, str, str, str | None]  # type, name, table, SQL (None: SQLite's own index)

PINNED_VERSION = "5.6.3"
_COUNT = 'UPDATE Settings SET value = value {} WHERE key = "{}"; END'
PINNED: frozenset[SchemaObject] = frozenset(
    {
        ("table", "Settings", "Settings", "CREATE TABLE Settings ( key TEXT NOT NULL UNIQUE, value)"),
        ("index", "sqlite_autoindex_Settings_1", "Settings", None),
        (
            "table",
            "Cache",
            "Cache",
            "CREATE TABLE Cache ( rowid INTEGER PRIMARY KEY, key BLOB, raw INTEGER, store_time REAL, "
            "expire_time REAL, access_time REAL, access_count INTEGER DEFAULT 0, tag BLOB, size INTEGER "
            "DEFAULT 0, mode INTEGER DEFAULT 0, filename TEXT, value BLOB)",
        ),
        ("index", "Cache_key_raw", "Cache", "CREATE UNIQUE INDEX Cache_key_raw ON Cache(key, raw)"),
        ("index", "Cache_expire_time", "Cache", "CREATE INDEX Cache_expire_time ON Cache (expire_time)"),
        ("index", "Cache_store_time", "Cache", "CREATE INDEX Cache_store_time ON Cache (store_time)"),
        ("index", "Cache_access_time", "Cache", "CREATE INDEX Cache_access_time ON Cache (access_time)"),
        ("index", "Cache_access_count", "Cache", "CREATE INDEX Cache_access_count ON Cache (access_count)"),
        ("index", "Cache_tag_rowid", "Cache", "CREATE INDEX Cache_tag_rowid ON Cache(tag, rowid)"),
        *(
            (
                "trigger",
                f"Settings_{name}",
                "Cache",
                f"CREATE TRIGGER Settings_{name} AFTER {event} ON Cache FOR EACH ROW BEGIN "
                + _COUNT.format(change, key),
            )
            for name, event, change, key in (
                ("count_insert", "INSERT", "+ 1", "count"),
                ("count_delete", "DELETE", "- 1", "count"),
                ("size_insert", "INSERT", "+ NEW.size", "size"),
                ("size_update", "UPDATE", "+ NEW.size - OLD.size", "size"),
                ("size_delete", "DELETE", "- OLD.size", "size"),
            )
        ),
    }
)

# What a database that diskcache opened under judgeloop's settings holds (pipeline.llm.cache.reopen):
# no eviction policy's index (eviction is off) and no tag index. tests/test_cache_reopen.py checks it
# against a new cache's.
PINNED_OPENED: frozenset[SchemaObject] = frozenset(
    entry
    for entry in PINNED
    if entry[1] not in {"Cache_store_time", "Cache_access_time", "Cache_access_count", "Cache_tag_rowid"}
)


def read_schema(con: sqlite3.Connection) -> set[SchemaObject]:
    return {
        (t, n, tbl, sql)
        for t, n, tbl, sql in con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
    }


@functools.cache
def derived_schema(settings: tuple[tuple[str, Any], ...]) -> frozenset[SchemaObject]:
    """Every object diskcache creates under these settings, for any eviction policy and tag index."""
    found: set[SchemaObject] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for policy in diskcache.EVICTION_POLICY:
            for tag_index in (False, True):
                folder = Path(tmp) / f"{policy}-{tag_index}"
                options = {**dict(settings), "eviction_policy": policy, "tag_index": tag_index}
                diskcache.Cache(str(folder), **options).close()
                con = sqlite3.connect(folder / "cache.db")
                try:
                    found |= read_schema(con)
                finally:
                    con.close()
    return frozenset(found)


def expected_schema(settings: dict[str, Any]) -> frozenset[SchemaObject]:
    if diskcache.__version__ == PINNED_VERSION:
        return PINNED
    return derived_schema(tuple(sorted(settings.items())))


def schema_problems(con: sqlite3.Connection, settings: dict[str, Any]) -> list[str]:
    """Each table, index, trigger or view of the database that diskcache does not create as it is."""
    expected = expected_schema(settings)
    known = {(kind, name) for kind, name, _, _ in expected}
    odd = []
    for kind, name, table, _ in sorted(read_schema(con) - expected, key=lambda o: (o[0], o[1], o[2])):
        why = (
            "whose SQL differs from diskcache's" if (kind, name) in known else "that diskcache never creates"
        )
        odd.append(f"{kind} {name} on {table} {why}")
    return odd
