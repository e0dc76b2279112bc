"""The text recordings: deterministic bytes, content stored once, seeding a fresh cache, tamper-evident."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm import blocks
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.keys import KEY_RECIPE, recipe1_key
from pipeline.llm.recordings import line_format, stage_folders, stage_reader, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply
from tests.helpers import make_session, request

TRANSCRIPT = "\n".join(
    f"{'Ellie' if i % 2 else 'Participant'}: line {i} about sleep, mood and work {i * 7919 % 1000}"
    for i in range(420)
)


def _calls(n: int) -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for i in range(n):
        req = request(f"Judge metric {i}.\nHere is the transcript:\n{TRANSCRIPT}\n\nAssessment {i}")
        record = CallRecord.new(fake.identity(), req, fake.chat(req))
        ctx = CallContext(stage="judge", item=f"{900 + i % 3}", step=i // 3, labels={"metric": "coherence"})
        calls.append(RecordedCall(context=ctx, record=record))
    return calls


def test_round_trip_restores_every_call_exactly(tmp_path: Path) -> None:
    calls = _calls(6)
    stage_writer.write_stage(tmp_path / "judge", calls)
    loaded = [c.call for c in stage_reader.read_stage(tmp_path / "judge")]
    assert sorted(loaded, key=lambda c: c.record.key) == sorted(calls, key=lambda c: c.record.key)


def test_same_calls_in_any_order_give_the_same_bytes(tmp_path: Path) -> None:
    calls = _calls(9)
    stage_writer.write_stage(tmp_path / "a", calls)
    shuffled = calls[:]
    random.Random(4).shuffle(shuffled)
    stage_writer.write_stage(tmp_path / "b", shuffled + shuffled[:2])  # duplicates collapse
    assert [p.name for p in (tmp_path / "a").iterdir()] == [stage_folders.CALLS_FILE]  # one file
    name = stage_folders.CALLS_FILE
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_transcript_repeated_in_every_prompt_is_stored_once(tmp_path: Path) -> None:
    calls = _calls(20)
    stage_writer.write_stage(tmp_path / "judge", calls)
    stored = sum(p.stat().st_size for p in (tmp_path / "judge").iterdir())
    raw = sum(len(c.record.request.model_dump_json()) + len(c.record.reply.text) for c in calls)
    assert len(TRANSCRIPT) > 20_000
    # 20 prompts each carrying the transcript: stored once plus small per-call overhead.
    assert stored < len(TRANSCRIPT) * 1.5 + 20 * 3_000
    assert stored < raw / 4


def test_blocks_survive_a_different_prefix() -> None:
    a = blocks.split_blocks("short prefix\n" + TRANSCRIPT)
    b = blocks.split_blocks("a much longer and entirely different prefix line\n" * 9 + TRANSCRIPT)
    shared = set(a) & set(b)
    assert sum(map(len, shared)) > 0.9 * len(TRANSCRIPT)


def test_hand_edited_reply_is_detected(tmp_path: Path) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(2))
    path = tmp_path / "judge" / stage_folders.CALLS_FILE
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["reply"]["text"] = "Score: 5"
    lines[0] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptRecordError, match=r"calls.jsonl:1: .*checksum"):
        list(stage_reader.read_stage(tmp_path / "judge"))


def test_hand_edited_prompt_is_detected(tmp_path: Path) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(1))
    path = tmp_path / "judge" / stage_folders.CALLS_FILE
    first, *blobs = path.read_text().splitlines()
    row = json.loads(first)
    row["request"]["options"]["temperature"] = 0.5
    path.write_text("\n".join([json.dumps(row), *blobs]) + "\n")
    with pytest.raises(CorruptRecordError, match="request does not hash"):
        list(stage_reader.read_stage(tmp_path / "judge"))


def test_edited_blob_is_detected(tmp_path: Path) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(1))
    path = tmp_path / "judge" / stage_folders.CALLS_FILE
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if line.startswith('{"blob":'))
    row = json.loads(lines[number])
    row["text"] = row["text"].replace("sleep", "sleeep")
    lines[number] = line_format.blob_line(row["blob"], row["text"])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        CorruptRecordError, match=rf"calls.jsonl:{number + 1}: blob .* does not hash to its id"
    ):
        list(stage_reader.read_stage(tmp_path / "judge"))


def test_a_recording_in_the_two_file_layout_is_read_and_rewritten_as_one_file(tmp_path: Path) -> None:
    # As judgeloop wrote a stage before its shared blocks moved into calls.jsonl.
    calls = _calls(4)
    stage_writer.write_stage(tmp_path / "one", calls)
    lines = (tmp_path / "one" / stage_folders.CALLS_FILE).read_text().splitlines(keepends=True)
    legacy = tmp_path / "recordings" / "judge"
    legacy.mkdir(parents=True)
    (legacy / stage_folders.CALLS_FILE).write_text("".join(x for x in lines if not x.startswith('{"blob":')))
    (legacy / stage_folders.LEGACY_BLOBS_FILE).write_text(
        "".join(x for x in lines if x.startswith('{"blob":'))
    )
    assert [c.call for c in stage_reader.read_stage(legacy)] == [
        c.call for c in stage_reader.read_stage(tmp_path / "one")
    ]
    replay, fake = make_session(tmp_path, "replay")
    for call in calls:
        assert replay.chat(call.record.request, call.context).record == call.record
    replay.close()
    assert fake.calls == []
    assert sorted(p.name for p in legacy.iterdir()) == [stage_folders.CALLS_FILE]
    assert (legacy / stage_folders.CALLS_FILE).read_bytes() == (
        tmp_path / "one" / stage_folders.CALLS_FILE
    ).read_bytes()


def test_recordings_seed_an_empty_cache_for_replay(tmp_path: Path) -> None:
    first = tmp_path / "first"
    session, _ = make_session(first)
    ctx = CallContext(stage="judge", item="901")
    original = session.chat(request("Score this"), ctx).record
    session.close()
    clone = tmp_path / "clone"  # a fresh clone: recordings travel, the local cache does not
    (clone / "recordings").mkdir(parents=True)
    for stage in (first / "recordings").iterdir():
        target = clone / "recordings" / stage.name
        target.mkdir()
        for f in stage.iterdir():
            (target / f.name).write_bytes(f.read_bytes())
    replay, fake = make_session(clone, "replay")
    call = replay.chat(request("Score this"), ctx)
    assert call.record == original and fake.calls == []
    replay.close()
    assert (clone / "recordings" / "judge" / stage_folders.CALLS_FILE).read_bytes() == (
        first / "recordings" / "judge" / stage_folders.CALLS_FILE
    ).read_bytes()


def test_metadata_survives(tmp_path: Path) -> None:
    fake = FakeBackend(
        lambda r: ChatReply(
            text="Score: 3",
            done_reason="length",
            prompt_tokens=7,
            meta={"eval_duration": 5, "total_duration": 9},
        )
    )
    session, _ = make_session(tmp_path, backend=fake)
    session.chat(request("x"), CallContext(stage="judge"))
    session.close()
    (loaded,) = stage_reader.read_all(tmp_path / "recordings")
    assert loaded.call.record.reply.meta == {"eval_duration": 5, "total_duration": 9}
    assert loaded.call.record.reply.done_reason == "length"


def _as_written_by_recipe_1(record: CallRecord) -> CallRecord:
    """The record as judgeloop 0.1.0 wrote it: sha256 key (recipe 1), checksum over that."""
    old = record.model_copy(update={"key": recipe1_key(record.model, record.request), "recipe": 1})
    return old.model_copy(update={"checksum": old.expected_checksum()})


def test_recordings_from_an_older_key_recipe_replay_and_are_rewritten(tmp_path: Path) -> None:
    fake = FakeBackend()
    req = request("Score this transcript: it is short.")
    current = CallRecord.new(fake.identity(), req, fake.chat(req))
    old = _as_written_by_recipe_1(current)
    assert old.key.startswith("jl1:") and old.verify()
    ctx = CallContext(stage="judge", item="901", labels={"metric": "coherence"})
    stage_writer.write_stage(tmp_path / "recordings" / "judge", [RecordedCall(context=ctx, record=old)])

    replay, backend = make_session(tmp_path, "replay")
    call = replay.chat(req, ctx)
    assert backend.calls == []  # served from the old recording, under today's key
    assert call.record.key == current.key and call.record.recipe == KEY_RECIPE and call.record.verify()
    assert call.record.reply == old.reply and call.record.created_at == old.created_at
    replay.close()
    (rewritten,) = stage_reader.read_stage(tmp_path / "recordings" / "judge")
    assert '"recipe":2' in (tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE).read_text()
    assert rewritten.call.record.key == current.key


def test_an_edited_record_of_an_older_recipe_is_not_rekeyed(tmp_path: Path) -> None:
    (call,) = _calls(1)
    old = _as_written_by_recipe_1(call.record)
    edited = old.model_copy(update={"reply": old.reply.model_copy(update={"text": "Score: 5"})})
    stage_writer.write_stage(tmp_path / "judge", [RecordedCall(context=call.context, record=edited)])
    # Re-keying renews the checksum; done to an edited record it would launder the edit.
    with pytest.raises(CorruptRecordError, match="checksum"):
        list(stage_reader.read_stage(tmp_path / "judge"))
    (unverified,) = stage_reader.read_stage(tmp_path / "judge", verify=False)
    assert unverified.call.record.key == old.key
