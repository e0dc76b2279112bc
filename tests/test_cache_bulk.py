"""The local cache's seeded entries and blocks written in bulk (issue 33): a few statements a batch
rather than diskcache's round of statements an entry, and the rows exactly the ones `Cache.add`
writes (pipeline.llm.cache.bulk)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import diskcache

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache import bulk
from pipeline.llm.cache.safe_disk import SETTINGS, SafeDisk
from pipeline.llm.cache.store import CallStore
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, Message

FAKE = FakeBackend()
COLUMNS = "key, raw, expire_time, access_count, tag, size, mode, filename, value"


def open_cache(folder: Path) -> diskcache.Cache:
    return diskcache.Cache(str(folder), timeout=60, disk=SafeDisk, **SETTINGS)


def rows(folder: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(folder / "cache.db")
    try:
        found = con.execute(f"SELECT {COLUMNS} FROM Cache ORDER BY key").fetchall()
        count = con.execute("SELECT value FROM Settings WHERE key = 'count'").fetchone()
        return [*found, ("count", count)]
    finally:
        con.close()


def test_bulk_rows_are_the_rows_add_writes(tmp_path: Path) -> None:
    values = [("a" * 32, b"small"), ("b" * 32, b"x" * (2**15 + 7)), ("c" * 32, bytes(range(256)))]
    by_add, in_bulk = open_cache(tmp_path / "add"), open_cache(tmp_path / "bulk")
    by_add.add("c" * 32, b"there before")
    in_bulk.add("c" * 32, b"there before")  # kept, as add keeps it
    for key, value in values:
        by_add.add(key, value)
    bulk.add_new(in_bulk, [*values, ("a" * 32, b"twice: the first is kept")])
    assert bulk.stored(in_bulk, ["a" * 32, "d" * 32]) == {"a" * 32}
    by_add.close()
    in_bulk.close()
    added, bulked = rows(tmp_path / "add"), rows(tmp_path / "bulk")
    # The large value lies in a file of its own, under a random name: compared by its bytes.
    assert [r[:7] for r in added[:-1]] == [r[:7] for r in bulked[:-1]]
    assert [r[8] for r in added[:-1]] == [r[8] for r in bulked[:-1]]
    assert (added[-1], bulked[-1]) == (("count", (3,)), ("count", (3,)))
    assert open_cache(tmp_path / "bulk").get("b" * 32) == b"x" * (2**15 + 7)


def prompt(i: int) -> ChatRequest:
    transcript = "".join(
        f"Participant {i}: line {n}, about the weekend ({n * 7919 % 997})\n" for n in range(300)
    )
    return ChatRequest(messages=(Message(role="user", content=f"Rate this.\n{transcript}Score: N\n"),))


def test_a_seeded_batch_is_written_in_a_few_statements_not_a_round_a_block(tmp_path: Path) -> None:
    records = [CallRecord.new(FAKE.identity(), prompt(i), FAKE.chat(prompt(i))) for i in range(20)]
    store = CallStore(tmp_path / "cache")
    statements: list[str] = []
    for cache in (store._cache, store.blocks.cache):
        cache._con.set_trace_callback(statements.append)
    for record in records:
        store.seed(record)
    store.flush()
    # One check a batch, for the entries and for the blocks, before and inside the transaction
    # (diskcache looked each block up two or three times, and each entry twice); the inserts are
    # one executemany, which SQLite traces once a row.
    selects = [s for s in statements if s.startswith("SELECT")]
    assert len(selects) <= 3, selects
    for cache in (store._cache, store.blocks.cache):
        cache._con.set_trace_callback(None)
    blocks = len(store.blocks.cache)
    assert blocks > 100  # each prompt's transcript is its own ~15 blocks
    assert [store.get(r.key) for r in records] == records
    assert all(store.inspect(r.key) == (r, None) for r in records)  # rebuilt from its blocks
    store.close()
    again = CallStore(tmp_path / "cache")
    for record in records:  # stored already: nothing written again
        again.seed(record)
    again.flush()
    assert len(again) == len(records) and len(again.blocks.cache) == blocks
    again.close()
