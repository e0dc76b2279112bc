"""Outputs and recordings are written only inside the project, whatever links stand on their way.

params refuses an out that is absolute or climbs out through `..` (tests/test_params_outs_inside.py),
but by its text only: git stores symbolic links, so a pull request could commit `outputs ->
/home/u/.ssh` beside an out `outputs/authorized_keys`, and every write went through the link. Every
writer now makes its folder through pipeline.llm.files.folder_to_write, which refuses a folder named
inside the project (the working folder) that resolves outside it, naming the output, where the link
leads and the fix, before anything is made or written there. A link that stays inside the project is
followed; a folder named outside the project on purpose (an absolute path) is written as before.
"""

from __future__ import annotations

import csv
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from pipeline.data.jsonl import Result, write_jsonl
from pipeline.errors import UnsafeNameError
from pipeline.experiments.paper.aggregation import PlotWriter
from pipeline.llm.files import AtomicText, atomic_write, locked, replacing
from pipeline.llm.recordings import stage_writer
from pipeline.reports.pages import write_pages
from pipeline.tools import figures
from tests.test_trust_links import calls


class Line(Result):
    item: str
    text: str


def _results(path: Path) -> None:
    write_jsonl(path, [Line(item="b", text="2"), Line(item="a", text="1")])


def _text(path: Path) -> None:
    atomic_write(path, "# report\n")


def _csv(path: Path) -> None:
    with AtomicText(path) as handle:
        csv.writer(handle).writerow(["item", "score"])


def _page(path: Path) -> None:
    write_pages(path, "<p>index</p>", _share, 2)


def _share(part: tuple[int, int]) -> Iterable[tuple[str, str]]:
    at, parts = part
    for n in range(at, 2, parts):
        yield f"item-{n}.html", f"<p>{n}</p>"


def _bytes(path: Path) -> None:
    with replacing(path) as out:
        out.write(b'{"custom_id":"a"}\n')


def _plots(path: Path) -> None:
    """The paper's plot tables (its aggregate stage's first write): `path` is the first table."""
    with PlotWriter(path.parent) as plots:
        plots.close()


def _figures(path: Path) -> None:
    """`judgeloop figures --out FOLDER`'s SVG files (one here: the designs' plots are not drawn)."""
    drawn = figures.figures
    figures.figures = lambda: {path.name: "<svg/>"}
    try:
        figures.write_figures(path.parent)
    finally:
        figures.figures = drawn


def _diff_page(path: Path) -> None:
    """`judgeloop diff --html FOLDER`'s page (no metric compared)."""
    from pipeline.tools.diff.page import write_page

    write_page(path.parent, ["a", "b"], [], [], ({}, {}))


def _recording(path: Path) -> None:
    stage_writer.write_stage(path, calls())  # `path`: the stage's folder (cache.recordings/stage)


WRITERS: dict[str, Callable[[Path], None]] = {
    "a results file": _results,
    "a report": _text,
    "plot data (csv)": _csv,
    "a report page and its item pages": _page,
    "a batch file": _bytes,
    "a recording": _recording,
    "the paper's plot tables": _plots,
    "figures": _figures,
    "a diff page": _diff_page,
}
# What each writer is given: the recording its stage's folder (the folder it locks and names).
OUT = {
    "a recording": "rec/all/judge",
    "a report page and its item pages": "outputs/paper/report.html",
    "the paper's plot tables": "outputs/paper/plots/scores_by_iteration.csv",
    "figures": "outputs/paper/figures/pipeline.svg",
    "a diff page": "outputs/diff/index.html",
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, made the working folder (as DVC runs a stage), beside a folder outside it."""
    (tmp_path / "project").mkdir()
    (tmp_path / "outside").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


def _out(what: str) -> Path:
    return Path(OUT.get(what, "outputs/paper/out.file"))


def _top(out: Path) -> str:
    return out.parts[0]


def _written(what: str, out: Path) -> Path:
    return out / "calls.jsonl" if what == "a recording" else out


@pytest.mark.parametrize("what", sorted(WRITERS))
def test_an_output_folder_linked_out_of_the_project_is_refused_and_nothing_written(
    project: Path, what: str
) -> None:
    out = _out(what)
    outside = project.parent / "outside"
    (project / _top(out)).symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeNameError) as refused:
        WRITERS[what](out)
    said = str(refused.value)
    assert said.startswith(f"{out}: not written: {_top(out)} is a symbolic link to {outside}, "), said
    assert "which lies outside the project" in said
    assert f"Fix: remove the link (rm -- {_top(out)}) and run again" in said
    assert list(outside.iterdir()) == []  # no file, no folder made through the link


@pytest.mark.parametrize("what", sorted(WRITERS))
def test_a_link_lower_on_the_way_out_is_named(project: Path, what: str) -> None:
    out = _out(what)
    outside = project.parent / "outside"
    (project / _top(out)).mkdir()
    link = project / _top(out) / out.parts[1]
    link.symlink_to(outside, target_is_directory=True)
    shown = os.path.relpath(link, project)
    with pytest.raises(UnsafeNameError, match=rf"^{out}: not written: {shown} is a symbolic link to"):
        WRITERS[what](out)
    assert list(outside.iterdir()) == []


def test_a_link_that_leads_out_through_another_link_is_refused(project: Path) -> None:
    (project / "outputs").symlink_to("elsewhere")  # a link inside, to a link out
    (project / "elsewhere").symlink_to(project.parent / "outside")
    with pytest.raises(UnsafeNameError, match=r"outputs is a symbolic link to .*outside"):
        _results(Path("outputs/out.jsonl"))
    assert list((project.parent / "outside").iterdir()) == []


def test_a_dangling_link_out_is_refused(project: Path) -> None:
    (project / "outputs").symlink_to(project.parent / "gone")
    with pytest.raises(UnsafeNameError, match="outputs is a symbolic link to"):
        _text(Path("outputs/report.md"))
    assert not (project.parent / "gone").exists()


@pytest.mark.parametrize("what", sorted(WRITERS))
def test_a_link_inside_the_project_is_followed(project: Path, what: str) -> None:
    out = _out(what)
    (project / "real").mkdir()
    (project / _top(out)).symlink_to("real", target_is_directory=True)
    WRITERS[what](out)
    assert (project / "real" / Path(*_written(what, out).parts[1:])).is_file()


@pytest.mark.parametrize("what", sorted(WRITERS))
def test_a_folder_named_outside_the_project_is_written(project: Path, what: str) -> None:
    """An absolute path the user named (the cache on another disk, a test's folder): their choice."""
    out = project.parent / "outside" / _out(what)
    WRITERS[what](out)
    assert _written(what, out).is_file()


def test_the_folder_locked_for_a_writer_is_checked_too(project: Path) -> None:
    (project / "recordings").symlink_to(project.parent / "outside")
    with (
        pytest.raises(
            UnsafeNameError, match=r"^recordings/judge: not written: recordings is a symbolic link"
        ),
        locked(Path("recordings/judge")),
    ):
        pass
    assert list((project.parent / "outside").iterdir()) == []


def test_the_results_file_keeps_its_bytes_and_mode(project: Path) -> None:
    """The check changes nothing of what is written inside the project."""
    _results(Path("outputs/out.jsonl"))
    written = project / "outputs" / "out.jsonl"
    assert written.read_bytes() == b'{"item":"a","text":"1"}\n{"item":"b","text":"2"}\n'
    assert stat.S_IMODE(written.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_stage_whose_outputs_folder_is_linked_out_writes_nothing_there(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real stage (`python -m stages summeval summeval_calibrate`) with its outs under `out/`, a
    committed link out of the project: it reads its input through the link (data may lie anywhere)
    and refuses its first write, naming it; nothing is written where the link leads."""
    from click.testing import CliRunner

    from pipeline.data.summeval import human_ratings, load_summeval
    from pipeline.experiments.summeval.judge import judge_order
    from pipeline.experiments.summeval.results import SummEvalJudgement
    from stages.runner import main as stage
    from tests.test_summeval_experiment import DEMO, _write_params

    corpus = load_summeval(DEMO)
    humans = {(h.item, h.metric): h.mean for h in human_ratings(corpus)}
    rows = [
        SummEvalJudgement(
            item=s.item, document=s.document, system=s.system, dimension=d, score=round(humans[s.item, d]),
            weighted_score=humans[s.item, d], probabilities=None, mass=None, failure=None, error=None,
            attempts=1, text="",
        )
        for s, d in judge_order(corpus, ("coherence", "consistency", "fluency", "relevance"))
    ]  # fmt: skip
    params = _write_params(project, monkeypatch)
    outside = project.parent / "outside"
    write_jsonl(outside / "judgements.jsonl", rows)
    (project / "out").symlink_to(outside, target_is_directory=True)
    result = CliRunner().invoke(
        stage, ["summeval", "summeval_calibrate"], env={"JUDGELOOP_PARAMS": str(params)}
    )
    assert result.exit_code == 1, result.output
    assert (
        f"not written: out is a symbolic link to {outside}, which lies outside the project" in result.output
    )
    assert "Traceback" not in result.output
    assert sorted(p.name for p in outside.iterdir()) == ["judgements.jsonl"]
