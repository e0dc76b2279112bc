"""The library's layers import one way (pyproject's import-linter contract, run by `make lint`):
calls <- data <- judges <- loops <- reports <- experiments <- tools."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def test_an_engine_module_importing_a_design_breaks_the_contract(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    session = tree / "pipeline" / "llm" / "session.py"
    bad_import = "\nfrom pipeline.judges.rubric.settings import METRICS  # noqa\n"
    session.write_text(session.read_text() + bad_import)
    result = _lint(tree)
    assert result.returncode != 0
    assert "pipeline.llm.session -> pipeline.judges.rubric.settings" in result.stdout
