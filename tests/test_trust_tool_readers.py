"""The commands' own readers of shared files, bounded like every other reader (issue 28, found by
tests/fuzz/test_fuzz_tools.py and by hand): each answers a clear error, or reads past what it cannot
use, and never a traceback or a hang."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from pipeline.experiments.params import load_params
from pipeline.experiments.registry import load_design
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.store import configured_store, pinned_folders
from pipeline.reports.plots import plot_svg, read_rows
from pipeline.tools.check import read_lock
from pipeline.tools.dvc_run import preset_args
from pipeline.tools.inventory import read_runs
from pipeline.tools.preflight import llm_stages
from pipeline.tools.report_index import entry
from pipeline.tools.variant import write_variant_params
from tests.conftest import ROOT

# Past libyaml's own nesting limit (1,000): libyaml refused it, check_yaml took that for a syntax
# error left to the caller's loader, and PyYAML's composer then recursed into a RecursionError.
DEEP_YAML = "stages: " + "[" * 5000 + "]" * 5000 + "\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
)
DEEP_JSON = b'{"a":' * 1000 + b"1" + b"}" * 1000


def test_yaml_nested_past_libyaml_s_own_limit_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text(DEEP_YAML)
    (tmp_path / "recordings" / "judge").mkdir(parents=True)
    with pytest.raises(click.ClickException, match="nested more than 64 levels"):
        Pins(tmp_path, tmp_path / "recordings").problem(tmp_path / "recordings" / "judge")
    with pytest.raises(click.ClickException, match="nested more than 64 levels"):
        read_lock(tmp_path)
    (tmp_path / "params.yaml").write_text(DEEP_YAML)
    with pytest.raises(click.ClickException, match=r"params.yaml:1: not valid YAML \(nested more than 64"):
        load_params(tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text(DEEP_YAML)
    assert llm_stages(tmp_path) == set()  # the probe then asks every server: nothing lost


def test_an_alias_bomb_in_a_preset_is_refused_at_once(tmp_path: Path) -> None:
    """It hung `exp --preset` (str() of 10^10 values)."""
    (tmp_path / "preset.yaml").write_text(BOMB)
    with pytest.raises(click.BadParameter, match="an alias bomb"):
        preset_args(tmp_path / "preset.yaml")


def test_dvc_lock_or_params_not_utf8_are_read_as_unreadable_by_the_recordings_store(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_bytes(b"stages: \x80\n")
    (tmp_path / "params.yaml").write_bytes(b"cache: \x80\n")
    assert pinned_folders(tmp_path, tmp_path / "recordings") == {}
    assert configured_store(tmp_path) == "git"
    (tmp_path / "dvc.lock").write_text(
        'stages:\n  s:\n    outs:\n    - path: "recordings/a\\0b"\n      md5: x.dir\n'
    )
    assert pinned_folders(tmp_path, tmp_path / "recordings") == {}


def test_variant_refuses_a_params_file_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    shutil.copytree(ROOT / "data" / "demo", tmp_path / "data" / "demo")
    for bad in (b"llm: \x80\n", DEEP_YAML.encode()):
        (tmp_path / "params.yaml").write_bytes(bad)
        with contextlib.chdir(tmp_path), pytest.raises(click.ClickException, match=r"params\.yaml"):
            write_variant_params(tmp_path / "out", load_design("paper"), ())


@pytest.mark.parametrize(
    "summary",
    [
        DEEP_JSON,
        b'{"stage": "judge", "mode": "auto", "hits": "1", "model_calls": 0, "replay_misses": 0, "keys": 1}',
    ],
)
def test_a_run_summary_nested_too_deep_or_mistyped_is_refused_clearly(tmp_path: Path, summary: bytes) -> None:
    runs = tmp_path / ".judgeloop" / "runs"
    runs.mkdir(parents=True)
    (runs / "judge.json").write_bytes(summary)
    params = SimpleNamespace(cache=SimpleNamespace(dir=str(tmp_path / ".judgeloop" / "cache")))
    with pytest.raises(click.ClickException, match=r"judge.json: not a run summary.*Fix: delete it"):
        read_runs(params)  # type: ignore[arg-type]


@pytest.mark.parametrize("metrics", [DEEP_JSON, b"[1, 2]", b'{"figure2": 5}'])
def test_the_report_index_names_a_metrics_file_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metrics: bytes
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_bytes((ROOT / "params.yaml").read_bytes())
    path = tmp_path / "outputs" / "paper" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(metrics)
    found = entry(load_design("paper"), tmp_path / "outputs" / "index.html")
    assert found.problem is not None and "metrics.json cannot be read" in found.problem


def test_a_plot_s_csv_that_is_not_utf8_or_holds_huge_values_is_drawn_or_refused_clearly(
    tmp_path: Path,
) -> None:
    """An output anyone can edit, drawn on every report: it raised UnicodeDecodeError, a TypeError on
    a short row, and OverflowError for a mean of 1e308."""
    path = tmp_path / "figure2.csv"
    path.write_bytes(b"bar,metric,phase,mean,sd,n\n\x80,a,before,1,0,3\n")
    with pytest.raises(click.ClickException, match=r"figure2.csv: not a plot's CSV"):
        read_rows(path)
    path.write_text("bar,metric,phase,mean,sd,n\na,a,before,1e308,1e308,3\nb\n")
    for template, x, y in (
        ("bar_horizontal", "mean", "metric"),
        ("scatter", "mean", "sd"),
        (None, "mean", "n"),
    ):
        assert plot_svg(read_rows(path), x=x, y=y, title="t", template=template).startswith("<svg")


def test_a_run_summary_longer_than_a_line_is_read_and_one_past_its_own_cap_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run summary lists every key of its stage's run (22 MB for the judge stage at a million
    calls): past a recording line's bound, it is still read; past MAX_SUMMARY_BYTES it is refused."""
    import json

    from pipeline.llm.bounds import MAX_LINE_BYTES
    from pipeline.tools import inventory

    runs = tmp_path / ".judgeloop" / "runs"
    runs.mkdir(parents=True)
    keys = {f"{i:064x}": "hit" for i in range(MAX_LINE_BYTES // 60 + 1)}
    summary = {"stage": "judge", "mode": "replay", "hits": len(keys), "model_calls": 0, "replay_misses": 0}
    (runs / "judge.json").write_text(json.dumps({**summary, "keys": keys}))
    assert (runs / "judge.json").stat().st_size > MAX_LINE_BYTES
    params = SimpleNamespace(cache=SimpleNamespace(dir=str(tmp_path / ".judgeloop" / "cache")))
    assert len(read_runs(params)["judge"].keys) == len(keys)  # type: ignore[arg-type]
    monkeypatch.setattr(inventory, "MAX_SUMMARY_BYTES", MAX_LINE_BYTES)
    with pytest.raises(click.ClickException, match=r"judge.json: not a run summary.*far more than"):
        read_runs(params)  # type: ignore[arg-type]
