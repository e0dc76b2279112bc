"""An output named in params.yaml (each stage's and design's `out`, `metrics_out`, reports, plot
data) must be a path inside the project: an absolute one, or one that climbs out through `..`, is
refused when params.yaml is read, naming its line and the fix. The stage wrote there before DVC
looked (DVC takes only outs inside the project), so `assess.out: /home/u/.bashrc` was written over
(redteam4). Data read may be anywhere: a corpus on another disk is named by an absolute path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from pipeline.errors import ConfigError
from pipeline.experiments.registry import designs, load_design
from tests.conftest import ROOT

_REPORTS = {"report", "html_report", "report_md", "report_html", "plot_csv", "plots_dir"}


def _is_output(name: str) -> bool:
    return name == "out" or name.endswith("_out") or name in _REPORTS


def _outputs() -> list[tuple[str, str, str]]:
    """(design, section, field) of every output each design's params name."""
    found = set()
    for design in designs():
        for section, info in design.params.model_fields.items():
            kind = info.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                found |= {(design.name, section, name) for name in kind.model_fields if _is_output(name)}
    return sorted(found)


OUTPUTS = _outputs()


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, section: str, field: str, value: str) -> int:
    """The committed params.yaml in `tmp_path` (made the working folder) with `section.field` set to
    `value`; returns the line it is on."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    raw: dict[str, Any] = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw.setdefault(section, {})[field] = value
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    (tmp_path / "params.yaml").write_text(text, encoding="utf-8")
    lines = text.splitlines()
    start = lines.index(f"{section}:")
    return next(n for n in range(start, len(lines)) if lines[n].startswith(f"  {field}:")) + 1


def test_every_design_names_outputs() -> None:
    assert {section for _, section, _ in OUTPUTS} >= {"assess", "judge", "refine", "aggregate", "summeval"}
    assert len(OUTPUTS) >= 20


@pytest.mark.parametrize("value", ["/home/u/.bashrc", "outputs/../../elsewhere.jsonl", ".."])
@pytest.mark.parametrize(("design", "section", "field"), OUTPUTS)
def test_an_output_outside_the_project_is_refused_naming_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, design: str, section: str, field: str, value: str
) -> None:
    line = _project(tmp_path, monkeypatch, section, field, value)
    with pytest.raises(ConfigError) as refused:
        load_design(design).load_params()
    said = str(refused.value)
    assert re.search(rf"params\.yaml:{line}: {section}\.{field}: ", said), said
    assert "outputs stay inside the project. Fix: a path relative to the project's folder" in said
    assert not (tmp_path.parent / "elsewhere.jsonl").exists()


@pytest.mark.parametrize("value", ["outputs/x/../y.jsonl", "./outputs/y.jsonl", "y..jsonl"])
def test_an_output_inside_the_project_is_taken_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    _project(tmp_path, monkeypatch, "assess", "out", value)
    assert load_design("paper").load_params().assess.out == value


def test_data_read_from_outside_the_project_is_still_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = str(ROOT / "data" / "summeval-demo")  # absolute: as a corpus on another disk is named
    _project(tmp_path, monkeypatch, "summeval", "corpus", corpus)
    assert load_design("summeval").load_params().summeval.corpus == corpus


@pytest.mark.parametrize("value", ["/home/u/recordings", "../recordings", "recordings/../../elsewhere"])
@pytest.mark.parametrize("design", ["paper", "summeval"])
def test_the_recordings_folder_outside_the_project_is_refused_naming_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, design: str, value: str
) -> None:
    """cache.recordings is DVC-pinned and committed with the project: every LLM stage writes its
    recording there before DVC looks, so it is an output like the outs."""
    line = _project(tmp_path, monkeypatch, "cache", "recordings", value)
    with pytest.raises(ConfigError) as refused:
        load_design(design).load_params()
    said = str(refused.value)
    assert re.search(rf"params\.yaml:{line}: cache\.recordings: ", said), said
    assert "outputs stay inside the project. Fix: a path relative to the project's folder" in said


@pytest.mark.parametrize("value", ["/mnt/big-disk/judgeloop-cache", "../shared-cache"])
def test_the_local_cache_may_lie_outside_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """cache.dir is the local cache, never committed: a user keeps it on another disk."""
    _project(tmp_path, monkeypatch, "cache", "dir", value)
    assert load_design("paper").load_params().cache.dir == value
