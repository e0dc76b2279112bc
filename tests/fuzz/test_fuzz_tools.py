"""Fuzzing the commands' own readers of shared files (issue 28, the third round): dvc.lock as
`judgeloop check` and the recordings store read it, dvc.yaml as the connection probe reads it, a
preset file (`exp --preset`), params.yaml as `variant` and the recordings store read it, the runs'
summaries (.judgeloop/runs/*.json, read by `cache` and `audit`), and a design's metrics.json as the
report index reads it. See tests/fuzz/support.py for the property and the example counts."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import orjson
from hypothesis import given

from pipeline.experiments.registry import load_design
from pipeline.llm.recordings.store import configured_store, pinned_folders
from pipeline.reports.plots import plot_svg, read_rows
from pipeline.tools.check import read_lock
from pipeline.tools.dvc_run import preset_args
from pipeline.tools.inventory import read_runs
from pipeline.tools.preflight import llm_stages
from pipeline.tools.report_index import Entry, entry
from pipeline.tools.variant import write_variant_params
from tests.fuzz.support import ROOT, clear_or_correct, committed, fuzz, inputs, only_inside

LOCK = committed("dvc.lock")
PARAMS = committed("params.yaml")
SUMMARY = orjson.dumps(
    {
        "hits": 1,
        "keys": {"jl2:" + "0" * 32: "hit", "jl2:" + "1" * 32: "miss"},
        "mode": "auto",
        "model_calls": 1,
        "replay_misses": 0,
        "stage": "judge",
    }
)


@fuzz
@given(data=inputs(LOCK))
def test_dvc_lock_as_check_reads_it(sandbox: Path, data: bytes) -> None:
    (sandbox / "dvc.lock").write_bytes(data)
    clear_or_correct(lambda: read_lock(sandbox))


@fuzz
@given(data=inputs(LOCK))
def test_dvc_lock_as_the_recordings_store_reads_it(sandbox: Path, data: bytes) -> None:
    (sandbox / "dvc.lock").write_bytes(data)
    (sandbox / "recordings").mkdir(exist_ok=True)
    found = clear_or_correct(lambda: pinned_folders(sandbox, sandbox / "recordings"))
    assert not isinstance(found, dict) or all(p.parent == (sandbox / "recordings").resolve() for p in found)


@fuzz
@given(data=inputs(committed("dvc.yaml")))
def test_dvc_yaml_as_the_connection_probe_reads_it(sandbox: Path, data: bytes) -> None:
    (sandbox / "dvc.yaml").write_bytes(data)
    found = clear_or_correct(lambda: llm_stages(sandbox))
    assert not isinstance(found, set) or all(isinstance(name, str) for name in found)


@fuzz
@given(data=inputs(committed("presets/real-model.yaml")))
def test_a_preset_file(sandbox: Path, data: bytes) -> None:
    (sandbox / "preset.yaml").write_bytes(data)
    clear_or_correct(lambda: preset_args(sandbox / "preset.yaml"))


@fuzz
@given(data=inputs(PARAMS))
def test_params_yaml_as_variant_and_the_recordings_store_read_it(sandbox: Path, data: bytes) -> None:
    project = sandbox / "variant"
    shutil.rmtree(project, ignore_errors=True)
    (project / "out").mkdir(parents=True)
    shutil.copytree(ROOT / "data" / "demo", project / "data" / "demo")
    (project / "params.yaml").write_bytes(data)
    clear_or_correct(lambda: configured_store(project))
    with contextlib.chdir(project):  # variant reads params.yaml where it runs
        clear_or_correct(lambda: write_variant_params(project / "out", load_design("paper"), ()))
    only_inside(sandbox.parent, sandbox)


@fuzz
@given(data=inputs(SUMMARY))
def test_a_run_summary(sandbox: Path, data: bytes) -> None:
    runs = sandbox / ".judgeloop" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "judge.json").write_bytes(data)
    params = SimpleNamespace(cache=SimpleNamespace(dir=str(sandbox / ".judgeloop" / "cache")))
    clear_or_correct(lambda: read_runs(params))  # type: ignore[arg-type]


@fuzz
@given(data=inputs(committed("outputs/paper/metrics.json")))
def test_a_design_s_metrics_as_the_report_index_reads_them(sandbox: Path, data: bytes) -> None:
    if not (sandbox / "params.yaml").exists():
        (sandbox / "params.yaml").write_bytes(PARAMS)
    metrics = sandbox / "outputs" / "paper" / "metrics.json"
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_bytes(data)
    found = clear_or_correct(lambda: entry(load_design("paper"), sandbox / "outputs" / "index.html"))
    assert not isinstance(found, Entry) or found.headline or found.problem


def test_the_seeds_are_read_as_they_are(sandbox: Path) -> None:
    """The seeds are files each reader accepts (else the fuzzing would stop at its first check)."""
    (sandbox / "dvc.lock").write_bytes(LOCK)
    assert read_lock(sandbox)
    runs = sandbox / ".judgeloop" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "judge.json").write_bytes(SUMMARY)
    params = SimpleNamespace(cache=SimpleNamespace(dir=str(sandbox / ".judgeloop" / "cache")))
    assert read_runs(params)["judge"].hits == 1  # type: ignore[arg-type]
    assert preset_args(ROOT / "presets" / "real-model.yaml")
    (sandbox / "dvc.yaml").write_bytes(committed("dvc.yaml"))
    assert llm_stages(sandbox)
    (sandbox / "params.yaml").write_bytes(PARAMS)
    metrics = sandbox / "outputs" / "paper" / "metrics.json"
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_bytes(committed("outputs/paper/metrics.json"))
    found = entry(load_design("paper"), sandbox / "outputs" / "index.html")
    assert found.headline and found.problem is None, found.problem


@fuzz
@given(
    data=inputs(
        committed("outputs/paper/plots/figure2.csv"), committed("outputs/paper/plots/scores_by_iteration.csv")
    ),
)
def test_a_plot_s_rows_as_the_report_draws_them(sandbox: Path, data: bytes) -> None:
    """The figures of the report index and the report pages: a DVC plot's CSV (an output anyone can
    edit), read and drawn as each template draws it."""
    path = sandbox / "plot.csv"
    path.write_bytes(data)
    for template, x, y in (
        ("bar_horizontal", "mean", "metric"),
        ("scatter", "iteration", "score"),
        (None, "x", "y"),
    ):
        clear_or_correct(lambda: plot_svg(read_rows(path), x=x, y=y, title="t", template=template))  # noqa: B023
