"""Edits are evident: a recording is pinned by its md5 in dvc.lock, and a recording that no longer
matches (a reply edited and its checksum recomputed, which no checksum can catch) is refused by
the stage that would read it, naming the stage and the command that re-locks it on purpose."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.errors import LockMismatchError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader, stage_writer
from pipeline.llm.recordings.pins import LOCK_FILE, Pins, dir_md5
from pipeline.llm.records import RecordedCall
from pipeline.tools.cli import main
from tests.conftest import ROOT
from tests.project import MODEL, recorded_project, run_pipeline, scripted, write_params

STAGES = ("assess", "judge", "refine")


def test_the_recordings_hash_as_dvc_hashes_them_in_the_committed_lock() -> None:
    lock = yaml.safe_load((ROOT / LOCK_FILE).read_text())
    pinned = {
        out["path"]: out["md5"]
        for stage in lock["stages"].values()
        for out in stage.get("outs", [])
        if out["path"].startswith("recordings/")
    }
    assert len(pinned) >= 9
    for path, md5 in pinned.items():
        assert dir_md5(ROOT / path) == md5, path
        assert Pins(ROOT, ROOT / "recordings").problem(ROOT / path) is None


def lock_recordings(root: Path) -> None:
    """dvc.lock as `dvc repro` leaves it, for the recordings (the rest does not matter here)."""
    stages = {
        stage: {
            "cmd": f"python -m stages.{stage}",
            "outs": [
                {"path": f"recordings/{stage}", "hash": "md5", "md5": dir_md5(root / "recordings" / stage)}
            ],
        }
        for stage in STAGES
    }
    (root / LOCK_FILE).write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))


def forge_a_reply(root: Path) -> str:
    """A judge's reply edited, and its checksum recomputed: the record verifies."""
    directory = root / "recordings" / "judge"
    calls = [loaded.call for loaded in stage_reader.read_stage(directory)]
    target = next(c for c in calls if c.record.reply.text.endswith("Score: 2"))
    reply = target.record.reply.model_copy(
        update={"text": target.record.reply.text.replace("Score: 2", "Score: 5")}
    )
    forged = target.record.model_copy(update={"reply": reply})
    forged = forged.model_copy(update={"checksum": forged.expected_checksum()})
    assert forged.verify()
    stage_writer.write_stage(
        directory, [c if c is not target else RecordedCall(c.context, forged) for c in calls]
    )
    assert [
        loaded.call.record
        for loaded in stage_reader.read_stage(directory)
        if loaded.call.record.key == forged.key
    ] == [forged]
    return forged.key


def test_replay_refuses_an_edited_and_rechecksummed_reply_until_relocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    lock_recordings(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "outputs" / "paper").iterdir()}
    key = forge_a_reply(tmp_path)
    shutil.rmtree(tmp_path / ".judgeloop")  # a collaborator's fresh clone
    write_params(tmp_path, cache={"mode": "replay"})
    fake = FakeBackend(scripted, name=MODEL)

    run_pipeline(tmp_path, fake, stages=("assess",))  # the stages whose recordings match still replay
    with pytest.raises(LockMismatchError) as refused:
        run_pipeline(tmp_path, fake, stages=("judge",))
    message = refused.value.message
    assert (
        "the recording of stage 'judge' cannot be used: recordings/judge does not match its entry" in message
    )
    assert "stage 'judge': locked" in message and "`git checkout -- recordings/judge`" in message
    assert "re-lock it on purpose: `dvc commit --force judge`" in message  # judge's only output here
    assert "`make replay ARGS=judge` recomputes the stage's outputs" in message
    assert fake.calls == []
    assert {p.name: p.read_bytes() for p in (tmp_path / "outputs" / "paper").iterdir()} == before

    result = CliRunner().invoke(main, ["cache", "verify"])
    assert result.exit_code == 1 and "recordings/judge does not match its entry in" in result.output

    lock_recordings(tmp_path)  # what `dvc commit --force judge` writes: the edit is now in dvc.lock
    run_pipeline(tmp_path, fake, stages=("judge",))
    assert fake.calls == []
    judged = (tmp_path / "outputs" / "paper" / "judgements.jsonl").read_text()
    assert (
        judged != before["judgements.jsonl"].decode()
        and key in (tmp_path / "recordings/judge/calls.jsonl").read_text()
    )
