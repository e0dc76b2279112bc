"""Replay with the network really cut: the stages run in a new network namespace (`unshare -n`),
where not even loopback is up, from recordings made over real HTTP against the fake Ollama."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.experiments.paper.params import PaperParams
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.judge_responder import experiment_responder
from tests.conftest import ROOT
from tests.helpers import run_experiment

pytestmark = pytest.mark.slow


def _network_cut_prefix() -> list[str]:
    """`unshare -n` as root, `unshare -rn` (a user namespace) otherwise; skip where neither works."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if shutil.which("unshare") is None:
            break
        probe = subprocess.run([*prefix, "true"], capture_output=True)
        if probe.returncode == 0:
            return prefix
    pytest.skip("cannot create a network namespace here (unshare -n / -rn refused)")


def _stages(clone: Path, *stages: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELOOP_CACHE_MODE": "replay"}
    script = " && ".join(f"{sys.executable} -m stages paper {stage}" for stage in stages)
    return subprocess.run(
        [*_network_cut_prefix(), "sh", "-c", script],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A live run over loopback HTTP, and a collaborator's clone holding only params and recordings."""
    settings: dict[str, dict[str, Any]] = {
        "llm": {"backend": "ollama", "model": "test-model", "parallelism": 4},
        "data": {"transcripts": str(ROOT / "data" / "demo"), "limit": 3},
        "refine": {"max_iterations": 2},
    }
    with FakeOllama(responder=experiment_responder, parallel_slots=4) as server:
        settings["llm"]["base_url"] = server.url
        outputs = run_experiment(PaperParams.model_validate(settings), tmp_path / "live")
    clone = tmp_path / "clone"
    shutil.copytree(tmp_path / "live" / "recordings", clone / "recordings")
    (clone / "params.yaml").write_text(yaml.safe_dump(settings))
    return clone, outputs


def test_replay_serves_every_recorded_call_with_the_network_cut(
    recorded: tuple[Path, dict[str, bytes]],
) -> None:
    clone, live = recorded
    result = _stages(clone, "assess", "judge", "refine")
    assert result.returncode == 0, result.stderr
    assert "0 misses sent to the model (cache mode replay)" in result.stderr
    for ours, theirs in (("assessments", "assess"), ("judgements", "judge"), ("refinement", "refine")):
        assert (clone / "outputs" / "paper" / f"{ours}.jsonl").read_bytes() == live[f"outputs/{theirs}.jsonl"]


def test_replay_with_the_network_cut_names_every_missing_call(
    recorded: tuple[Path, dict[str, bytes]],
) -> None:
    clone, _ = recorded
    calls = clone / "recordings" / "judge" / "calls.jsonl"
    lines = calls.read_text().splitlines(keepends=True)
    dropped = [line for line in lines if '"item":"902"' in line and '"metric":"accuracy"' in line]
    assert dropped
    calls.write_text("".join(line for line in lines if line not in dropped))
    result = _stages(clone, "assess", "judge")
    assert result.returncode != 0
    assert f"stage 'judge' needs {len(dropped)} call(s) that are not recorded" in result.stderr
    assert result.stderr.count("item=902") >= len(dropped) and "metric=accuracy" in result.stderr
