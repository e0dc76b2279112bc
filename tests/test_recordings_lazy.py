"""A stage's recording read lazily (issues 31, 33): verified in full once per content, kept as its
lines, each call parsed only when served; its keys and models read from the verified lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import (
    line_checks,
    line_format,
    stage_calls,
    stage_folders,
    stage_reader,
    stage_writer,
    verified_memo,
)
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext
from pipeline.tools.inventory import recorded_calls, recorded_keys
from tests.helpers import make_session, request
from tests.test_recordings import TRANSCRIPT, _as_written_by_recipe_1, _calls

pytestmark = pytest.mark.usefixtures("fresh_memo")


def _stage(root: Path) -> tuple[Path, list[RecordedCall]]:
    calls = _calls(6)
    old = calls[0]
    calls[0] = RecordedCall(context=old.context, record=_as_written_by_recipe_1(old.record))
    directory = root / "judge"
    stage_writer.write_stage(directory, calls)
    return directory, calls


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `where` of every call line parsed from now on."""
    seen: list[str] = []
    real = line_checks.parse_call_line

    def counted(line: str, blobs: dict[str, str], where: str, *, verified: bool = False) -> RecordedCall:
        seen.append(where)
        return real(line, blobs, where, verified=verified)

    monkeypatch.setattr(line_checks, "parse_call_line", counted)
    return seen


def test_a_stage_index_serves_what_read_stage_reads_verified_now_or_remembered(tmp_path: Path) -> None:
    directory, _ = _stage(tmp_path)
    expected = {loaded.call.record.key: loaded.call.record for loaded in stage_reader.read_stage(directory)}
    verified_memo.forget_in_process()
    first = index_stage(directory)  # verified line by line now
    second = index_stage(directory)  # remembered: scanned only
    for index in (first, second):
        assert index.at.keys() == expected.keys()  # the recipe-1 call under today's key
        assert {key: index.call(key).record for key in index.at} == expected  # type: ignore[union-attr]
        assert index.models == {(r.model.backend, r.model.name, r.model.digest) for r in expected.values()}
    assert first.call("no-such-key") is None


def test_a_remembered_recording_is_scanned_not_parsed_and_a_lookup_parses_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, calls = _stage(tmp_path)
    index_stage(directory)  # verified in full, remembered
    parsed = _parses(monkeypatch)
    index = RecordingIndex(tmp_path)
    wanted = calls[3].record.key
    assert index.identities("fake", calls[3].record.model.name) == {calls[3].record.model}
    assert index.lookup(wanted, "judge") == calls[3].record
    # One line for the lookup, and one for the recipe-1 line, whose key under today's recipe needs it.
    assert len(parsed) == 2


def test_content_changed_after_it_was_remembered_is_verified_again_and_refused(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index_stage(directory)
    path = directory / stage_folders.CALLS_FILE
    reply = calls[2].record.reply.text
    path.write_text(path.read_text().replace(reply, reply + " edited", 1))
    with pytest.raises(CorruptRecordError, match=r"calls\.jsonl:\d+: call .* checksum does not match"):
        index_stage(directory)
    index = RecordingIndex(tmp_path)
    with pytest.raises(CorruptRecordError, match="cannot be used"):
        index.own(calls[2].record.key, "judge")
    assert index.elsewhere(calls[3].record.key) is None  # nothing of a damaged recording is served


def test_audit_of_one_item_parses_only_its_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory, _ = _stage(tmp_path)
    every = [loaded.call for loaded in stage_reader.read_stage(directory, verify=False)]
    parsed = _parses(monkeypatch)
    found = [loaded.call for loaded in read_items(directory, {"901"})]
    assert found == [call for call in every if call.context.item == "901"] and len(found) == 2
    assert len(parsed) == 2


def test_audit_of_one_item_names_a_line_that_is_not_json(tmp_path: Path) -> None:
    directory, _ = _stage(tmp_path)
    path = directory / stage_folders.CALLS_FILE
    path.write_text("{not json\n" + path.read_text())
    with pytest.raises(CorruptRecordError, match=r"calls\.jsonl:1: not a recorded call"):
        list(read_items(directory, {"901"}))


def test_gc_keys_from_remembered_recordings_equal_a_full_read_and_damage_is_counted(tmp_path: Path) -> None:
    directory, _ = _stage(tmp_path)
    problems: list[str] = []
    expected = {call.record.key for _, _, call in recorded_calls(tmp_path, problems)}
    assert problems == [] and recorded_keys(tmp_path, problems) == expected and problems == []
    path = directory / stage_folders.CALLS_FILE
    lines = path.read_text().split("\n")
    path.write_text("\n".join([lines[0], "{not json", lines[1], "{also not json", *lines[2:]]))
    recorded_keys(tmp_path, problems)
    assert len(problems) == 2 and all("not a recorded call" in p for p in problems)


def _counted_packing(monkeypatch: pytest.MonkeyPatch) -> list[RecordedCall]:
    packed: list[RecordedCall] = []
    real = line_format.call_to_line

    def counted(call: RecordedCall, blobs: dict[str, str]) -> str:
        packed.append(call)
        return real(call, blobs)

    monkeypatch.setattr(stage_calls, "call_to_line", counted)
    return packed


def test_a_replay_keeps_its_recordings_lines_instead_of_packing_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE
    session, _ = make_session(tmp_path, "auto")
    asked = [
        (request(f"Judge {i}.\n{TRANSCRIPT}"), CallContext(stage="judge", item=f"90{i}")) for i in range(4)
    ]
    for req, ctx in asked:
        session.chat(req, ctx)
    session.close()
    before = recorded.read_bytes()
    packed = _counted_packing(monkeypatch)
    replay, backend = make_session(tmp_path, "replay")
    for req, ctx in asked:
        replay.chat(req, ctx)
    replay.close()
    assert backend.calls == [] and packed == [] and recorded.read_bytes() == before
    # The same call under another context is a line of its own, packed.
    again, _ = make_session(tmp_path, "replay")
    for req, ctx in [*asked, (asked[0][0], CallContext(stage="judge", item="999"))]:
        again.chat(req, ctx)
    again.close()
    assert [call.context.item for call in packed] == ["999"]
    assert recorded.read_bytes() != before
    assert len(list(stage_reader.read_stage(recorded.parent))) == 5


def test_a_memo_that_does_not_write_is_consulted_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, _ = _stage(tmp_path)
    folder = tmp_path / "verified"
    index_stage(directory, memo=verified_memo.VerifiedMemo(folder, writes=False))
    assert not folder.exists()  # status writes nothing
    verified_memo.forget_in_process()
    index_stage(directory, memo=verified_memo.VerifiedMemo(folder))  # a session's
    remembered = sorted(folder.iterdir())
    verified_memo.forget_in_process()
    parsed = _parses(monkeypatch)
    index_stage(directory, memo=verified_memo.VerifiedMemo(folder, writes=False))
    assert len(parsed) == 1  # only the recipe-1 line, for its key under today's recipe: not verified again
    assert sorted(folder.iterdir()) == remembered


def test_an_index_that_holds_one_stage_serves_what_one_holding_all_serves(tmp_path: Path) -> None:
    """`judgeloop status` (hold_one): one stage's recording held at a time, the others' models and
    keys noted, a call another stage recorded served from that stage read again (issue 33)."""
    calls = _calls(6)
    for name, part in (("assess", calls[:2]), ("judge", calls[2:4]), ("refine", calls[4:])):
        stage_writer.write_stage(tmp_path / name, part)
    every, one = RecordingIndex(tmp_path), RecordingIndex(tmp_path, hold_one=True)
    model = calls[0].record.model
    assert one.identities("fake", model.name) == every.identities("fake", model.name)
    assert not one._stages.held  # identities read every stage and held none
    for stage in ("assess", "judge", "refine"):
        for call in calls:
            key = call.record.key
            assert one.lookup(key, stage) == every.lookup(key, stage)
        assert [name for name, held in one._stages.held.items() if held.index is not None] == [stage]
    assert one.lookup("0" * 64, "judge") is None
    assert one.damaged() == every.damaged() == []
