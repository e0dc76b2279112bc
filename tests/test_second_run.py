"""The committed second run, runs/paper-sampled, is what `make second-run` writes today: the README
says `make second-run ARGS=--replay` replays it byte for byte. Its outputs and recordings replay
from its own recordings; its params.yaml is the workspace's with the Makefile's -S values, so a
param added to params.yaml since it was recorded leaves it stale (record it again by replay)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pipeline.experiments.registry import load_design
from pipeline.tools.variant import write_variant_params
from tests.conftest import ROOT

SECOND_RUN = Path("runs/paper-sampled")


def _makefile_settings() -> tuple[str, ...]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^second-run:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has no second-run target"
    return tuple(re.findall(r"-S (\S+)", recipe.group(1)))


def test_the_committed_second_run_has_the_params_make_second_run_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _makefile_settings()
    assert "judge.samples=3" in settings
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / SECOND_RUN).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    write_variant_params(SECOND_RUN, load_design("paper"), settings)
    written = (tmp_path / SECOND_RUN / "params.yaml").read_text(encoding="utf-8")
    assert written == (ROOT / SECOND_RUN / "params.yaml").read_text(encoding="utf-8"), (
        f"{SECOND_RUN}/params.yaml is not what `make second-run` writes now: "
        "run `make second-run ARGS=--replay` (no model) and commit it"
    )
