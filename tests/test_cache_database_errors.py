"""A local cache database that is read-only, full, damaged or no database at all: a clear error with
the file and the fix, never a sqlite3 traceback, and nothing lost."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from pipeline.errors import CacheError, CorruptRecordError
from pipeline.llm.backends import register_backend
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.testing.structured_responder import structured_responder
from pipeline.tools.cli import main

BUILT: list[FakeBackend] = []


def _build(settings: Any, cache_dir: Path) -> FakeBackend:
    BUILT.append(FakeBackend(structured_responder, name=settings.model))
    return BUILT[-1]


register_backend("cache-errors-fake", _build)
IDENTITY = ModelIdentity(backend="fake", name="m", digest="d")


def record(i: int, size: int = 2000) -> CallRecord:
    request = ChatRequest(messages=(Message(role="user", content=f"call {i} " + "x" * size),))
    return CallRecord.new(IDENTITY, request, ChatReply(text=f"reply {i}", done_reason="stop"))


def batch(root: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    (root / "params.yaml").write_text(
        yaml.safe_dump({"llm": {"backend": "cache-errors-fake", "model": "m"}, "cache": {"dir": "cache"}})
    )
    (root / "rows.jsonl").write_text(json.dumps({"id": "r1", "question": "Q?", "answer": "A."}) + "\n")
    monkeypatch.chdir(root)
    BUILT.clear()
    return CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])


def assert_clear(result: Result, *said: str) -> None:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # a ClickException, not a crash
    assert "Traceback" not in result.output and "sqlite3" not in result.output
    for words in said:
        assert words in result.output, result.output


@pytest.fixture
def store_with_calls(tmp_path: Path) -> Path:
    store = CallStore(tmp_path / "cache")
    for i in range(200):
        store.put(record(i))
    store.close()
    return tmp_path / "cache" / "cache.db"


def test_a_file_that_is_no_database_is_refused_with_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "cache.db").write_bytes(b"\x00garbage, not SQLite" * 300)
    result = batch(tmp_path, monkeypatch)
    assert_clear(result, "cache/cache.db: not a readable cache database", "Fix: move the folder away")
    assert BUILT == []  # refused before any model was built


def test_a_damaged_database_is_named_with_the_fix(
    tmp_path: Path, store_with_calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged = bytearray(store_with_calls.read_bytes())
    damaged[len(damaged) // 2 :] = b"\x5a" * (len(damaged) - len(damaged) // 2)
    store_with_calls.write_bytes(bytes(damaged))
    store = CallStore(store_with_calls.parent)  # its first page reads: the damage shows on use
    with pytest.raises(CorruptRecordError, match=r"cache\.db: the local cache database is damaged") as err:
        for i in range(200):
            store.get(record(i).key)
    assert "mv " in err.value.message and "judgeloop cache seed" in err.value.message
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"cache": {"dir": "cache"}}))
    stats = CliRunner().invoke(main, ["cache", "stats"])
    assert isinstance(stats.exception, SystemExit), stats.exception  # a ClickException, not a crash
    assert "the local cache database is damaged" in stats.output


def test_a_full_disk_is_named_and_the_calls_stored_before_stay(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    connection = store._cache._con  # SQLite's own limit on the file's pages: a real SQLITE_FULL
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages + 4}")
    stored = []
    with pytest.raises(CacheError, match=r"cache\.db: the disk holding the local cache is full") as err:
        for i in range(100):
            store.put(record(i))
            stored.append(i)
    assert "Fix: free space there" in err.value.message
    assert stored and all(store.get(record(i).key) is not None for i in stored)
    store.close()


@pytest.fixture
def immutable(store_with_calls: Path) -> Iterator[Path]:
    """The cache file made read-only even for root (chattr +i), where the filesystem allows it."""
    chattr = shutil.which("chattr")
    if (
        chattr is None
        or subprocess.run([chattr, "+i", str(store_with_calls)], capture_output=True).returncode
    ):
        pytest.skip("chattr +i is not available here: a read-only file cannot be made for root")
    try:
        yield store_with_calls
    finally:
        subprocess.run([chattr, "-i", str(store_with_calls)], check=True)


def test_a_read_only_cache_fails_before_any_call(
    tmp_path: Path, immutable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = immutable.read_bytes()
    result = batch(tmp_path, monkeypatch)
    assert_clear(
        result,
        "cache/cache.db: the local cache cannot be written",
        "Fix: make it writable (chmod -R u+w cache)",
        "JUDGELOOP_CACHE_MODE=off",
    )
    assert BUILT == []  # no model call was made that could then not be stored
    assert immutable.read_bytes() == before
