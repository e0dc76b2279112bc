"""dvc.yaml is generated from the designs' stage specs (`judgeloop dvc-yaml`): the committed file
must be the generated one, so that it cannot drift from the code that runs the stages."""

from __future__ import annotations

import difflib

from pipeline.tools.dvc_yaml import render
from tests.conftest import ROOT


def test_the_committed_dvc_yaml_is_the_generated_one() -> None:
    committed = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    generated = render(ROOT)
    diff = "".join(
        difflib.unified_diff(committed.splitlines(True), generated.splitlines(True), "dvc.yaml", "generated")
    )
    assert committed == generated, f"dvc.yaml differs from the stage specs; run `make dvc-yaml`:\n{diff}"
