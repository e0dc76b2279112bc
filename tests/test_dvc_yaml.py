"""dvc.yaml is generated from the designs' stage specs (`judgeloop dvc-yaml`): the committed file
must be the generated one, so that it cannot drift from the code that runs the stages."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml

from pipeline.errors import ConfigError
from pipeline.tools.dvc_yaml import render
from tests.conftest import ROOT


def test_the_committed_dvc_yaml_is_the_generated_one() -> None:
    committed = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    generated = render(ROOT)
    diff = "".join(
        difflib.unified_diff(committed.splitlines(True), generated.splitlines(True), "dvc.yaml", "generated")
    )
    assert committed == generated, f"dvc.yaml differs from the stage specs; run `make dvc-yaml`:\n{diff}"


def test_a_path_param_missing_from_params_yaml_is_named_with_its_default(tmp_path: Path) -> None:
    # DVC reads ${section.key} from params.yaml alone, not from the code's defaults.
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    del params["assess"]["out"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"assess\.out \(its default: outputs/paper/assessments\.jsonl\)"):
        render(tmp_path)


def test_the_committed_experiments_are_up_to_date() -> None:
    # A fresh clone's `make repro` runs nothing: every change to a stage's code, params or data is
    # committed with its relock (`make replay`, no model calls) and the outputs it gives.
    repo = pytest.importorskip("dvc.repo")
    with repo.Repo(str(ROOT)) as dvc:
        changed = dvc.status()
    assert not changed, f"dvc.lock is stale for {sorted(changed)}; relock with `make replay`: {changed}"
