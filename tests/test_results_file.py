"""A stage's results read again from their file an item at a time (pipeline.data.results_file): what
refine and judge read of the earlier stages through the stage runner, never held whole (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.jsonl import Result, read_jsonl, write_jsonl
from pipeline.data.results_file import ResultsFile
from pipeline.errors import InputError
from pipeline.experiments.paper.design import DESIGN
from pipeline.experiments.paper.refine import refine_inputs
from stages.runner import FileUpstream
from tests.project import recorded_project


class Row(Result):
    item: str
    value: int


def _file(tmp_path: Path, rows: list[Row]) -> ResultsFile[Row]:
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, rows)
    return ResultsFile(path, Row, lambda r: r.item)


def test_results_come_back_in_the_files_order_at_each_pass_and_by_item(tmp_path: Path) -> None:
    rows = [Row(item=f"9{i:02d}", value=i) for i in range(5)]
    results = _file(tmp_path, rows)
    assert list(results) == rows
    assert list(results) == rows  # read again, not used up
    assert len(results) == 5 and "903" in results and "999" not in results
    assert results["902"] == rows[2]
    with pytest.raises(KeyError):
        results["999"]


def test_a_line_changed_after_the_scan_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    results = _file(tmp_path, [Row(item="901", value=1), Row(item="902", value=2)])
    path = tmp_path / "rows.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"value":2', b'"value":7'))
    assert results["901"].value == 1
    with pytest.raises(InputError, match=r"rows.jsonl.*2.*changed while it was being read"):
        list(results)


def test_an_item_on_two_lines_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a file of the project: the item is named (pipeline.llm.project_files)
    path = tmp_path / "rows.jsonl"
    path.write_text('{"item":"901","value":1}\n{"item":"901","value":2}\n', encoding="utf-8")
    with pytest.raises(InputError, match="901"):
        ResultsFile(path, Row, lambda r: r.item)


def test_refine_reads_the_earlier_stages_from_their_files_through_the_stage_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    params = DESIGN.load_params()
    inputs = refine_inputs(params, FileUpstream(DESIGN, params))
    assert isinstance(inputs.assessments, ResultsFile)
    judged = read_jsonl(DESIGN.results_path("judge", params), type(next(iter(inputs.judgements))))
    assert list(inputs.judgements) == judged
    path = DESIGN.results_path("judge", params)
    path.write_bytes(path.read_bytes().replace(b'"score":', b'"score": ', 1))
    with pytest.raises(InputError, match="changed while it was being read"):
        list(inputs.judgements)  # read again from the file, never a copy held since


def test_a_line_added_after_the_scan_is_refused(tmp_path: Path) -> None:
    results = _file(tmp_path, [Row(item="901", value=1)])
    with (tmp_path / "rows.jsonl").open("a", encoding="utf-8") as out:
        out.write('{"item":"902","value":2}\n')
    with pytest.raises(InputError, match=r"rows.jsonl.*2.*changed while it was being read"):
        list(results)
