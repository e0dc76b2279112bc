"""`.judgeloop` committed to git as a link, under a plain `dvc repro` (not `judgeloop repro`, which
refuses it before DVC starts: tests/test_local_state_committed.py): each `python -m stages` refuses
it too (stages/runner.py), before it writes anything there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tools.local_state import FIX
from tests.test_pipeline_dvc import GIT_IDENTITY
from tests.test_pipeline_dvc import project as project  # the fixture: a temporary git repo

pytestmark = pytest.mark.slow


def test_a_plain_dvc_repro_refuses_a_committed_local_state_link(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".judgeloop").symlink_to(elsewhere)
    env = {**os.environ, **GIT_IDENTITY, "XDG_RUNTIME_DIR": str(tmp_path)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    subprocess.run(["git", "add", "-f", ".judgeloop"], cwd=project, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "a link"], cwd=project, check=True, env=env)
    result = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", "judge"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "a symbolic link committed to git" in result.stderr and f"Fix: {FIX}" in result.stderr
    assert "failed to reproduce 'assess'" in result.stderr, result.stderr
    assert os.listdir(elsewhere) == []  # nothing of the local state written where the link leads
