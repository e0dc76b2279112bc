"""What each of the local cache's connections holds in memory (pipeline.llm.cache.store)."""

from __future__ import annotations

from pathlib import Path

from pipeline.llm.cache.store import CallStore


def test_the_cache_maps_none_of_its_databases_into_memory(tmp_path: Path) -> None:
    """diskcache opens a connection per thread; each would map up to 64 MB of each of the cache's
    two databases into the process (bench/README: side-by-side threads and mapped databases)."""
    store = CallStore(tmp_path / "cache")
    try:
        for cache in (store._cache, store.blocks.cache):
            assert cache._sql("PRAGMA mmap_size").fetchone() == (0,)
    finally:
        store.close()
