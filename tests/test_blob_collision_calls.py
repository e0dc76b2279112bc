"""Two texts sharing a 64-bit blob id in two calls of one stage (a pair made on purpose, in about
2**32 tries, by whoever gives both texts: two transcripts) are refused when the stage's recording
is made, as within one call (tests/test_blob_collision.py). They were written as one block, and
every read of the recording then failed the other call's check ("request edited")."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import CacheError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import line_format, stage_reader, stage_writer
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.stage_writer import StageRecording
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request

A = "Participant: " + "I sleep badly, " * 30  # one line of 463 characters: one block (MIN_BLOCK 256)
B = A.replace("sleep", "work")


def _call(text: str, item: str) -> RecordedCall:
    fake = FakeBackend()
    req = request(f"Judge the interview.\n{text}\n")
    context = CallContext(stage="judge", item=item, step=0)
    return RecordedCall(context=context, record=CallRecord.new(fake.identity(), req, fake.chat(req)))


@pytest.fixture
def colliding(monkeypatch: pytest.MonkeyPatch) -> None:
    """B's blocks get A's ids, as a pair made to collide would: A's own blocks keep theirs."""
    real = line_format.blob_id
    monkeypatch.setattr(line_format, "blob_id", lambda text: real(text.replace("work", "sleep")))


@pytest.mark.usefixtures("colliding")
def test_two_calls_whose_blocks_collide_are_refused_and_the_old_recording_kept(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    stage_writer.write_stage(folder, [_call(A, "301")])
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(CacheError, match=r"share the blob id [0-9a-f]{16} "):
        stage_writer.write_stage(folder, [_call(A, "301"), _call(B, "302")])
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [c.call.record.key for c in stage_reader.read_stage(folder)] == [_call(A, "301").record.key]


@pytest.mark.usefixtures("colliding")
def test_a_new_call_colliding_with_a_block_of_the_recording_read_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    first = _call(A, "301")
    stage_writer.write_stage(folder, [first])
    recorded = index_stage(folder)
    recording = StageRecording()
    recording.add(RecordedCall(context=first.context, record=first.record, cache_hit=True), recorded=recorded)
    with pytest.raises(CacheError, match="share the blob id"):
        recording.add(_call(B, "302"), recorded=recorded)


def test_calls_sharing_a_block_keep_one_copy_of_it(tmp_path: Path) -> None:
    calls = [_call(A, "301"), _call(A, "302"), _call(B, "303")]
    stage_writer.write_stage(tmp_path / "judge", calls)
    loaded = sorted(
        (c.call for c in stage_reader.read_stage(tmp_path / "judge")), key=lambda c: c.context.item
    )
    assert [c.record for c in loaded] == [c.record for c in calls]
    lines = (tmp_path / "judge" / "calls.jsonl").read_bytes().splitlines()
    assert sum(line.startswith(line_format.BLOCK_OPENING) for line in lines) == 2  # A's block once, B's
