"""`judgeloop cache verify` reads a stage through its placed lines (pipeline.tools.cache.verified_stages)
instead of holding its recording whole (issue 33: over 8 GB at a million calls): a healthy stage gives
what the tolerant read gave, and any stage with something wrong is read tolerantly, its problems
listed as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.llm.recordings import stage_folders, stage_writer
from pipeline.llm.records import RecordedCall
from pipeline.tools.cache import recorded_sums
from pipeline.tools.cache.verified_stages import stage_entries
from tests.test_recordings_shards import _calls

Found = tuple[dict[str, recorded_sums.Recorded], recorded_sums.RecordedScan]


def _tolerant(root: Path, monkeypatch: pytest.MonkeyPatch) -> Found:
    with monkeypatch.context() as patch:
        patch.setattr(recorded_sums, "stage_entries", lambda *args: None)
        return recorded_sums.recorded_checksums(root, None)


def _stages(root: Path, judge: list[RecordedCall], refine: list[RecordedCall]) -> None:
    stage_writer.write_stage(root / "judge", judge)
    stage_writer.write_stage(root / "refine", refine)


@pytest.mark.parametrize("sharded", [True, False])
def test_a_healthy_recording_gives_what_the_tolerant_read_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_threshold: None, sharded: bool
) -> None:
    n = 40 if sharded else 6  # past SHARD_AT (8): shards; else one file
    judge = _calls(n)
    # One call recorded by both stages: the first stage's place is kept, as before.
    _stages(tmp_path, judge, [*_calls(n, salt=" refine"), judge[3]])
    assert (len(list((tmp_path / "judge").iterdir())) > 1) is sharded
    streamed = recorded_sums.recorded_checksums(tmp_path, None)
    assert streamed == _tolerant(tmp_path, monkeypatch)
    recorded, found = streamed
    assert found.calls == 2 * n + 1 and not found.problems
    assert recorded[judge[3].record.key].path.parent.name == "judge"


def test_a_call_that_does_not_verify_sends_its_stage_to_the_tolerant_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stages(tmp_path, _calls(6), _calls(6, salt=" refine"))
    path = tmp_path / "refine" / stage_folders.CALLS_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    raw = json.loads(lines[2])
    raw["reply"]["text"] += " edited"
    lines[2] = json.dumps(raw, separators=(",", ":")) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    assert stage_entries(tmp_path, tmp_path / "refine", None, lambda *args: args) is None
    assert stage_entries(tmp_path, tmp_path / "judge", None, lambda *args: args) is not None
    recorded, found = recorded_sums.recorded_checksums(tmp_path, None)
    assert (recorded, found) == _tolerant(tmp_path, monkeypatch)
    assert len(found.problems) == 1 and f"{path}:3" in found.problems[0]
    assert found.calls == 12 and len(recorded) == 11


def test_a_damaged_shard_sends_its_stage_to_the_tolerant_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_threshold: None
) -> None:
    _stages(tmp_path, _calls(40), _calls(6, salt=" refine"))
    shard = next(p for p in sorted((tmp_path / "judge").iterdir()) if p.name.startswith("calls-"))
    shard.write_bytes(shard.read_bytes().replace(b'"judge"', b'"judgE"', 1))
    assert stage_entries(tmp_path, tmp_path / "judge", None, lambda *args: args) is None
    recorded, found = recorded_sums.recorded_checksums(tmp_path, None)
    assert (recorded, found) == _tolerant(tmp_path, monkeypatch)
    assert found.problems
