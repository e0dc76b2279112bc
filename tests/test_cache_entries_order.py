"""The local store lists its keys in the order they were stored (issue 33): by rowid, which SQLite
seeks, where diskcache's listing by key rescans its index for every page (quadratic); and `cache
verify` then reads an item's calls, which share its blocks, together."""

from __future__ import annotations

from pathlib import Path

from pipeline.llm.cache.store import CallStore
from pipeline.tools.inventory import local_records


def test_entries_keep_the_order_they_were_stored(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    written = [f"{n:064x}"[::-1] for n in range(250)]  # not in key order, and more than a page of 100
    for key in written:
        store.put_raw(key, b"not a record")
    assert written != sorted(written)
    assert list(store.entries()) == written
    assert [key for key, _, _ in local_records(store)] == written  # verify reads them as stored
    store.close()
