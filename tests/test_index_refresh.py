"""After `judgeloop repro STAGE...` the index is written again, naming each design DVC finds out of
date (pipeline.tools.index_refresh, pipeline.tools.dvc_run.refresh_index): DVC is not asked about
the stages the run has just brought up to date (issue 31: a `dvc status` of every stage after
every run), and the index names exactly the designs a `dvc status` of every stage names. Real DVC
in a temporary git project; the designs are this test's."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.tools import design_targets, dvc_run, index_refresh, preflight, report_index, warm_stages

pytestmark = pytest.mark.skipif(importlib.util.find_spec("dvc") is None, reason="needs DVC")

# p1 -> p2 (design one), p1 -> r1 (design three: it shares p1 with one), q1 (design two), and a
# stage of no design that reads them all (as the report index does).
DVC_YAML = """\
stages:
  p1:
    cmd: {python} -c "open('p1.txt', 'w').write(open('in1.txt').read())"
    deps: [in1.txt]
    outs: [{{p1.txt: {{cache: false}}}}]
  p2:
    cmd: {python} -c "open('p2.txt', 'w').write(open('p1.txt').read() + '2')"
    deps: [p1.txt]
    outs: [{{p2.txt: {{cache: false}}}}]
  q1:
    cmd: {python} -c "open('q1.txt', 'w').write(open('in2.txt').read())"
    deps: [in2.txt]
    outs: [{{q1.txt: {{cache: false}}}}]
  r1:
    cmd: {python} -c "open('r1.txt', 'w').write(open('p1.txt').read() + 'r')"
    deps: [p1.txt]
    outs: [{{r1.txt: {{cache: false}}}}]
  every:
    cmd: {python} -c "open('every.txt', 'w').write('all')"
    deps: [p2.txt, q1.txt, r1.txt]
    outs: [{{every.txt: {{cache: false}}}}]
"""
DESIGNS = {"one": ["p1", "p2"], "two": ["q1"], "three": ["r1"]}
PLANNED = {"p2": {"p1", "p2"}, "r1": {"p1", "r1"}, "q1": {"q1"}}  # what `dvc repro STAGE` runs


class _Design:
    def __init__(self, name: str, stages: list[str]) -> None:
        self.name = name
        self.stages = [type("S", (), {"name": stage})() for stage in stages]


def _dvc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "dvc", *args], check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The project, run once and committed; what `judgeloop repro` then asks DVC's stages, and the
    designs it writes the index with, recorded."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUDGELOOP_CACHE_MODE", "")  # put back after: --replay sets it
    Path("dvc.yaml").write_text(DVC_YAML.format(python=sys.executable))
    Path("in1.txt").write_text("a")
    Path("in2.txt").write_text("b")
    subprocess.run(["git", "init", "-q"], check=True)
    _dvc("init", "-q")
    _dvc("repro", "-q")
    seen: dict[str, Any] = {"asked": [], "stale": None}
    designs = [_Design(name, stages) for name, stages in DESIGNS.items()]
    monkeypatch.setattr(index_refresh, "designs", lambda: designs)
    monkeypatch.setattr(design_targets, "designs", lambda: designs)
    monkeypatch.setattr(preflight, "check_servers", lambda targets: None)  # no server to try
    monkeypatch.setattr(warm_stages, "warm_stages", contextlib.nullcontext)  # no stage of judgeloop's

    def write_index(stale: Mapping[str, str] | None = None) -> Path:
        seen["stale"] = dict(stale or {})
        return Path("outputs/index.html")

    monkeypatch.setattr(report_index, "write_index", write_index)
    from dvc.stage import Stage

    status = Stage.status

    def asked(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["asked"].append(self.addressing)
        return status(self, *args, **kwargs)

    monkeypatch.setattr(Stage, "status", asked)
    return seen


def _stale_by_full_status() -> dict[str, str]:
    """The designs a `dvc status` of every stage names: what the refresh gave before."""
    from dvc.repo import Repo

    with Repo(".") as repo:
        changed = {name.rpartition(":")[2] for name in repo.status()}
    return {
        name: index_refresh.refresh_command(name)
        for name, stages in DESIGNS.items()
        if any(stage in changed for stage in stages)
    }


def _repro(*args: str) -> None:
    result = CliRunner().invoke(dvc_run.repro, list(args))
    assert result.exit_code == 0, result.output


def _edit(*names: str) -> None:
    for name in names:
        Path(name).write_text(Path(name).read_text() + "+")


@pytest.mark.parametrize(
    ("edited", "args", "planned", "stale"),
    [
        (["in1.txt"], ["p2"], PLANNED["p2"], {"three"}),  # r1 out of date: p1, which it reads, ran
        (["in1.txt", "in2.txt"], ["r1"], PLANNED["r1"], {"one", "two"}),
        (["in2.txt"], ["q1", "p2"], PLANNED["q1"] | PLANNED["p2"], set()),
        (["in1.txt"], ["--replay", "--design", "one"], PLANNED["p2"], {"three"}),  # forced
    ],
)
def test_the_stages_just_run_are_not_asked_and_the_index_is_what_a_full_status_gives(
    project: dict[str, Any], edited: list[str], args: list[str], planned: set[str], stale: set[str]
) -> None:
    _edit(*edited)
    _repro(*args)
    asked_after_run = set(project["asked"])
    assert project["stale"] == _stale_by_full_status()
    assert set(project["stale"]) == stale
    assert asked_after_run and not asked_after_run & planned  # (before: every stage asked)
    assert "every" not in asked_after_run  # a stage of no design says nothing of the designs


@pytest.mark.parametrize("option", ["--dry", "--single-item"])
def test_with_a_dvc_option_every_design_stage_may_be_asked(project: dict[str, Any], option: str) -> None:
    """An option may change what DVC runs (--dry runs nothing): nothing is taken as known, and the
    index still names what a full status does."""
    _edit("in1.txt")
    _repro(option, "p2")
    assert project["stale"] == _stale_by_full_status()
    assert "p1" in project["asked"]


def test_the_refresh_parses_no_yaml_the_run_read_as_it_is_now(
    project: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh runs in the run's environment (pipeline.tools.dvc_lockfile): DVC's index is built
    again from the dvc.yaml and dvc.lock the run read, not parsed again (a replay writes the same
    lock); before, both were parsed again after every run."""
    import dvc.utils.strictyaml

    parsed: list[str] = []
    load, stale_designs = dvc.utils.strictyaml.load, index_refresh.stale_designs

    def parsing(path: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(Path(path).name)
        return load(path, *args, **kwargs)

    def refreshing(*args: Any, **kwargs: Any) -> dict[str, str]:
        parsed.append("(refresh)")
        return stale_designs(*args, **kwargs)

    monkeypatch.setattr(dvc.utils.strictyaml, "load", parsing)
    monkeypatch.setattr(index_refresh, "stale_designs", refreshing)
    _repro("--replay", "--design", "one")
    run, _, refresh = " ".join(parsed).partition("(refresh)")
    assert "dvc.yaml" in run and "dvc.lock" in run and refresh.split() == []
    assert project["stale"] == _stale_by_full_status() == {}
