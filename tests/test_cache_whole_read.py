"""The tools that read the whole local store (`cache verify`, `cache export`) read it a page of rows
a statement, as stored, with a roomy page cache while they read (issue 33): at a million entries a
lookup by key each read the index and the row's table page again, and SQLite's page cache of 1 MB a
connection no longer held the inner pages of the blocks' index either (`cache verify` grew 12.2x in
CPU per 10x calls). What each entry is found to be is unchanged (`CallStore.inspect`'s answer)."""

from __future__ import annotations

from pathlib import Path

import diskcache

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache import bulk
from pipeline.llm.cache.safe_disk import SETTINGS, ForeignKey
from pipeline.llm.cache.store import WHOLE_READ_PAGES, CallStore
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, Message
from pipeline.tools.inventory import local_records

FAKE = FakeBackend()


def prompt(i: int) -> ChatRequest:
    transcript = "".join(f"Participant {i}: line {n}, about the weekend ({n * 31 % 97})\n" for n in range(80))
    return ChatRequest(messages=(Message(role="user", content=f"Rate this.\n{transcript}Score: N\n"),))


def record(i: int) -> CallRecord:
    return CallRecord.new(FAKE.identity(), prompt(i), FAKE.chat(prompt(i)))


def page_cache(cache: diskcache.Cache) -> int:
    size = cache._con.execute("PRAGMA cache_size").fetchone()[0]
    assert isinstance(size, int)
    return size


def test_the_whole_store_is_read_a_page_of_rows_a_statement(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    records = [record(i) for i in range(3)]
    for one in records:
        store.put(one)
    fillers = [f"{n:064x}"[::-1] for n in range(247)]  # more than two pages of 100 rows
    for key in fillers:
        store.put_raw(key, b"not a record")
    statements: list[str] = []
    store._cache._con.set_trace_callback(statements.append)
    read = list(local_records(store))
    store._cache._con.set_trace_callback(None)
    assert [key for key, _, _ in read] == [r.key for r in records] + fillers
    assert [r for _, r, _ in read[:3]] == records and all(p is None for _, _, p in read[:3])
    # A statement a page of 100 rows (and the empty page that ends the read), where a lookup by key
    # a row made 250 statements more.
    cache_reads = [s for s in statements if "FROM Cache" in s]
    assert len(cache_reads) == 250 // bulk.PAGE_ROWS + 2, cache_reads
    store.close()


def test_the_page_cache_is_roomy_while_the_whole_store_is_read_and_then_as_before(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    store.put(record(0))
    store.put(record(1))
    both = (store._cache, store.blocks.cache)
    as_before = [SETTINGS["sqlite_cache_size"]] * 2
    assert [page_cache(cache) for cache in both] == as_before
    reading = store.inspect_in_order()
    next(reading)
    # The blocks' index, searched 6 to 30 times a record, stays held while the tool reads; the
    # records are read in order, a page at a time.
    assert [page_cache(cache) for cache in both] == [SETTINGS["sqlite_cache_size"], WHOLE_READ_PAGES]
    assert len(list(reading)) == 1
    assert [page_cache(cache) for cache in both] == as_before
    abandoned = store.inspect_in_order()
    next(abandoned)
    abandoned.close()
    assert [page_cache(cache) for cache in both] == as_before
    store.close()


def test_each_entry_reads_as_inspect_finds_it(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    store = CallStore(folder)
    good = record(0)
    store.put(good)
    edited = record(1)
    store.put(edited)
    raw = store.get_raw(edited.key)
    assert raw is not None
    store.put_raw(edited.key, raw.replace(b'"created_at":"2', b'"created_at":"3', 1))  # edited in place
    store.put_raw("jl2:" + "0" * 32, b"not a record")
    store.close()
    planted = diskcache.Cache(str(folder))  # diskcache's own Disk: a pickled value and key
    planted.set("jl2:" + "1" * 32, {"a": "pickle"})
    planted.set(("a", "tuple"), b"x")
    planted.close()
    store = CallStore(folder)
    by_lookup = [(key, *store.inspect(key)) for key in store.entries()]
    in_order = list(store.inspect_in_order())
    assert in_order == by_lookup
    assert in_order[0] == (good.key, good, None)
    assert [p is not None for _, _, p in in_order[1:]] == [True] * 4
    assert isinstance(in_order[-1][0], ForeignKey)
    store.close()
