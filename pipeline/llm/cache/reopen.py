"""Opening a cache database that already holds what opening it would write, without writing it again.

diskcache's `Cache()` writes its database at every open: each setting stored again (an INSERT OR
REPLACE, then an UPDATE: about thirty write transactions), its tables, indexes and triggers created
if missing, then its connection closed and another opened. Closing the last connection checkpoints
the WAL those writes made: three fdatasyncs a database, and every stage opens two, the records and
the blocks (issue 31: 0.03-0.11 s of wall at load in each stage head for 0.015 s of CPU;
bench/README.md, "heads-sync"). Where the database holds those rows and objects already, as every
open after the first leaves it, none of these writes changes it: `reopened` makes the same Cache
without them.

Held as wanted (`held_as_wanted`, asked on safe_disk.check_database's read-only connection, after
its trust checks): diskcache is the version whose open this follows (schema.PINNED_VERSION); every
setting is stored with the value, and the type, judgeloop passes, and diskcache's four counters are
stored; the tables, indexes and triggers are exactly those diskcache creates under judgeloop's
settings (schema.PINNED_OPENED), none missing, none more. Anything else (a new cache, one written
under other settings or by another diskcache) is opened by diskcache as before, which writes it so.

What `reopened` still does, as diskcache's open does: its connection, made at once, sets each
connection's pragmas from the Settings table (diskcache reads them at every connection, in every
thread, whoever opened the cache), and it reads the counters. And it tries a write that changes no
row, so that a database that cannot be written still fails when it is opened, before any call is
made. Entries are written and committed as before: only the settings' rewrite, and the checkpoint
it cost, are gone.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import diskcache

from pipeline.llm.cache.schema import PINNED_OPENED, PINNED_VERSION, read_schema

# Fails as any write does where the database cannot be written (read-only file or filesystem, an
# immutable file), and writes nothing: no row matches, so no page changes and the WAL stays empty.
_WRITE_PROBE = "UPDATE Settings SET value = value WHERE 0"


def held_as_wanted(con: sqlite3.Connection, settings: dict[str, Any]) -> bool:
    """Whether opening the database under `settings` would write only what it holds (see above)."""
    if diskcache.__version__ != PINNED_VERSION or read_schema(con) != PINNED_OPENED:
        return False
    stored = dict(con.execute("SELECT key, value FROM Settings").fetchall())
    if stored.keys() != settings.keys() | diskcache.core.METADATA.keys():
        return False
    return all(type(stored[key]) is type(value) and stored[key] == value for key, value in settings.items())


def reopened(directory: str, timeout: float, disk: type[Any], settings: dict[str, Any]) -> Any:
    """The diskcache.Cache that `diskcache.Cache(directory, timeout, disk, **settings)` makes of a
    database `held_as_wanted`, without its writes (diskcache 5.6.3's Cache.__init__, less them)."""
    cache = diskcache.Cache.__new__(diskcache.Cache)
    cache._directory = directory
    cache._timeout = timeout
    cache._local = threading.local()
    cache._txn_id = None
    cache._disk = disk(directory, **{key[5:]: v for key, v in settings.items() if key.startswith("disk_")})
    for key, value in settings.items():
        setattr(cache, key, value)
    try:
        for key in diskcache.core.METADATA:
            cache.reset(key)  # read from the database (its connection made now, its pragmas set)
        ((cache._page_size,),) = cache._sql("PRAGMA page_size").fetchall()
        cache._sql(_WRITE_PROBE)
    except BaseException:
        cache.close()
        raise
    return cache
