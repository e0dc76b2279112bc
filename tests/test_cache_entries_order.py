"""The local store lists its keys by key, or as stored (issue 33: `cache verify` reads every record in
the order they were stored, so that an item's calls, which share its blocks, come together)."""

from __future__ import annotations

from pathlib import Path

from pipeline.llm.cache.store import CallStore
from pipeline.tools.inventory import local_records


def test_entries_as_stored_keep_the_order_they_were_written(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    written = ["c" * 64, "a" * 64, "b" * 64]
    for key in written:
        store.put_raw(key, b"not a record")
    assert list(store.entries()) == sorted(written)
    assert list(store.entries(as_stored=True)) == written
    assert [key for key, _, _ in local_records(store)] == written  # verify reads them as stored
    store.close()
