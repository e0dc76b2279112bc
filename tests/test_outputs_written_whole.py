"""Every output an aggregate stage writes is written in one step (pipeline.llm.files.atomic_write):
the outputs are `persist: true` in dvc.yaml and tracked in git, so "a failed run keeps the last
good outputs" only holds if a kill mid-write leaves the old file, and a link committed at an
output's name (git keeps links) must be replaced, never written through to a file outside the
project (writers-red)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.experiments.paper import aggregate as paper_aggregate
from pipeline.experiments.paper.params import load_paper_params
from pipeline.experiments.rag import aggregate as rag_aggregate
from pipeline.experiments.rag.params import load_rag_params
from pipeline.experiments.regen import aggregate as regen_aggregate
from pipeline.experiments.regen.params import load_regen_params
from pipeline.experiments.selection import aggregate as selection_aggregate
from pipeline.experiments.selection.params import load_selection_params
from pipeline.experiments.summeval import aggregate as summeval_aggregate
from pipeline.experiments.summeval.params import load_summeval_params
from tests.conftest import ROOT

OUTSIDE = "a file outside the project\n"

DESIGNS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], Callable[[Path], None]]] = {
    # design: (data to copy, recordings, outputs written, run)
    "paper": (
        ("data/demo",),
        ("assess", "judge", "refine"),
        (
            "metrics.json",
            "report.md",
            "report.html",
            "plots/figure2.csv",
            "plots/scores_by_iteration.csv",
            "plots/iterations_per_item.csv",
        ),
        lambda p: paper_aggregate.run(load_paper_params(p)),
    ),
    "rag": (
        ("data/rag-demo",),
        ("rag_judge",),
        ("metrics.json", "report.md", "report.html"),
        lambda p: rag_aggregate.run(load_rag_params(p)),
    ),
    "regen": (
        ("data/rag-demo",),
        ("regen_evaluate", "regen_generate", "regen_regenerate"),
        ("metrics.json", "items.csv", "report.html"),
        lambda p: regen_aggregate.run(load_regen_params(p)),
    ),
    "selection": (
        ("data/selection",),
        ("select_score", "select_pick"),
        ("metrics.json", "report.html"),
        lambda p: selection_aggregate.run(load_selection_params(p)),
    ),
    "summeval": (
        ("data/summeval-demo",),
        ("summeval_judge",),
        ("metrics.json", "plots/scores.csv", "report.html"),
        lambda p: summeval_aggregate.run(load_summeval_params(p)),
    ),
}


def _project(root: Path, design: str) -> None:
    data, recordings, _, _ = DESIGNS[design]
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    for folder in (*data, f"outputs/{design}", *(f"recordings/{s}" for s in recordings)):
        shutil.copytree(ROOT / folder, root / folder)


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_a_link_at_an_output_s_name_is_replaced_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, design: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _project(project, design)
    monkeypatch.chdir(project)
    *_, written, run = DESIGNS[design]
    outside = {}
    for name in written:
        target = tmp_path / f"outside-{name.replace('/', '-')}"
        target.write_text(OUTSIDE)
        output = project / "outputs" / design / name
        output.unlink()
        output.symlink_to(target)
        outside[name] = target
    run(project / "params.yaml")
    for name, target in outside.items():
        output = project / "outputs" / design / name
        assert target.read_text() == OUTSIDE, f"{name} was written through its link"
        assert not output.is_symlink()
        assert output.read_bytes() == (ROOT / "outputs" / design / name).read_bytes()
