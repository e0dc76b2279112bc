"""`judgeloop diff` on runs DVC knows: a commit against a DVC experiment by its name, and against
the workspace the experiment left, in a temporary git repository run by real `dvc repro` and
`dvc exp run`. The stage puts one of two recorded runs (the paper's design, judged by two fake
models) in place, so the runs differ in their judge's model alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.test_diff import record
from tests.test_experiments import _commit, _repo, _run

pytestmark = pytest.mark.slow

PICK = """\
import pathlib, shutil, yaml
which = yaml.safe_load(open("params.yaml"))["pick"]["run"]
for name in ("outputs", "recordings"):
    shutil.rmtree(name, ignore_errors=True)
    shutil.copytree(pathlib.Path("runs") / which / name, name)
"""
STAGE = """\
stages:
  pick:
    cmd: python pick.py
    deps: [pick.py, runs]
    params: [pick.run]
    outs:
      - outputs:
          cache: false
      - recordings:
          cache: false
"""


def _diff(repo: Path, *runs: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", "diff", *runs, "--design", "paper", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    found: dict[str, Any] = json.loads(shown.stdout)
    return found


def test_a_commit_against_an_experiment_by_name_and_the_workspace(tmp_path: Path) -> None:
    a = record(tmp_path / "a", "judge-a")
    b = record(tmp_path / "b", "judge-b")
    params = (a / "params.yaml").read_text(encoding="utf-8") + "pick:\n  run: a\n"
    repo = _repo(tmp_path / "repo", STAGE, {"params.yaml": params, "pick.py": PICK})
    for run in (a, b):
        for name in ("outputs", "recordings"):
            shutil.copytree(run / name, repo / "runs" / run.name / name)
    _run([sys.executable, "-m", "dvc", "repro"], repo)
    _commit(repo)
    ran = _run([sys.executable, "-m", "dvc", "exp", "run", "-S", "pick.run=b"], repo)
    named = re.search(r"Ran experiment\(s\): (\S+)", ran.stdout)
    assert named, ran.stdout

    by_folder = _diff(repo, str(a), str(b))
    assert by_folder["changes"] and {c["cause"] for c in by_folder["changes"]} == {"model"}
    for runs in (("HEAD", named.group(1)), ("HEAD", "workspace"), ()):
        found = _diff(repo, *runs)
        assert found["metrics"] == by_folder["metrics"], runs
        assert found["changes"] == by_folder["changes"], runs
