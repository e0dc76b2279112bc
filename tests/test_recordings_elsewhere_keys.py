"""A lookup in the other stages' recordings reads their keys first (issue 33:
pipeline.llm.recordings.stage_keys): a stage that does not show the key is not read, verified or
held; one that shows it is read and verified whole before it answers, as before; and the trust rules
of the lookup stay (a damaged recording answers nothing; no unpinned folder answers while a pinned
recording is damaged, even one the lookup passed over)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.llm.recordings import line_checks, stage_folders, stage_read, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.stage_keys import recorded_keys
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import ChatReply
from tests.test_recordings import _as_written_by_recipe_1, _calls
from tests.test_trust_lock_owner import lock_as

PINNED = ("assess", "judge")
NOWHERE = "jl2:" + "0" * 32  # a key no recording holds


pytestmark = pytest.mark.usefixtures("fresh_memo")


def _as_stage(calls: list[RecordedCall], stage: str) -> list[RecordedCall]:
    return [
        RecordedCall(context=call.context.model_copy(update={"stage": stage}), record=call.record)
        for call in calls
    ]


def _project(root: Path, judge_calls: int = 6) -> tuple[list[RecordedCall], list[RecordedCall]]:
    """recordings/assess and recordings/judge, each owned by its stage in dvc.yaml and pinned in
    dvc.lock; the calls of each."""
    everyone = _calls(judge_calls + 2)
    assess, judge = _as_stage(everyone[:2], "assess"), everyone[2:]
    stage_writer.write_stage(root / "recordings" / "assess", assess)
    stage_writer.write_stage(root / "recordings" / "judge", judge)
    pipeline = {
        "stages": {
            s: {"cmd": f"python -m stages paper {s}", "outs": [{f"recordings/{s}": {"cache": False}}]}
            for s in PINNED
        }
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline))
    _lock(root)
    return assess, judge


def _lock(root: Path) -> None:
    lock_as(root, {s: [s] for s in PINNED})


def _index(root: Path) -> RecordingIndex:
    return RecordingIndex(root / "recordings", Pins(root, root / "recordings"))


@pytest.fixture
def whole(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stages whose recordings are read whole (placed, hashed, pinned, verified), by name."""
    read: list[str] = []

    def counting(directory: Path, **options: object) -> StageIndex:
        read.append(directory.name)
        return index_stage(directory, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(stage_read, "index_stage", counting)
    return read


@pytest.fixture
def verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files of the call lines verified (key re-derived, checksum checked), a name a line."""
    seen: list[str] = []
    real = line_checks.trusted_call

    def counting(line: str, parts: object, number: int) -> RecordedCall:
        seen.append(parts.path.parent.name)  # type: ignore[attr-defined]
        return real(line, parts, number)  # type: ignore[arg-type]

    monkeypatch.setattr(line_checks, "trusted_call", counting)
    return seen


def _edit_reply(root: Path, call: RecordedCall) -> None:
    """One reply edited in judge's recording (its key and checksum as they were), and dvc.lock
    relocked to the edit, so that the line's own check is what refuses it."""
    path = root / "recordings" / "judge" / stage_folders.CALLS_FILE
    text = call.record.reply.text
    path.write_text(path.read_text().replace(text, text + " edited", 1))
    _lock(root)


def test_a_miss_elsewhere_reads_the_other_stages_keys_only(
    tmp_path: Path, whole: list[str], verified: list[str]
) -> None:
    """Found at 1M calls: refine's first miss read, verified and held assess's and judge's
    recordings (125 CPU s, a few hundred MB), though none of its calls is there."""
    _project(tmp_path)
    index = _index(tmp_path)
    assert index.lookup(NOWHERE, "refine") is None
    assert index.lookup("jl2:" + "f" * 32, "refine") is None
    assert whole == [] and verified == []
    assert index.read_already("assess") is None and index.read_already("judge") is None


def test_a_call_another_stage_recorded_is_served_once_its_recording_is_verified_whole(
    tmp_path: Path, whole: list[str], verified: list[str]
) -> None:
    _, judge = _project(tmp_path)
    index = _index(tmp_path)
    for call in judge:
        assert index.lookup(call.record.key, "refine") == call.record
    assert whole == ["judge"]  # assess does not show the keys: not read
    assert sorted(verified) == ["judge"] * len(judge)  # every line of judge's, before the first served


def test_a_tampered_line_of_another_stage_is_refused_not_served(tmp_path: Path) -> None:
    _, judge = _project(tmp_path)
    _edit_reply(tmp_path, judge[2])
    index = _index(tmp_path)
    assert index.lookup(judge[2].record.key, "refine") is None
    assert index.lookup(judge[3].record.key, "refine") is None  # nothing of a damaged recording
    [damage] = index.damaged()
    assert "judge/calls.jsonl" in damage and "checksum does not match" in damage


def test_a_damaged_recording_a_miss_passed_over_is_still_named_when_the_stage_fails(tmp_path: Path) -> None:
    """A replay that misses names the recordings left out (ReplayIncompleteError): one whose keys
    did not show the call is read whole for that, so its damage is named as before."""
    _, judge = _project(tmp_path)
    _edit_reply(tmp_path, judge[2])
    index = _index(tmp_path)
    assert index.lookup(NOWHERE, "refine") is None
    [damage] = index.damaged()
    assert "judge/calls.jsonl" in damage and "checksum does not match" in damage


def _forged(calls: list[RecordedCall], stage: str) -> list[RecordedCall]:
    return [
        RecordedCall(
            context=call.context.model_copy(update={"stage": stage}),
            record=CallRecord.new(call.record.model, call.record.request, ChatReply(text="forged")),
        )
        for call in calls
    ]


def test_no_unpinned_folder_answers_while_a_pinned_recording_the_lookup_passed_over_is_damaged(
    tmp_path: Path,
) -> None:
    """judge's line of a call edited to show another key: judge's keys no longer show the call, and
    an unpinned folder (`zzz`, which no stage owns) holds a forged reply for it. Judge is damaged, so
    the forged folder must not answer, though the lookup had no reason to read judge for the key."""
    assess, judge = _project(tmp_path)
    wanted = judge[0].record.key
    path = tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE
    path.write_text(path.read_text().replace(wanted, NOWHERE, 1))
    _lock(tmp_path)
    stage_writer.write_stage(tmp_path / "recordings" / "zzz", _forged(judge[:1], "zzz"))
    keys = recorded_keys(tmp_path / "recordings" / "judge")
    assert keys is not None and wanted not in keys and NOWHERE in keys
    index = _index(tmp_path)
    assert index.lookup(wanted, "refine") is None
    assert index.lookup(assess[0].record.key, "refine") == assess[0].record  # a pinned one answers
    assert len(index.damaged()) == 1


def test_an_unpinned_folder_answers_once_every_pinned_one_is_read_whole(
    tmp_path: Path, whole: list[str]
) -> None:
    _project(tmp_path)
    theirs = _calls(12)[10:]  # calls neither pinned stage recorded
    stage_writer.write_stage(tmp_path / "recordings" / "zzz", _as_stage(theirs, "zzz"))
    index = _index(tmp_path)
    assert index.lookup(theirs[0].record.key, "refine") == theirs[0].record
    assert whole == ["assess", "judge", "zzz"]


def test_a_recording_not_read_for_keys_is_read_whole_and_serves_as_before(
    tmp_path: Path, whole: list[str]
) -> None:
    _, judge = _project(tmp_path)
    old = RecordedCall(context=judge[0].context, record=_as_written_by_recipe_1(judge[0].record))
    stage_writer.write_stage(tmp_path / "recordings" / "judge", [old, *judge[1:]])
    _lock(tmp_path)
    assert recorded_keys(tmp_path / "recordings" / "judge") is None  # its key is derived, not written
    index = _index(tmp_path)
    assert index.lookup(NOWHERE, "refine") is None
    assert whole == ["judge"]
    served = index.lookup(judge[0].record.key, "refine")  # under today's key, as a whole read serves it
    assert served is not None and served.reply == judge[0].record.reply


@pytest.mark.usefixtures("small_threshold")
def test_the_keys_of_a_sharded_recording_are_those_its_verified_index_holds(tmp_path: Path) -> None:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(40))
    assert len(list(directory.glob("calls-*.jsonl"))) > 1
    keys = recorded_keys(directory)
    assert keys is not None and set(keys) == set(index_stage(directory).at)
