"""A stage's recording held as the places of its lines (pipeline.llm.recordings.offsets, issue 33):
a call is read back from its file when served and checked against the digest taken when the file
was hashed and verified, so an edit made since, a wrong place or a tampered shard serves nothing;
and the index holds no line's text."""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from pathlib import Path

import pytest

from pipeline.data.recorded_calls import call_counts
from pipeline.data.recorded_models import count_models
from pipeline.data.recorded_stages import StageRecords
from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import shards, stage_folders, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.offsets import LazyBlobs, LineTable
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.verified_memo import forget_in_process
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply
from tests.helpers import request

TRANSCRIPT = "\n".join(f"Participant: line {i} about sleep and mood {i * 7919 % 1000}" for i in range(300))


def _calls(n: int, *, reply_chars: int = 0) -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for i in range(n):
        req = request(f"Judge metric {i}.\nThe transcript:\n{TRANSCRIPT}\n\nAssessment {i}")
        reply = fake.chat(req)
        if reply_chars:  # a long reply of its own: call lines far larger than a place
            reply = ChatReply(text=f"Score: {i % 5} " + f"{i:06d} reason " * (reply_chars // 14))
        record = CallRecord.new(fake.identity(), req, reply)
        calls.append(
            RecordedCall(context=CallContext(stage="judge", item=f"{900 + i % 5}", step=i), record=record)
        )
    return calls


@pytest.fixture(autouse=True)
def _fresh_memo() -> None:
    forget_in_process()


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Change bytes of a file without renaming it (the descriptor a reader holds sees the change)."""
    assert len(old) == len(new)
    data = path.read_bytes()
    at = data.index(old)
    with path.open("r+b") as out:
        out.seek(at)
        out.write(new)


def test_every_call_is_served_from_its_place(tmp_path: Path) -> None:
    calls = _calls(12)
    stage_writer.write_stage(tmp_path / "judge", calls)
    index = index_stage(tmp_path / "judge")
    assert len(index) == 12 and all(index.call(c.record.key) == c for c in calls)
    assert sorted(c.record.key for c in index.every_call()) == sorted(c.record.key for c in calls)


def test_a_line_edited_after_it_was_verified_is_never_served(tmp_path: Path) -> None:
    """The recording is verified; then a reply is edited in place, its checksum too, so that the
    line would pass a checksum check of its own: its digest no longer matches, and it is refused."""
    calls = _calls(12)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    index = index_stage(directory)
    target = calls[3].record
    found = index.at[target.key]
    line = index.line(found).encode()
    at = index.lines.offset[found] + line.index(target.reply.text.encode()[:8])
    with (directory / stage_folders.CALLS_FILE).open("r+b") as out:  # one byte of the reply, in place
        out.seek(at)
        out.write(b"#")
    with pytest.raises(CorruptRecordError, match=r"calls\.jsonl:\d+: changed on disk since"):
        index.call(target.key)
    assert index.call(calls[4].record.key) == calls[4]  # the lines not edited are still served


def test_a_shared_block_edited_after_it_was_verified_is_never_served(tmp_path: Path) -> None:
    calls = _calls(6)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    index = index_stage(directory)
    index.blobs.clear_cache()  # as if let go of: the next call reads its blocks from the file
    _edit_in_place(directory / stage_folders.CALLS_FILE, b"about sleep and mood", b"about sleep and MOOD")
    with pytest.raises(CorruptRecordError, match="changed on disk since"):
        index.call(calls[0].record.key)


def test_a_place_that_names_another_line_serves_nothing(tmp_path: Path) -> None:
    """The index is not believed on its own: a key placed at another call's line (its offset,
    length and digest all that line's) is refused by the line's own key."""
    calls = _calls(6)
    stage_writer.write_stage(tmp_path / "judge", calls)
    index = index_stage(tmp_path / "judge")
    first, second = calls[0].record.key, calls[1].record.key
    # (a packed table is read-only: a dict placed instead)
    index = dataclasses.replace(index, at={**index.at, first: index.at[second]})
    with pytest.raises(CorruptRecordError, match=f"holds call {second}, not {first}"):
        index.call(first)


def test_a_place_past_its_line_is_refused(tmp_path: Path) -> None:
    calls = _calls(6)
    stage_writer.write_stage(tmp_path / "judge", calls)
    index = index_stage(tmp_path / "judge")
    found = index.at[calls[2].record.key]
    index.lines.offset[found] += 1  # a byte off: another stretch of the file, another digest
    with pytest.raises(CorruptRecordError, match="changed on disk since"):
        index.call(calls[2].record.key)


def test_a_sharded_recording_is_served_by_shard_and_a_tampered_shard_refused(
    tmp_path: Path, small_threshold: None
) -> None:
    calls = _calls(40)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    index = index_stage(directory)
    assert all(index.call(c.record.key) == c for c in calls)
    files = {index.lines.files.paths[index.lines.file[found]].name for found in index.at.values()}
    assert len(files) > 1 and all(shards.prefix_of(name)[0] == "calls" for name in files)
    # a shard edited after the recording was read: its lines are refused, the other shards served
    target = calls[7].record
    shard = index.lines.files.paths[index.lines.file[index.at[target.key]]]
    _edit_in_place(shard, b'"checksum":"sha256:', b'"checksum":"sha256:'.upper())
    edited = [c for c in calls if index.lines.files.paths[index.lines.file[index.at[c.record.key]]] == shard]
    kept = [c for c in calls if c not in edited]
    with pytest.raises(CorruptRecordError, match=rf"{shard.name}:1: changed on disk since"):
        index.call(sorted(edited, key=lambda c: index.at[c.record.key])[0].record.key)
    assert all(index.call(c.record.key) == c for c in kept)
    # and read anew, the edited shard no longer hashes to its manifest: the stage is refused whole
    with pytest.raises(CorruptRecordError, match=rf"{shard.name}: does not hash"):
        index_stage(directory)
    stage = RecordingIndex(tmp_path).stage("judge")
    assert stage.index is None and stage.damage is not None and "does not hash" in stage.damage


def test_the_index_and_the_report_hold_no_line(tmp_path: Path) -> None:
    """What a stage's recording costs in memory once read: its places and keys, not its lines.
    200 calls of ~6 kB lines (1.2 MB of text) are held in well under 200 bytes of lines a call."""
    calls = _calls(200, reply_chars=6_000)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    text_bytes = (directory / stage_folders.CALLS_FILE).stat().st_size
    assert text_bytes > 200 * 6_000
    del calls
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = index_stage(directory)
        records = StageRecords.read(tmp_path, ["judge"])
        for held_index in (index, *records.indexes.values()):
            held_index.blobs.clear_cache()  # a bounded cache of blocks (8M characters), not of lines
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(index) == 200 and len(records) == 200
    # two indexes of 200 keys (a key is ~70 characters): a few hundred bytes a call each; the lines
    # themselves would be more than 6,000 bytes a call
    assert held < 2 * 200 * 600, held


def test_a_sharded_recording_is_verified_and_read_an_item_at_a_time(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shards are cut by key, each in the recording's order (by item): read shard after shard, an
    item's transcript blocks were asked for again in every shard, each time read back from the file
    once the block cache had passed them (3.2 reads a block at 9,683 calls). The shards' lines
    merged by item read each block once, with a cache that holds one item's blocks; the keys keep
    the recording's order and each key its first line."""
    items = [f"{n:03d}\n" + "\n".join(f"{n} says {i} {i * 7919 % 997}" for i in range(400)) for n in range(4)]
    fake = FakeBackend()
    calls = []
    for step in range(6):
        for n, transcript in enumerate(items):
            record = CallRecord.new(
                fake.identity(), req := request(f"Step {step}\n{transcript}"), fake.chat(req)
            )
            calls.append(
                RecordedCall(context=CallContext(stage="judge", item=f"{n:03d}", step=step), record=record)
            )
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    monkeypatch.setattr(LazyBlobs, "CACHE_CHARS", 2 * max(len(t) for t in items))
    reads: list[int] = []
    text = LineTable.text

    def counted(table: LineTable, found: int) -> str:
        reads.append(id(table))
        return text(table, found)

    monkeypatch.setattr(LineTable, "text", counted)
    index = index_stage(directory)
    assert len(set(index.lines.file)) > 4  # several shards of calls
    block_reads = reads.count(id(index.blobs.table))
    assert block_reads < 1.1 * len(index.blobs), (block_reads, len(index.blobs))  # 4.5x shard by shard
    assert list(index.at.values()) == sorted(index.at.values())
    reads.clear()
    index.blobs.clear_cache()
    assert sorted(c.record.key for c in index.every_call()) == sorted(c.record.key for c in calls)
    assert reads.count(id(index.blobs.table)) < 1.1 * len(index.blobs)


def test_the_report_counts_calls_without_reading_their_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report counts every call (its context and reply) and its model: the counts and models are
    those of the calls parsed whole, and once the recording is known verified (the memo), counting
    reads none of its blocks back from the file."""
    calls = _calls(12)
    stage_writer.write_stage(tmp_path / "judge", calls)
    StageRecords.read(tmp_path, ["judge"])  # verified in full once: this process remembers it
    reads: list[int] = []
    text = LineTable.text

    def counted(table: LineTable, found: int) -> str:
        reads.append(id(table))
        return text(table, found)

    monkeypatch.setattr(LineTable, "text", counted)
    records = StageRecords.read(tmp_path, ["judge"])
    index = records.indexes["judge"]
    assert reads and id(index.blobs.table) not in reads
    assert records.counts["judge"] == call_counts(calls)
    assert records.models() == count_models(
        (m.backend, m.name, m.digest) for m in (c.record.model for c in calls)
    )
