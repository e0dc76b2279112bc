"""One shape per design: every design writes the same kinds of files in the same places, so the
cross-design tools need no special cases:

    outputs/<design>/*.jsonl        each LLM stage's results
    outputs/<design>/metrics.json   its metrics (DVC metrics)
    outputs/<design>/plots/         its plots (DVC plots), if it has any
    outputs/<design>/report.html    its report's page (and beside it what else its report writes)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.experiments.design import RECORDINGS, Design, resolve
from pipeline.experiments.registry import designs
from pipeline.experiments.steps import LLMStep
from pipeline.tools.cli import main
from tests.conftest import ROOT

DESIGNS = designs()


def _paths(design: Design[Any], params: Any) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {"results": [], "outs": [], "metrics": [], "plots": []}
    for stage in design.stages:
        outs = [resolve(out, params) for out in stage.outs]
        if isinstance(stage.load(), LLMStep):
            found["results"].append(outs[0])
        found["outs"] += outs
        found["metrics"] += [resolve(m, params) for m in stage.metrics]
        found["plots"] += [resolve(p.path, params) for p in stage.plots]
    return found


@pytest.mark.parametrize("design", DESIGNS, ids=[d.name for d in DESIGNS])
@pytest.mark.parametrize("where", ["defaults", "params.yaml"])
def test_every_design_writes_its_files_in_the_same_places(design: Design[Any], where: str) -> None:
    params = design.params() if where == "defaults" else design.load_params(ROOT / "params.yaml")
    home = Path("outputs") / design.name
    paths = _paths(design, params)
    everything = [p for kind in paths.values() for p in kind]
    assert all(p.is_relative_to(home) and not p.is_relative_to(RECORDINGS) for p in everything), everything
    assert paths["metrics"] == [home / "metrics.json"]
    assert home / "report.html" in paths["outs"] and design.report is not None
    assert all(p.parent == home / "plots" for p in paths["plots"])
    assert paths["results"] and all(p.parent == home and p.suffix == ".jsonl" for p in paths["results"])


def test_report_writes_every_designs_committed_pages_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("data", "recordings", "outputs"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    pages = {d.name: Path("outputs") / d.name / "report.html" for d in DESIGNS}
    for page in pages.values():
        page.unlink()
    result = CliRunner().invoke(main, ["report"])
    assert result.exit_code == 0, result.output
    for name, page in pages.items():
        assert f"{name}: wrote" in result.stdout
        assert page.read_bytes() == (ROOT / page).read_bytes(), page
