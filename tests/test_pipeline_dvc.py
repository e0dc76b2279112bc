"""Real DVC runs in a temporary git repository, with the fake backend standing in for a model."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.llm.recordings import stage_reader, stage_writer
from pipeline.llm.recordings.pins import dir_md5
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
OUTPUTS = (
    "outputs/paper/assessments.jsonl",
    "outputs/paper/judgements.jsonl",
    "outputs/paper/refinement.jsonl",
    "recordings/assess/calls.jsonl",
    "recordings/judge/calls.jsonl",
    "recordings/refine/calls.jsonl",
    "outputs/paper/metrics.json",
    "outputs/paper/report.md",
    "outputs/paper/report.html",
    "outputs/paper/plots/figure2.csv",
    "dvc.lock",
)


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env['PATH']}"
    result = subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _dvc(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "dvc", *args], cwd, **env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("pipeline", "stages", "data"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["llm"]["backend"] = "fake"
    params["llm"]["model"] = "fake-model"
    params["data"]["limit"] = 3
    params["refine"]["max_iterations"] = 2
    params["summeval"]["resamples"] = 100  # the SummEval stages run too: keep their bootstrap short
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run(["git", "init", "-q"], tmp_path)
    _dvc(tmp_path, "init", "-q")
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in OUTPUTS}


def _one_start_and_one_end_line_per_stage(project: Path, log: str) -> None:
    """Not on a terminal (a pipe), each stage says what it expects and what it did, one line each."""
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    for stage, spec in stages.items():
        lines = [line for line in log.splitlines() if line.startswith(f"{stage}: ")]
        assert len(lines) == 2, (stage, lines)
        start, end = lines
        if any(str(path).startswith("recordings/") for out in spec["outs"] for path in out):
            assert re.fullmatch(
                rf"{stage}: \d+ calls expected \(\d+ recorded, 0 for the model\), \d+ items", start
            )
            assert re.match(
                rf"{stage}: done in [\d.]+ s: \d+ calls, \d+ hits, 0 misses sent to the model", end
            )
        else:
            assert start == f"{stage}: starting (it calls no model)"
            assert re.fullmatch(rf"{stage}: done in [\d.]+ s", end)


def test_repro_then_replay_is_byte_identical_and_params_rerun_only_what_they_touch(project: Path) -> None:
    first = _dvc(project, "repro")
    assert "Running stage 'assess'" in first.stdout
    recorded = _snapshot(project)

    again = _dvc(project, "repro")
    assert "Running stage" not in again.stdout  # everything up to date: no stage runs, no call is made

    # A collaborator's fresh clone: no local cache, only the recordings. Replay re-executes every stage.
    shutil.rmtree(project / ".judgeloop")
    replay = _dvc(project, "repro", "--force", JUDGELOOP_CACHE_MODE="replay")
    assert "0 misses sent to the model (cache mode replay)" in replay.stderr
    _one_start_and_one_end_line_per_stage(project, replay.stderr)
    assert _snapshot(project) == recorded

    # An experiment runs in a temporary copy of the commit: no local cache there, only the recordings.
    _run(["git", "add", "-A"], project)
    _run(["git", "commit", "-qm", "recorded experiment"], project, **GIT_IDENTITY)
    experiment = _dvc(project, "exp", "run", "-S", "refine.threshold=2", "--temp")
    assert "0 misses sent to the model" in experiment.stdout + experiment.stderr
    # Changing a refine parameter re-runs refine and aggregate only (and the index over them).
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["refine"]["max_iterations"] = 1
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    changed = _dvc(project, "repro")
    ran = {line.split("'")[1] for line in changed.stdout.splitlines() if line.startswith("Running stage")}
    assert ran == {"refine", "aggregate", "report_index"}  # and the index, which shows the metrics
    assert "refine: " in changed.stderr and "0 misses sent to the model" in changed.stderr  # all recorded


def test_replay_of_an_unrecorded_change_names_every_missing_call(project: Path) -> None:
    _dvc(project, "repro")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["judge"]["num_predict"] = 99
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "JUDGELOOP_CACHE_MODE": "replay"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        [sys.executable, "-m", "dvc", "repro"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "stage 'judge' needs 12 call(s) that are not recorded" in output
    for item in ("item=901", "item=902", "item=903"):
        assert item in output


def test_replay_refuses_an_edited_recording_until_dvc_commit_relocks_it(project: Path) -> None:
    _dvc(project, "repro")
    _run(["git", "add", "-A"], project)
    _run(["git", "commit", "-qm", "recorded experiment"], project, **GIT_IDENTITY)
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    recorded = [
        o for stage in lock["stages"].values() for o in stage["outs"] if o["path"].startswith("recordings/")
    ]
    assert {o["path"] for o in recorded} >= {"recordings/assess", "recordings/judge", "recordings/refine"}
    for out in recorded:  # our hash of a recording is DVC's
        assert dir_md5(project / out["path"]) == out["md5"], out["path"]

    # A reply edited and its checksum recomputed: every record verifies, the lock does not match.
    directory = project / "recordings" / "judge"
    calls = [loaded.call for loaded in stage_reader.read_stage(directory)]
    last = max(calls, key=lambda c: c.context.attempt)  # a last attempt: no later prompt quotes it
    verdict = json.loads(last.record.reply.text)  # the demo's judge answers {"explanation", "score"}
    verdict["explanation"] = "EDITED " + verdict["explanation"]
    forged = last.record.model_copy(
        update={"reply": last.record.reply.model_copy(update={"text": json.dumps(verdict)})}
    )
    forged = forged.model_copy(update={"checksum": forged.expected_checksum()})
    stage_writer.write_stage(
        directory, [dataclasses.replace(c, record=forged) if c is last else c for c in calls]
    )
    env = {**os.environ, "JUDGELOOP_CACHE_MODE": "replay"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    shutil.rmtree(project / ".judgeloop")
    refused = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", "--force", "--single-item", "judge"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0
    assert "the recording of stage 'judge' cannot be used: recordings/judge does not match" in refused.stderr
    relock = "git checkout -- outputs/paper/judgements.jsonl && dvc commit --force judge"
    assert f"`{relock}`" in refused.stderr

    # The commands the error names, as a user types them: re-lock on purpose, then replay.
    _run(["sh", "-c", relock], project)
    _dvc(project, "repro", "--force", "--single-item", "judge", JUDGELOOP_CACHE_MODE="replay")
    assert "EDITED " in (project / "outputs" / "paper" / "judgements.jsonl").read_text()
