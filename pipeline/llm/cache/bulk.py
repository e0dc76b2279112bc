"""Many entries written to a diskcache in a few statements, not a round of statements each (issue 33).

A replay on an empty local cache copies every call it serves into the cache, with its request's
blocks (pipeline.llm.cache.store, "Seeding"). Written one `in` and one `set` (or `add`) at a time,
each block cost about 28 us of diskcache's own Python and SQLite statements (an existence check,
the row's lookup, its insert, and a search for expired rows to cull), about 6 blocks and 230 us of
a seeded call; its zlib only 11 us a block (bench/README.md, "The local cache seeded in bulk").
Here a batch is checked with one `SELECT ... IN` per few hundred keys and the new rows go in with
one `executemany`, inside diskcache's own transaction (BEGIN IMMEDIATE: no other writer comes
between the check and the insert).

The rows are the ones `Cache.add` writes for a small bytes value under a text key: the same
columns (raw key, store and access time now, no expiry, no tag, MODE_RAW, the bytes in the row),
counted by diskcache's own triggers; a value of `disk_min_file_size` or more is handed to
`Cache.add`, which writes its file. Nothing here is read back on trust: a reader checks every
entry and block as before. An entry already under a key stays (as `add` keeps it), whoever wrote
it; the statements use diskcache's private connection (`_sql`), of the version pinned in
requirements/lock.txt (5.6.3), which tests/test_cache_bulk.py compares row by row with `add`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import diskcache

IN_BATCH = 500  # keys a SELECT ... IN asks for at once (SQLite allows 999 parameters, or more)
PAGE_ROWS = 100  # rows a page of `rows_in_order` reads in one statement (diskcache's own iteration's page)
# The columns `Cache.get` reads of a row, with its rowid and key, for rows not expired (judgeloop
# never sets an expiry; a row that has one is skipped as `get` skips it once it is past).
_IN_ORDER = (
    "SELECT rowid, key, raw, mode, filename, value FROM Cache"
    " WHERE rowid > ? AND (expire_time IS NULL OR expire_time > ?) ORDER BY rowid LIMIT ?"
)
_INSERT = (
    "INSERT OR IGNORE INTO Cache("
    " key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, filename, value"
    ") VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, ?, NULL, ?)"
)


def stored(cache: diskcache.Cache, keys: Sequence[str]) -> set[str]:
    """Which of `keys` (text keys) the cache holds a row for, expired or not."""
    sql = cache._sql
    held: set[str] = set()
    for start in range(0, len(keys), IN_BATCH):
        chunk = keys[start : start + IN_BATCH]
        marks = ",".join("?" * len(chunk))
        held.update(key for (key,) in sql(f"SELECT key FROM Cache WHERE raw = 1 AND key IN ({marks})", chunk))
    return held


def add_new(cache: diskcache.Cache, rows: Iterable[tuple[str, bytes]], held: set[str] | None = None) -> int:
    """`cache.add(key, value)` for each row, in one transaction: a key held already keeps its entry.
    `held`: the keys of `rows` the cache holds, as `stored` found them in the transaction the caller
    holds (`cache.transact()`), where it made the rows only for the others. Returns how many rows
    were written (the others' keys were held)."""
    rows = list(rows)
    if not rows:
        return 0
    with cache.transact():
        held = stored(cache, [key for key, _ in rows]) if held is None else set(held)
        written = 0
        small: list[tuple[str, float, float, int, bytes]] = []
        for key, value in rows:
            if key in held:
                continue
            held.add(key)  # the same key twice in `rows`: the first is kept, as add keeps it
            written += 1
            if type(value) is not bytes:
                raise TypeError(f"the call store takes bytes values only, not {type(value).__name__}")
            if len(value) >= cache.disk.min_file_size:
                cache.add(key, value)  # written to a file of its own, as diskcache writes one
                continue
            now = time.time()
            small.append((key, now, now, diskcache.core.MODE_RAW, value))
        cache._con.executemany(_INSERT, small)
    return written


Row = tuple[int, object, int, int, str | None, object]  # rowid, stored key, raw, mode, filename, value


def rows_in_order(cache: diskcache.Cache, after: int) -> list[Row]:
    """The next page of rows stored after rowid `after`, in the order they were stored, each with
    what `Cache.get` reads of it (decoded by the cache's Disk, as `get` does, by the caller): one
    statement a page, seeking by rowid, where a `get` a key costs a statement and a search of the
    key index each, and reads again the table page the listing of keys read (issue 33). Not a live
    cursor: a caller may delete rows between pages."""
    return list(cache._sql(_IN_ORDER, (after, time.time(), PAGE_ROWS)).fetchall())
