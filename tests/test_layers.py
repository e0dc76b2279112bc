"""The library's layers import one way (pyproject's import-linter contract, run by `make lint`):
calls <- data <- judges|stats <- loops <- reports <- experiments <- tools|testing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "pipeline", tree / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_library_keeps_its_layers(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def _with_import(tmp_path: Path, module: str, imported: str) -> subprocess.CompletedProcess[str]:
    tree = _copy(tmp_path)
    path = tree / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\nimport {imported}  # noqa\n")
    return _lint(tree)


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("pipeline.llm.session", "pipeline.judges.rubric.settings"),  # the engine naming a design
        ("pipeline.judges.rubric.judge", "pipeline.stats.correlation"),  # judges and stats are siblings
        ("pipeline.stats.calibration", "pipeline.judges.likert"),
        ("pipeline.reports.pages", "pipeline.testing.fake_ollama"),  # the library running on a fake
        ("pipeline.tools.status.command", "pipeline.testing.judge_responder"),
    ],
)
def test_an_import_against_the_layers_breaks_the_contract(tmp_path: Path, module: str, imported: str) -> None:
    result = _with_import(tmp_path, module, imported)
    assert result.returncode != 0
    assert f"{module} -> {imported}" in result.stdout
