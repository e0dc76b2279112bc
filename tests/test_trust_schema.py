"""Attack 3 of issue 28: a cache database whose triggers, tables or indexes wear diskcache's names
but not its SQL (a trigger that rewrites every reply stored, or deletes every row) is refused
unopened: every object is compared, full SQL, with what diskcache itself creates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import diskcache
import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.safe_disk import SETTINGS
from pipeline.llm.cache.schema import PINNED, PINNED_VERSION, derived_schema
from pipeline.llm.cache.store import CallStore
from pipeline.llm.records import CallRecord
from tests.helpers import request

COUNT_INSERT = 'UPDATE Settings SET value = value + 1 WHERE key = "count";'


def a_cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    store = CallStore(folder)
    fake = FakeBackend()
    req = request("judge this")
    store.put(CallRecord.new(fake.identity(), req, fake.chat(req)))
    store.close()
    return folder


def alter(folder: Path, *statements: str) -> None:
    with sqlite3.connect(folder / "cache.db") as con:
        for statement in statements:
            con.execute(statement)


@pytest.mark.parametrize(
    ("statements", "named"),
    [
        (  # diskcache's name, a body that empties the cache on every write
            [
                "DROP TRIGGER Settings_count_insert",
                "CREATE TRIGGER Settings_count_insert AFTER INSERT ON Cache FOR EACH ROW BEGIN "
                f"{COUNT_INSERT} DELETE FROM Cache; END",
            ],
            "trigger Settings_count_insert on Cache whose SQL differs",
        ),
        (  # diskcache's name, a body that swaps in another value for every one stored
            [
                "DROP TRIGGER Settings_size_update",
                "CREATE TRIGGER Settings_size_update AFTER UPDATE ON Cache FOR EACH ROW BEGIN "
                "UPDATE Cache SET value = X'00' WHERE rowid = NEW.rowid; END",
            ],
            "trigger Settings_size_update on Cache whose SQL differs",
        ),
        (  # the unique index made plain: two rows for one key
            ["DROP INDEX Cache_key_raw", "CREATE INDEX Cache_key_raw ON Cache(key, raw)"],
            "index Cache_key_raw on Cache whose SQL differs",
        ),
        (
            ["CREATE VIEW Cache_view AS SELECT * FROM Cache"],
            "view Cache_view on Cache_view that diskcache never",
        ),
        (["CREATE TABLE Extra (x)"], "table Extra on Extra that diskcache never creates"),
    ],
)
def test_a_look_alike_object_is_refused_unopened(tmp_path: Path, statements: list[str], named: str) -> None:
    folder = a_cache(tmp_path)
    alter(folder, *statements)
    before = (folder / "cache.db").read_bytes()
    with pytest.raises(CorruptRecordError, match=named):
        CallStore(folder)
    assert (folder / "cache.db").read_bytes() == before


def test_a_cache_made_under_another_eviction_policy_still_opens(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    diskcache.Cache(str(folder), eviction_policy="least-recently-used").close()
    CallStore(folder).close()


@pytest.mark.skipif(diskcache.__version__ != PINNED_VERSION, reason="the pin is for another diskcache")
def test_the_pinned_schema_is_what_diskcache_creates() -> None:
    assert derived_schema(tuple(sorted(SETTINGS.items()))) == PINNED
