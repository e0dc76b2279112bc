"""`judgeloop compare`: two runs (commits, experiments, the workspace) side by side, each design's
headline numbers with the change, in 100 columns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.experiments.registry import designs
from pipeline.tools.cli import main
from pipeline.tools.compare import _by_rev, design_table
from tests.conftest import ROOT
from tests.test_experiments import _commit, _repo, _run


def test_the_committed_run_against_the_workspace_fits_100_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["compare", "HEAD", "workspace", "--all"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "HEAD → workspace"
    assert max(len(line) for line in lines) <= 100
    for design in designs():  # every design's headline, from the registry
        assert any(line.startswith(f"{design.name}: {design.title}") for line in lines), design.name
    assert re.search(r"^  coherence after \(mean 1-5\) +4\.6667 +4\.6667 +=$", result.output, re.M)
    for default in (
        [],
        ["HEAD"],
    ):  # no run: the last commit against the workspace; one: it against the workspace
        assert CliRunner().invoke(main, ["compare", *default, "--all"]).output == result.output
    changed = CliRunner().invoke(main, ["compare", "HEAD", "workspace"]).output
    assert "coherence after" not in changed and "the same; --all shows them)" in changed


def test_an_unknown_run_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["compare", "no-such-run"])
    assert result.exit_code != 0 and "no-such-run" in result.output


WRITE_METRICS = """\
import json, pathlib, yaml
seed = yaml.safe_load(open("params.yaml"))["rag"]["seed"]
path = pathlib.Path("outputs/rag/metrics.json")
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps({"rows": 8, "scored": 8 - seed, "overall": {"overall": {"mean": 0.25 * seed}}}))
"""
STAGE = """\
stages:
  rag_aggregate:
    cmd: python write.py
    deps: [write.py]
    params: [rag.seed]
    metrics:
      - outputs/rag/metrics.json:
          cache: false
"""


@pytest.mark.slow
def test_an_experiment_against_its_baseline_by_name(tmp_path: Path) -> None:
    params = (ROOT / "params.yaml").read_text(encoding="utf-8")
    repo = _repo(tmp_path / "repo", STAGE, {"params.yaml": params, "write.py": WRITE_METRICS})
    _run([sys.executable, "-m", "dvc", "repro"], repo)
    _commit(repo)
    ran = _run([sys.executable, "-m", "dvc", "exp", "run", "-S", "rag.seed=2"], repo)
    name = re.search(r"Ran experiment\(s\): (\S+)", ran.stdout)
    assert name, ran.stdout
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", "compare", "HEAD", name.group(1)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"HEAD → {name.group(1)}" in out
    assert "params that differ:\n  rag.seed: 0 → 2\n" in out
    assert re.search(r"^  scored +8 +6 +-2$", out, re.M), out
    assert re.search(r"^  overall mean \(0-1\) +0 +0\.5 +\+0\.5$", out, re.M), out
    assert "paper:" not in out  # no run has the paper's metrics: the design is left out
    assert json.loads((repo / "outputs/rag/metrics.json").read_text())["scored"] == 6


def test_the_workspace_against_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked for no revision, DVC names the workspace "" in its answer: still the workspace."""
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["compare", "workspace", "workspace"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("workspace → workspace\nparams: the same\n")


def test_a_metrics_file_of_another_shape_is_named_in_its_table() -> None:
    """A run's metrics file someone edited (the numbers not where the design writes them): a line
    naming the file and the run, the other run's numbers still shown; never a traceback."""
    paper = next(d for d in designs() if d.name == "paper")
    path = "outputs/paper/metrics.json"
    good = json.loads((ROOT / path).read_text())
    edited = {path: {**good, "figure2": 5}}
    lines = design_table(paper, path, [edited, {path: good}], ["HEAD", "workspace"])
    assert lines[1].startswith(f"  ({path} in HEAD is not a metrics file of the paper design (TypeError:")
    assert any(line.startswith("  coherence after (mean 1-5)") and "4.6667" in line for line in lines)
    empty = {"HEAD": {"data": {"params.yaml": {"data": None}}}}
    assert _by_rev(empty, ["HEAD"]) == {"HEAD": {"params.yaml": {}}}
    assert _by_rev({"HEAD": {"data": {path: {"data": [1, 2]}}}}, ["HEAD"]) == {"HEAD": {path: {}}}
