"""The run names `judgeloop diff` reads (pipeline.tools.diff.runs.run_folder), in a real git + DVC
project (exp-list-mend): a name longer than a file name can be is no run, said; a name that is both
a folder here and a git revision is refused with the fix for each (the folder was read silently)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_diff import record
from tests.test_experiments import _commit, _repo, _run


def _diff(repo: Path, *runs: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", "diff", *runs, "--design", "paper", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose workspace and HEAD are one recorded run, its copy in the folder `base`, and
    a branch `base` (HEAD)."""
    run = record(tmp_path_factory.mktemp("run") / "run", "judge-a")
    repo = _repo(tmp_path_factory.mktemp("diff-names") / "repo", "stages: {}\n", {})
    for folder in (repo, repo / "base"):
        folder.mkdir(exist_ok=True)
        shutil.copy(run / "params.yaml", folder / "params.yaml")
        for name in ("outputs", "recordings"):
            shutil.copytree(run / name, folder / name)
    _commit(repo)
    _run(["git", "branch", "base"], repo)
    return repo


@pytest.mark.slow
@pytest.mark.parametrize("name", ["a" * 256, "é" * 128, "base/" + "b" * 300])
def test_a_name_longer_than_a_file_name_is_no_run(project: Path, name: str) -> None:
    """Past 255 bytes, looking for a folder of that name raised OSError: a traceback."""
    shown = _diff(project, name, "workspace")
    assert shown.returncode == 1 and "Traceback" not in shown.stderr, shown.stderr
    assert "no run named" in shown.stderr and "Fix:" in shown.stderr, shown.stderr


@pytest.mark.slow
def test_a_folder_and_a_revision_of_one_name_are_told_apart(project: Path) -> None:
    """`base` is the folder ./base and the branch base: the folder was read, and nothing said so."""
    both = _diff(project, "base", "workspace")
    assert both.returncode == 1 and "Traceback" not in both.stderr, both.stderr
    assert "'base' names two runs" in both.stderr and "Fix: ./base for the folder" in both.stderr
    commit = _run(["git", "rev-parse", "base"], project).stdout.strip()
    assert f"or the commit {commit[:12]} for the revision" in both.stderr, both.stderr
    for runs in (("./base", "workspace"), (commit, "workspace"), (str(project / "base"), "HEAD")):
        done = _diff(project, *runs)
        assert done.returncode == 0, (runs, done.stderr)
        assert '"changes": []' in done.stdout, runs  # one run, three ways
