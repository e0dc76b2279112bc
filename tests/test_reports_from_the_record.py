"""A report names the model its recorded calls hold, never params.yaml's (issue 32, item 1): two
fake backends of different names, the paper's design run on one and the RAG design on the other,
then `judgeloop report` (with params.yaml naming a third model): each report names its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.data.recorded_models import NONE_RECORDED, count_models, model_label
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_one_model_is_named_alone_and_several_with_their_calls() -> None:
    assert model_label([]) == NONE_RECORDED
    one = count_models([("fake", "a", "d1")] * 3)
    assert model_label(one) == "fake:a"
    mixed = count_models([("fake", "a", "d1")] * 3 + [("ollama", "b:27b", "d2")] * 5)
    assert model_label(mixed) == "several models: ollama:b:27b (5 calls), fake:a (3 calls)"
    versions = count_models([("fake", "a", "d1"), ("fake", "a", "d2"), ("fake", "a", "d2")])
    assert model_label(versions) == "fake:a (2 versions: d2 2, d1 1)"


def _run(args: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGELOOP_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _set_model(project: Path, model: str) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["llm"]["model"] = model
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("pipeline", "stages", "data"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["llm"]["backend"] = "fake"
    params["data"]["limit"] = 2
    params["refine"]["max_iterations"] = 1
    params["rag"]["limit"] = 3
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return tmp_path


def test_each_report_names_the_model_its_recordings_hold(project: Path) -> None:
    python = [sys.executable, "-m"]
    _set_model(project, "judge-a")
    for stage in ("assess", "judge", "refine", "aggregate"):
        _run([*python, "stages", "paper", stage], project)
    _set_model(project, "judge-b")
    for stage in ("rag_judge", "rag_aggregate"):
        _run([*python, "stages", "rag", stage], project)
    _set_model(project, "judge-c")  # params.yaml now names a model that made no call at all
    _run([*python, "pipeline.tools.cli", "report", "paper", "rag"], project)

    paper = (project / "outputs/paper/report.md").read_text(encoding="utf-8")
    rag = (project / "outputs/rag/report.md").read_text(encoding="utf-8")
    assert "`fake:judge-a`" in paper and "judge-b" not in paper and "judge-c" not in paper
    assert "`fake:judge-b`" in rag and "judge-a" not in rag and "judge-c" not in rag
    assert "judgeloop: fake:judge-a" in (project / "outputs/paper/report.html").read_text(encoding="utf-8")
    assert "fake:judge-b" in (project / "outputs/rag/report.html").read_text(encoding="utf-8")
    index = (project / "outputs/index.html").read_text(encoding="utf-8")
    assert "paper: fake:judge-a" in index and "rag: fake:judge-b" in index and "judge-c" not in index


def test_the_index_names_the_stale_designs_and_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.reports.frame import INDEX
    from pipeline.tools.report_index import render_index

    monkeypatch.chdir(ROOT)
    page = render_index(INDEX, {"rag": "./judgeloop repro --design rag"})
    assert page.count("Out of date") == 1 and "<code>./judgeloop repro --design rag</code>" in page
    assert "Out of date" not in render_index(INDEX)
