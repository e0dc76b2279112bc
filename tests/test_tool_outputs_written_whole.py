"""What `judgeloop report` (the index page, `--figures`) and `judgeloop dvc-yaml` write replaces the
file at its name in one step (pipeline.llm.files.atomic_write): outputs/index.html and dvc.yaml are
tracked in git, which keeps links, and a link at such a name must never carry the write to a file
outside the project; nor may a page's links be taken through it (writers-red)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.tools.dvc_yaml import dvc_yaml
from pipeline.tools.figures import figures, write_figures
from pipeline.tools.report_index import write_index
from tests.conftest import ROOT

OUTSIDE = "a file outside the project\n"


def _linked(name: Path, outside: Path) -> None:
    outside.write_text(OUTSIDE)
    name.unlink(missing_ok=True)
    name.symlink_to(outside)


def _copy(project: Path) -> None:
    for name in ("params.yaml", "dvc.yaml", "dvc.lock"):
        shutil.copy(ROOT / name, project / name)
    for folder in ("data", "outputs", "recordings"):
        shutil.copytree(ROOT / folder, project / folder)


def test_the_index_page_replaces_a_link_at_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _copy(project)
    monkeypatch.chdir(project)
    index = Path("outputs/index.html")
    _linked(index, tmp_path / "outside.html")
    write_index(index)
    assert (tmp_path / "outside.html").read_text() == OUTSIDE
    assert not index.is_symlink()
    assert index.read_bytes() == (ROOT / "outputs/index.html").read_bytes()


def test_a_figure_replaces_a_link_at_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    drawn = figures()
    folder = tmp_path / "docs"
    folder.mkdir()
    name = sorted(drawn)[0]
    _linked(folder / name, tmp_path / "outside.svg")
    write_figures(folder)
    assert (tmp_path / "outside.svg").read_text() == OUTSIDE
    assert (folder / name).read_text(encoding="utf-8") == drawn[name]


def test_dvc_yaml_replaces_a_link_at_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    output = tmp_path / "dvc.yaml"
    _linked(output, tmp_path / "outside.yaml")
    result = CliRunner().invoke(dvc_yaml, ["--output", str(output)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "outside.yaml").read_text() == OUTSIDE
    assert not output.is_symlink() and output.read_bytes() == (ROOT / "dvc.yaml").read_bytes()
