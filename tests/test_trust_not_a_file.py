"""params.yaml and the data files read through input_files (labels, catalogs, ratings, RAG rows,
listening requests, SummEval's annotations) where something other than a regular file stands: a
folder, a pipe, a device. Each is refused naming the file and the fix, never a traceback or a wait.

Found by redteam4: params.yaml was looked at (stat) and then read through its path, unbounded, so a
params.yaml that is a link to /dev/zero (a link is what git can hold) read until the memory ran out,
a pipe waited for a writer for good, and a folder gave IsADirectoryError's traceback; the data
files were opened through their path after an is_file() look, so a pipe put in the place after the
look waited for a writer for good, and a folder gave IsADirectoryError's traceback.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, SimpleNamespace

import click
import pytest

from pipeline.data import input_files
from pipeline.errors import ConfigError, InputError
from pipeline.experiments.registry import load_design
from pipeline.llm.bounds import bounded_lines
from pipeline.llm.files import NotARegularFile
from pipeline.llm.recordings.store import configured_store
from pipeline.llm.settings import read_params_file
from pipeline.llm.types import ModelIdentity
from pipeline.reports.plots import read_rows
from pipeline.tools.batch.manifest import MANIFEST_FILE, Manifest, objects
from pipeline.tools.check import read_lock
from pipeline.tools.dvc_run import preset_args
from pipeline.tools.inventory import read_runs
from pipeline.tools.preflight import llm_stages
from pipeline.tools.report_index import entry
from pipeline.tools.variant import write_variant_params
from tests.conftest import ROOT


@contextlib.contextmanager
def _no_wait_for_good(seconds: int = 60) -> Iterator[None]:
    """A read that waits for a writer for good fails the test instead of hanging the suite (a bound
    on a hang, far above any read of a small file: no timing is asserted)."""

    def stuck(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"still reading after {seconds} s: it waits for good")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _a_folder(path: Path) -> str:
    path.mkdir()
    return "a folder"


def _a_pipe(path: Path) -> str:
    os.mkfifo(path)
    return "a pipe"


def _a_link_to_dev_zero(path: Path) -> str:
    path.symlink_to("/dev/zero")
    return "a device"


_NOT_FILES: dict[str, Callable[[Path], str]] = {
    "a folder": _a_folder,
    "a pipe": _a_pipe,
    "a link to /dev/zero": _a_link_to_dev_zero,
}


@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_a_params_file_that_is_not_a_file_is_refused_naming_it(tmp_path: Path, what: str) -> None:
    path = tmp_path / "params.yaml"
    kind = _NOT_FILES[what](path)
    # A link out of the project is refused before it is opened (pipeline.llm.project_files).
    said = (
        "a link to /dev/zero, which lies outside the project"
        if "link" in what
        else f"it is {kind}, not a file"
    )
    with _no_wait_for_good(), pytest.raises(ConfigError, match=rf"params\.yaml: {said}"):
        read_params_file(path, environ={})


@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_a_data_file_that_is_not_a_file_is_refused_naming_it(tmp_path: Path, what: str) -> None:
    """As a stage meets it where the file was replaced after its reader's is_file() look."""
    path = tmp_path / "labels.csv"
    kind = _NOT_FILES[what](path)
    with _no_wait_for_good(), pytest.raises(InputError, match=rf"labels\.csv: it is {kind}, not a file"):
        input_files.read_text(path, "labels.csv")


@contextlib.contextmanager
def _memory_bound(extra: int = 2 * 2**30) -> Iterator[None]:
    """A read without bound (of /dev/zero) fails the test with MemoryError instead of taking the
    machine's memory: the address space is capped a few GiB above what the process holds now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm", encoding="ascii") as statm:
        now = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = now + extra if hard == resource.RLIM_INFINITY else min(hard, now + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _store(project: Path, plant: Callable[[Path], str]) -> object:
    (project / "params.yaml").unlink()
    plant(project / "params.yaml")
    return configured_store(project)


def _probe(project: Path, plant: Callable[[Path], str]) -> object:
    plant(project / "dvc.yaml")
    return llm_stages(project)


def _preset(project: Path, plant: Callable[[Path], str]) -> object:
    plant(project / "preset.yaml")
    return preset_args(project / "preset.yaml")


def _run_summary(project: Path, plant: Callable[[Path], str]) -> object:
    (project / "runs").mkdir()
    plant(project / "runs" / "judge.json")
    return read_runs(SimpleNamespace(cache=SimpleNamespace(dir=str(project / "cache"))))  # type: ignore[arg-type]


def _plot(project: Path, plant: Callable[[Path], str]) -> object:
    plant(project / "plot.csv")
    return read_rows(project / "plot.csv")


_READERS: dict[str, Callable[[Path, Callable[[Path], str]], object]] = {
    "params.yaml as the recordings store reads it": _store,
    "dvc.yaml as the connection probe reads it": _probe,
    "a preset": _preset,
    "a run summary": _run_summary,
    "a plot's CSV": _plot,
}


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the memory cap reads /proc")
@pytest.mark.parametrize("what", sorted(_NOT_FILES))
@pytest.mark.parametrize("reader", sorted(_READERS))
def test_the_tools_other_readers_refuse_what_is_not_a_file(tmp_path: Path, reader: str, what: str) -> None:
    """Each reads what it reads as unreadable (a missing dvc.yaml or params.yaml: the default) or
    refuses it naming it; none waits for a writer, reads a device without end or gives a traceback."""
    (tmp_path / "params.yaml").write_text("llm:\n  backend: fake\n", encoding="utf-8")
    with _no_wait_for_good(), _memory_bound():
        try:
            _READERS[reader](tmp_path, _NOT_FILES[what])
        except click.ClickException as refused:
            assert refused.format_message().count(str(tmp_path)) >= 1


def _swapped_for_a_pipe_after_the_look(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """`path` looked at (is_file) as the file it is, then a pipe put in its place before the read."""
    looked = Path.is_file

    def then_swapped(self: Path, *args: object, **kwargs: object) -> bool:
        found = looked(self)
        if self.absolute() == path and found:
            path.unlink()
            os.mkfifo(path)
        return found

    monkeypatch.setattr(Path, "is_file", then_swapped)


def test_dvc_lock_swapped_for_a_pipe_after_check_looked_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n", encoding="utf-8")
    _swapped_for_a_pipe_after_the_look(monkeypatch, tmp_path / "dvc.lock")
    with (
        _no_wait_for_good(),
        pytest.raises(click.ClickException, match=r"dvc\.lock: not readable \(it is a pipe"),
    ):
        read_lock(tmp_path)


def test_a_metrics_file_swapped_for_a_pipe_after_the_report_index_looked_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    metrics = tmp_path / "outputs" / "paper" / "metrics.json"
    metrics.parent.mkdir(parents=True)
    shutil.copy(ROOT / "outputs" / "paper" / "metrics.json", metrics)
    _swapped_for_a_pipe_after_the_look(monkeypatch, metrics)
    with _no_wait_for_good():
        found = entry(load_design("paper"), tmp_path / "outputs" / "index.html")
    assert found.problem is not None and "it is a pipe" in found.problem


def test_params_yaml_swapped_for_a_pipe_after_variant_looked_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    _swapped_for_a_pipe_after_the_look(monkeypatch, tmp_path / "params.yaml")
    with _no_wait_for_good(), pytest.raises(ConfigError, match=r"params\.yaml: it is a pipe, not a file"):
        write_variant_params(tmp_path / "out", load_design("paper"), ())


def test_a_batch_results_file_swapped_for_a_pipe_after_ingest_looked_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text('{"custom_id": "k"}\n', encoding="utf-8")
    _swapped_for_a_pipe_after_the_look(monkeypatch, results)
    assert results.is_file()  # ingest's look; the pipe is in place from here on
    with (
        _no_wait_for_good(),
        pytest.raises(ConfigError, match=r"results\.jsonl: cannot be read \(it is a pipe"),
    ):
        list(objects(results))


def test_a_batch_manifest_that_is_a_pipe_is_named(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / MANIFEST_FILE)  # (opened once, no look before: write-exact)
    identity = ModelIdentity(backend="openai", name="m", digest="rev-1")
    with _no_wait_for_good(), pytest.raises(ConfigError, match=r"cannot be read \(it is a pipe"):
        Manifest(tmp_path, identity)


@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_the_batch_line_reader_refuses_what_is_not_a_file(tmp_path: Path, what: str) -> None:
    path = tmp_path / "requests.jsonl"
    kind = _NOT_FILES[what](path)
    with _no_wait_for_good(), pytest.raises(NotARegularFile, match=f"it is {kind}"):
        list(bounded_lines(path))
