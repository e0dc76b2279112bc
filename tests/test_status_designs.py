"""`judgeloop status` dry-runs every design's LLM stages, on the committed demo experiments."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.recordings.stage_reader import split_recording
from pipeline.tools.cli import main
from tests.conftest import ROOT

LLM_STAGES = sorted(p.parent.name for p in (ROOT / "recordings").glob(f"*/{CALLS_FILE}"))


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed experiments (params, data, recordings, outputs), a DVC project."""
    for name in ("dvc.yaml", "dvc.lock", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in ("data", "recordings", "outputs"):
        shutil.copytree(ROOT / name, tmp_path / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True, env=env)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def status() -> dict[str, Any]:
    result = CliRunner().invoke(main, ["status", "--all", "--offline", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def recorded_calls(stage: str) -> int:
    return len(split_recording(ROOT / "recordings" / stage).calls)


def test_every_design_replays_as_recorded(demo: Path) -> None:
    assert {"assess", "rag_judge", "regen_evaluate", "select_pick", "summeval_judge"} <= set(LLM_STAGES)
    prediction = status()
    stages = {s["stage"]: s for s in prediction["stages"]}
    for stage in LLM_STAGES:
        # A stage's recording holds exactly its run: the dry run makes the same calls, all recorded.
        assert (stages[stage]["calls"], stages[stage]["model_calls"], stages[stage]["exact"]) == (
            recorded_calls(stage),
            0,
            True,
        ), stage
    assert {"aggregate", "rag_aggregate", "select_aggregate"} <= stages.keys()  # shown, no calls
    assert prediction["offline_replay_ok"]


def test_a_changed_rag_prompt_is_predicted_for_its_stage_alone(demo: Path) -> None:
    params = yaml.safe_load(Path("params.yaml").read_text())
    params["rag"]["dimensions"][0]["description"] += " Answer as a strict reviewer would."
    Path("params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    rows = len((demo / params["rag"]["rows"]).read_text().splitlines())
    prediction = status()
    model_calls = {s["stage"]: s["model_calls"] for s in prediction["stages"] if s.get("model_calls")}
    # Every row's first ask is new; what follows depends on replies not known yet: a lower bound.
    assert model_calls == {"rag_judge": rows}
    assert not prediction["exact"] and not prediction["offline_replay_ok"]
    assert Path("params.yaml").read_text().count("strict reviewer") == 1  # status wrote nothing


def test_a_design_whose_input_is_missing_is_reported_not_fatal(demo: Path) -> None:
    params = yaml.safe_load(Path("params.yaml").read_text())
    params["summeval"]["corpus"] = "../no/such/summeval.jsonl"
    Path("params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    prediction = status()
    summeval = next(s for s in prediction["stages"] if s["stage"] == "summeval_judge")
    assert "cannot be predicted" in summeval["why"] and "no/such/summeval.jsonl" in summeval["why"]
    assert not summeval["exact"]
    rag = next(s for s in prediction["stages"] if s["stage"] == "rag_judge")
    assert rag["exact"] and rag["model_calls"] == 0  # the designs after it are still dry-run
