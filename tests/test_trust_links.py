"""Attack 2 of issue 28: symbolic links in the cache folder or the recordings folder would make
judgeloop write (or read) outside them. Each is refused, naming the link and the fix, before
anything is written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import diskcache
import pytest

from pipeline.errors import CorruptRecordError, UnsafeNameError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import stage_folders, stage_reader, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request


def record(text: str = "judge this") -> CallRecord:
    fake = FakeBackend()
    req = request(text)
    return CallRecord.new(fake.identity(), req, fake.chat(req))


def big_record() -> CallRecord:
    """A record past diskcache's 32 kB, stored as a value file in a shard folder: its reply (the
    request's long text goes to the block store, see big_request_record)."""
    fake = FakeBackend(lambda r: "x" * 100_000)
    req = request("judge this")
    return CallRecord.new(fake.identity(), req, fake.chat(req))


def big_request_record() -> CallRecord:
    """One line that compresses past 32 kB (hex digits): a value file in the block store's shards."""
    return record("".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(2_000)))


def nothing_in(folder: Path) -> bool:
    return not any(folder.iterdir())


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("name", ["cache.db", "cache.db-wal", "cache.db-shm"])
def test_a_dangling_database_link_is_refused_and_nothing_written(
    tmp_path: Path, outside: Path, name: str
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / name).symlink_to(outside / "stolen.db")
    with pytest.raises(UnsafeNameError, match=rf"{name}.*symbolic link.*Fix: remove the link \(rm "):
        CallStore(cache)
    assert nothing_in(outside)


def test_a_linked_database_that_exists_is_refused(tmp_path: Path, outside: Path) -> None:
    real = tmp_path / "real"
    CallStore(real).close()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "cache.db").symlink_to(real / "cache.db")
    with pytest.raises(UnsafeNameError, match=r"cache\.db"):
        CallStore(cache)


def test_a_linked_shard_folder_is_refused_when_the_store_opens(tmp_path: Path, outside: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "ab").symlink_to(outside)
    with pytest.raises(UnsafeNameError, match=r"ab: a symbolic link"):
        CallStore(cache)


@pytest.fixture
def fixed_value_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """diskcache names value files from os.urandom: zeros put every one in 00/00/."""
    monkeypatch.setattr(diskcache.core.os, "urandom", lambda n: bytes(n))


@pytest.mark.usefixtures("fixed_value_names")
def test_a_value_file_is_never_written_through_a_linked_shard(tmp_path: Path, outside: Path) -> None:
    cache = tmp_path / "cache"
    store = CallStore(cache)
    (cache / "00").mkdir()
    (cache / "00" / "00").symlink_to(outside)  # made after the store opened
    with pytest.raises(UnsafeNameError, match=r"00/00: a symbolic link"):
        store.put(big_record())
    assert nothing_in(outside)
    assert len(store) == 0
    store.close()


@pytest.mark.usefixtures("fixed_value_names")
def test_a_block_file_is_never_written_through_a_linked_shard(tmp_path: Path, outside: Path) -> None:
    cache = tmp_path / "cache"
    store = CallStore(cache)
    (cache / "blocks" / "00").mkdir()
    (cache / "blocks" / "00" / "00").symlink_to(outside)
    with pytest.raises(UnsafeNameError, match=r"blocks/00/00: a symbolic link"):
        store.put(big_request_record())
    assert nothing_in(outside)
    assert len(store) == 0  # the record is written after its blocks, never before
    store.close()


def test_a_linked_block_store_is_refused(tmp_path: Path, outside: Path) -> None:
    cache = tmp_path / "cache"
    CallStore(cache).close()
    os.rename(cache / "blocks", outside / "blocks")
    (cache / "blocks").symlink_to(outside / "blocks")
    with pytest.raises(UnsafeNameError, match=r"blocks.*symbolic link"):
        CallStore(cache)


@pytest.mark.usefixtures("fixed_value_names")
def test_a_value_file_is_never_read_through_a_linked_shard(tmp_path: Path, outside: Path) -> None:
    cache = tmp_path / "cache"
    store = CallStore(cache)
    big = big_record()
    store.put(big)
    shard = cache / "00" / "00"
    for file in shard.iterdir():
        file.rename(outside / file.name)
    shard.rmdir()
    shard.symlink_to(outside)
    with pytest.raises(CorruptRecordError, match="outside the cache's own files"):
        store.get(big.key)
    store.close()


def calls() -> list[RecordedCall]:
    return [RecordedCall(context=CallContext(stage="judge", item="901"), record=record())]


def test_a_stage_folder_linked_to_another_stage_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    stage_writer.write_stage(root / "assess", calls())
    before = (root / "assess" / stage_folders.CALLS_FILE).read_bytes()
    (root / "judge").symlink_to(root / "assess")
    with pytest.raises(UnsafeNameError, match=r"judge.*symbolic link"):
        stage_writer.write_stage(root / "judge", calls())
    with pytest.raises(UnsafeNameError, match=r"judge.*symbolic link"):
        list(stage_reader.read_stage(root / "judge"))
    assert (root / "assess" / stage_folders.CALLS_FILE).read_bytes() == before


@pytest.mark.parametrize("name", [stage_folders.CALLS_FILE, stage_folders.LEGACY_BLOBS_FILE, "sub/x.jsonl"])
def test_a_link_inside_a_stage_folder_is_refused(tmp_path: Path, outside: Path, name: str) -> None:
    root = tmp_path / "recordings"
    stage_writer.write_stage(root / "judge", calls())
    link = root / "judge" / name
    link.parent.mkdir(exist_ok=True)
    link.unlink(missing_ok=True)
    (outside / "calls.jsonl").write_text("")
    link.symlink_to(outside / "calls.jsonl")
    with pytest.raises(UnsafeNameError, match=rf"{name}.*symbolic link.*Fix: remove the link"):
        list(stage_reader.read_stage(root / "judge"))
    with pytest.raises(UnsafeNameError):
        stage_writer.write_stage(root / "judge", calls())
    assert (outside / "calls.jsonl").read_text() == ""


def test_the_cache_folder_itself_may_be_a_link(tmp_path: Path) -> None:
    """How a user keeps the cache on another disk: the folder is the link, not what is inside."""
    (tmp_path / "disk").mkdir()
    os.symlink(tmp_path / "disk", tmp_path / "cache")
    store = CallStore(tmp_path / "cache")
    store.put(record())
    assert len(store) == 1
    store.close()
