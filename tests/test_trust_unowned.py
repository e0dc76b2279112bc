"""Attack 6 of issue 28: a recordings folder that no stage owns (pinned by nothing) does not reach
the report pages, is marked UNTRUSTED by `judgeloop audit`, and `judge-evaluate --stage` may not
name a pipeline stage (it would add to that stage's pinned recording and break its replay)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.experiments.paper.report.html import load_records
from pipeline.llm.recordings import stage_reader, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import ChatReply
from pipeline.tools.cli import main
from tests.conftest import ROOT
from tests.project import recorded_project


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    return tmp_path


def plant_folder(root: Path, name: str = "aaa") -> CallRecord:
    """A folder beside the stages' (sorting first), holding a judge call with another reply."""
    loaded = next(iter(stage_reader.read_stage(root / "recordings" / "judge")))
    real = loaded.call.record
    forged = CallRecord.new(real.model, real.request, ChatReply(text="Score: 5 (planted)"))
    stage_writer.write_stage(root / "recordings" / name, [RecordedCall(loaded.call.context, forged)])
    return real


def test_the_report_pages_read_only_the_stages_own_recordings(project: Path) -> None:
    real = plant_folder(project)
    records = load_records(project / "recordings")
    assert records[real.key].reply.text == real.reply.text
    assert not any("planted" in r.reply.text for r in records.values())


def test_audit_marks_the_calls_of_an_unowned_folder_untrusted(project: Path) -> None:
    real = plant_folder(project)
    result = CliRunner().invoke(main, ["audit", "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    shown = [json.loads(line) for line in result.stdout.splitlines()]
    planted = [c for c in shown if "planted" in c["reply"]["text"]]
    assert len(planted) == 1 and "owned by no stage of dvc.yaml" in planted[0]["problem"]
    assert all(c["problem"] is None for c in shown if c not in planted)
    text = CliRunner().invoke(main, ["audit", "--search", "planted"]).stdout
    assert "UNTRUSTED: " in text and "recordings/aaa is owned by no stage" in text
    assert real.key in text


def test_a_judge_evaluate_folder_written_here_is_not_marked(project: Path) -> None:
    plant_folder(project, "judge_evaluate")
    runs = project / ".judgeloop" / "runs"
    summary = {"stage": "judge_evaluate", "mode": "auto", "hits": 0, "model_calls": 1, "replay_misses": 0}
    (runs / "judge_evaluate.json").write_text(json.dumps({**summary, "keys": {}}))
    result = CliRunner().invoke(main, ["audit", "--search", "planted", "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["problem"] for line in result.stdout.splitlines()] == [None]


@pytest.mark.parametrize("stage", ["judge", "rag_judge", "summeval_judge"])
def test_judge_evaluate_refuses_a_pipeline_stages_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": {"backend": "fake", "model": "m"}}))
    (tmp_path / "answer.txt").write_text("an answer")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = CliRunner().invoke(
        main, ["judge-evaluate", "a question", "--answer-file", "answer.txt", "--stage", stage]
    )
    assert result.exit_code == 2, result.output
    assert (
        f"'{stage}' is a pipeline stage's name" in result.output and "--stage judge_evaluate" in result.output
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing recorded


@pytest.mark.parametrize("stage", ["JUDGE", "Rag_Judge", "summEval_judge"])
def test_judge_evaluate_refuses_a_pipeline_stages_name_in_another_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """On a file system that ignores case (macOS's, Windows') recordings/JUDGE is recordings/judge:
    judge-evaluate's calls would be added to the pinned stage's recording (writers-red)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": {"backend": "fake", "model": "m"}}))
    (tmp_path / "answer.txt").write_text("an answer")
    result = CliRunner().invoke(
        main, ["judge-evaluate", "a question", "--answer-file", "answer.txt", "--stage", stage]
    )
    assert result.exit_code == 2, result.output
    assert "a pipeline stage's name" in result.output
    assert not (tmp_path / "recordings").exists()
