"""Run outside judgeloop's environment or outside the project, judgeloop says what is wrong and how
to run it: a stage run by a Python without its dependencies stops before it touches anything, and
DVC (every out is persist) deletes none of its outputs; a command run where there is no params.yaml
says so instead of reading defaults."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.tools.cli import main
from tests.conftest import ROOT


@pytest.mark.slow
def test_a_stage_run_by_a_bare_python_says_so_and_keeps_its_outputs(tmp_path: Path) -> None:
    bare = tmp_path / "bare"  # a Python with nothing installed: what a fresh shell's python is to us
    venv.EnvBuilder(with_pip=False).create(bare)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    outputs = ["outputs/rag/report.html", "outputs/rag/report.md", "outputs/rag/metrics.json"]
    before = {name: (clone / name).read_bytes() for name in outputs}
    env = {**os.environ, "PATH": f"{bare / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", "--force", "--single-item", "rag_aggregate"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "one of judgeloop's dependencies: it is not judgeloop's environment" in done.stderr
    assert "Fix: run it through make (`make repro`) or `./judgeloop repro`" in done.stderr
    assert "Traceback" not in done.stderr
    assert {name: (clone / name).read_bytes() for name in outputs} == before


@pytest.mark.parametrize("command", [["audit"], ["status"], ["cache", "stats"], ["report"], ["compare"]])
def test_a_command_run_where_there_is_no_params_yaml_says_so(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 1, result.output
    assert f"no params.yaml: in {tmp_path} there is no file params.yaml" in result.output
    assert "Fix: cd to the project's folder" in result.output


def test_help_works_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for command in (["--help"], ["audit", "--help"], ["compare", "--help"], ["exp", "--help"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0 and "Examples:" in result.output, command
