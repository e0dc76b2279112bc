"""Fuzzing what `judgeloop compare` and `judgeloop exp list` make of DVC's answer about two runs
(dvc.repo.Repo.metrics.show and params.show, the data behind `dvc exp show`): each run's metrics
files and params.yaml as DVC parsed them, from files anyone can edit and commit, with DVC's own
errors where it could not parse one. The property of tests/fuzz/support.py: the table, or a clear
error; never a traceback.

DVC's answer has this shape (dvc 3): {rev: {"data": {path: {"data": parsed} or {"error": exc}}}},
or {rev: {"error": exc}} for a revision it could not read at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from pipeline.experiments.registry import designs
from pipeline.tools.compare import _by_rev, render
from pipeline.tools.exp_list import changed_params, moved_numbers
from tests.fuzz.support import ROOT, clear_or_correct, committed, fuzz, inputs

NAMES = ("HEAD", "workspace")
PARAMS = committed("params.yaml")
METRICS = {
    path: committed(path)
    for path in (
        "outputs/paper/metrics.json",
        "outputs/rag/metrics.json",
        "outputs/regen/metrics.json",
        "outputs/selection/metrics.json",
        "outputs/summeval/metrics.json",
    )
    if (ROOT / path).is_file()
}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.dates(), st.datetimes()
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=24,
)


class ParseError(Exception):
    """What DVC puts in its answer for a file it could not parse (one of its DvcException kinds)."""


def _parsed(data: bytes, parse: Any) -> dict[str, Any]:
    try:
        return {"data": parse(data)}
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        return {"error": ParseError(str(exc))}


@st.composite
def file_entries(draw: st.DrawFn, seed: bytes, parse: Any) -> dict[str, Any]:
    """One file as DVC answers for it: the committed file edited and parsed, any parsed value, or
    DVC's error."""
    kind = draw(st.sampled_from(["edited", "edited", "value", "error", "as committed"]))
    if kind == "edited":
        return _parsed(draw(inputs(seed)), parse)
    if kind == "value":
        return {"data": draw(values)}
    if kind == "error":
        return {"error": ParseError("cannot parse")}
    return _parsed(seed, parse)


@st.composite
def answers(draw: st.DrawFn, files: dict[str, bytes], parse: Any) -> dict[str, Any]:
    """DVC's answer for both runs: each run's files (some left out), or the run's error."""
    shown: dict[str, Any] = {}
    for name in NAMES:
        kind = draw(st.sampled_from(["files", "files", "files", "error", "error and files", "absent"]))
        if kind == "absent":
            continue
        entry: dict[str, Any] = {}
        if kind != "error":
            chosen = draw(st.lists(st.sampled_from(sorted(files)), unique=True, max_size=len(files)))
            entry["data"] = {path: draw(file_entries(files[path], parse)) for path in chosen}
        if kind != "files":
            entry["error"] = ParseError("cannot read the revision")
        # DVC names the workspace "" when no revision was asked for (compare workspace workspace).
        shown[name if name != "workspace" else draw(st.sampled_from(["workspace", ""]))] = entry
    return shown


def _json(data: bytes) -> Any:
    return json.loads(data)  # as DVC parses a .json metrics file (NaN and Infinity included)


@pytest.fixture(scope="module")
def project(sandbox: Path) -> Path:
    """The workspace's params.yaml, which tells compare where each design's metrics are."""
    (sandbox / "params.yaml").write_bytes(PARAMS)
    return sandbox


@fuzz
@given(
    metrics=answers(METRICS, _json),
    params=answers({"params.yaml": PARAMS}, yaml.safe_load),
    show_all=st.booleans(),
)
def test_dvc_s_answer_about_two_runs(
    project: Path, metrics: dict[str, Any], params: dict[str, Any], show_all: bool
) -> None:
    by_run = clear_or_correct(lambda: (_by_rev(metrics, NAMES), _by_rev(params, NAMES)))
    if not isinstance(by_run, tuple):
        return
    m, p = by_run
    table = clear_or_correct(
        lambda: render(NAMES, [m[n] for n in NAMES], [p[n] for n in NAMES], (), show_all)
    )
    assert not isinstance(table, str) or table.startswith("HEAD → workspace\n")
    clear_or_correct(lambda: changed_params(p["HEAD"], p["workspace"]))
    clear_or_correct(lambda: moved_numbers([m["HEAD"], m["workspace"]], [p["HEAD"], p["workspace"]]))


def test_the_committed_runs_compare_as_they_are(project: Path) -> None:
    """The seed: both runs as committed give every design's headline (else the fuzzing would stop
    at its first check)."""
    metrics = {
        name: {"data": {path: {"data": _json(data)} for path, data in METRICS.items()}} for name in NAMES
    }
    params = {name: {"data": {"params.yaml": {"data": yaml.safe_load(PARAMS)}}} for name in NAMES}
    m, p = _by_rev(metrics, NAMES), _by_rev(params, NAMES)
    table = render(NAMES, [m[n] for n in NAMES], [p[n] for n in NAMES], (), True)
    for design in designs():
        if design.headline is not None:
            assert f"{design.name}: {design.title}" in table
    assert "params: the same" in table
