"""`judgeloop variant DIR`: a second run recorded into a folder (params changed, the stages before
--from copied, the rest run there as dvc.yaml runs them), which `judgeloop diff` reads and which
replays byte for byte from its own recordings. On the fake backend (llm.backend: fake)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.tools.cli import main
from tests.project import recorded_project

pytestmark = pytest.mark.slow

FILES = ("outputs/paper/judgements.jsonl", "outputs/paper/refinement.jsonl", "recordings/judge/calls.jsonl")


def test_a_variant_is_recorded_diffed_and_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recorded_project(project)
    monkeypatch.chdir(project)
    args = ["variant", "runs/warm", "--from", "judge", "-S", "llm.options.temperature=0.7"]
    result = CliRunner().invoke(main, [*args, "-S", "refine.max_iterations=1"])
    assert result.exit_code == 0, result.output
    folder = project / "runs" / "warm"
    params = yaml.safe_load((folder / "params.yaml").read_text())
    assert params["llm"]["options"]["temperature"] == 0.7 and params["refine"]["max_iterations"] == 1
    assert params["data"]["transcripts"] == "../../data"  # the data it reads, named from the folder
    # What the variant judges is what the first run assessed: copied, not run again.
    assert (folder / "outputs/paper/assessments.jsonl").read_bytes() == (
        project / "outputs/paper/assessments.jsonl"
    ).read_bytes()
    assert (folder / "recordings/assess").is_dir() and (folder / "recordings/refine").is_dir()

    found = CliRunner().invoke(main, ["diff", "workspace", "runs/warm", "--design", "paper", "--json"])
    assert found.exit_code == 0, found.output
    changes = json.loads(found.stdout)["changes"]
    at_first = [c for c in changes if c["iteration"] == 0]
    assert at_first and {c["cause"] for c in at_first} == {"sampling"}
    assert all("temperature 0.0 → 0.7" in c["detail"] for c in at_first)

    recorded = {name: (folder / name).read_bytes() for name in FILES}
    for name in ("outputs", ".judgeloop"):
        for path in sorted((folder / name).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
    replayed = CliRunner().invoke(main, [*args, "-S", "refine.max_iterations=1", "--replay"])
    assert replayed.exit_code == 0, replayed.output
    assert {name: (folder / name).read_bytes() for name in FILES} == recorded
