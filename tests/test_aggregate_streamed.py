"""The RAG and regeneration aggregate stages hold per item only their numbers (issue 33): results
read again an item at a time (by place, or in order), calls looked up one row at a time as the page
is rendered, and the same pages and metrics as a whole read."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.data.jsonl import read_jsonl
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.recorded_stages import StageRecords
from pipeline.data.result_places import ResultPlaces
from pipeline.errors import CorruptRecordError, InputError
from pipeline.experiments.rag import aggregate as rag_aggregate
from pipeline.experiments.rag import aggregation as rag_aggregation
from pipeline.experiments.rag.aggregate import first_call
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.params import load_rag_params
from pipeline.experiments.rag.report import page_entries, rag_page_chunks, render_rag_html
from pipeline.experiments.regen import aggregate as regen_aggregate
from pipeline.experiments.regen.aggregation import compute_metrics, numbers_only
from pipeline.experiments.regen.params import load_regen_params
from pipeline.experiments.regen.report import regen_page_chunks, render_regen_html
from pipeline.llm.records import RecordedCall
from pipeline.loops.regenerate import Regeneration
from tests.conftest import ROOT

JUDGEMENTS = ROOT / "outputs/rag/judgements.jsonl"
REGENERATED = ROOT / "outputs/regen/regenerated.jsonl"
ROWS = ROOT / "data/rag-demo/rows.jsonl"


def _places(path: Path = JUDGEMENTS) -> ResultPlaces[RagJudgement]:
    return ResultPlaces(path, RagJudgement, lambda j: j.item)


def test_places_read_each_item_again_as_the_scan_read_it() -> None:
    places = _places()
    scanned = list(places.scan())
    assert scanned == read_jsonl(JUDGEMENTS, RagJudgement)
    for judged in reversed(scanned):  # any order: each found by its place
        assert places.get(judged.item) == judged
    assert places.get("no such item") is None


def test_an_item_on_two_lines_is_its_last_as_a_dict_keeps_it(tmp_path: Path) -> None:
    first, second = JUDGEMENTS.read_text(encoding="utf-8").splitlines()[:2]
    other = RagJudgement.model_validate_json(second).model_copy(
        update={"item": RagJudgement.model_validate_json(first).item}
    )
    path = tmp_path / "j.jsonl"
    path.write_text(f"{first}\n{other.model_dump_json()}\n", encoding="utf-8")
    places = _places(path)
    by_item = {j.item: j for j in places.scan()}
    assert places.get(other.item) == by_item[other.item] == other


def test_a_line_changed_after_the_scan_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    lines = JUDGEMENTS.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    places = _places(path)
    items = [j.item for j in places.scan()]
    lines[1] = lines[1].replace('"attempts":1', '"attempts":2', 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert places.get(items[0]) is not None  # untouched lines still read
    with pytest.raises(InputError, match=r":2: changed while it was being read"):
        places.get(items[1])


def test_a_bad_line_is_named_as_iter_jsonl_names_it(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text(JUDGEMENTS.read_text(encoding="utf-8").splitlines()[0] + "\n{}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r":2: not a RagJudgement record"):
        list(_places(path).scan())


def test_rag_metrics_from_numbers_alone_equal_the_whole_judgements() -> None:
    settings = load_rag_params(ROOT / "params.yaml").rag
    whole = read_jsonl(JUDGEMENTS, RagJudgement)
    numbers = [rag_aggregation.numbers_only(j) for j in whole]
    assert all(isinstance(j, rag_aggregation.RowNumbers) for j in numbers)
    metrics = rag_aggregation.compute_metrics
    assert metrics(numbers, settings) == metrics(whole, settings)


def test_rag_page_looks_up_a_rows_calls_only_when_its_section_is_rendered() -> None:
    params = load_rag_params(ROOT / "params.yaml")
    records = StageRecords.read(ROOT / "recordings", ("rag_judge",))
    places = _places()
    list(places.scan())
    looked_up: list[str] = []

    def call_of(key: str) -> RecordedCall | None:
        looked_up.append(key)
        return first_call(records, key)

    metrics = json.loads((ROOT / "outputs/rag/metrics.json").read_text(encoding="utf-8"))
    rows = load_rag_rows(ROWS)
    entries = page_entries(rows, places.get, call_of)
    assert isinstance(entries, Iterator)  # a generator: nothing looked up yet
    assert not looked_up
    chunks = rag_page_chunks(entries, metrics, params.rag, "t", Path("outputs/rag/report.html"))
    written: list[str] = []  # str.join: a Markup chunk added to a str would escape it
    sections_when_looked: list[int] = []
    for chunk in chunks:
        while len(sections_when_looked) < len(looked_up):
            sections_when_looked.append(sum(c.count('<section class="row"') for c in written))
        written.append(chunk)
    page = "".join(written)
    first_keys = {r.id: places.get(r.id).judgement.call_keys for r in rows}  # type: ignore[union-attr]
    # each row's calls looked up after the sections of the rows before it were rendered
    expected = [n for n, row in enumerate(rows) for _ in first_keys[row.id]]
    assert sections_when_looked == expected
    whole = render_rag_html(
        rows,
        read_jsonl(JUDGEMENTS, RagJudgement),
        metrics,
        {k: c for k in records if (c := first_call(records, k)) is not None},
        params.rag,
        "t",
        Path("outputs/rag/report.html"),
    )
    assert page == whole


def test_regen_numbers_alone_give_the_same_metrics_and_table() -> None:
    params = load_regen_params(ROOT / "params.yaml")
    whole = read_jsonl(REGENERATED, Regeneration)
    rows = {row.id: row for row in load_rag_rows(ROWS)}
    numbers = [numbers_only(r) for r in whole]
    assert all(not a.answer.text for r in numbers for a in r.attempts)
    assert compute_metrics(params, numbers, rows) == compute_metrics(params, whole, rows)
    metrics = json.loads((ROOT / "outputs/regen/metrics.json").read_text(encoding="utf-8"))
    page = Path("outputs/regen/report.html")
    streamed = "".join(regen_page_chunks(metrics, numbers, iter(whole), rows, "t", page))
    assert streamed == render_regen_html(metrics, whole, rows, "t", page)


def test_regen_sections_read_again_an_item_at_a_time_and_a_change_is_refused(tmp_path: Path) -> None:
    numbers = [numbers_only(r) for r in read_jsonl(REGENERATED, Regeneration)]
    items = regen_aggregate._same_items(REGENERATED, numbers)
    assert isinstance(items, Iterator)
    assert next(items).item == numbers[0].item
    path = tmp_path / "r.jsonl"
    lines = REGENERATED.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # an item gone
    with pytest.raises(InputError, match="changed while it was being read"):
        list(regen_aggregate._same_items(path, numbers))
    swapped = [lines[1], lines[0], *lines[2:]]
    path.write_text("\n".join(swapped) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r":1: changed while it was being read"):
        list(regen_aggregate._same_items(path, numbers))


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: str, stages: tuple[str, ...]) -> None:
    """The committed demo's inputs of one design's aggregate stage, copied to a project of its own."""
    for name in ("params.yaml", "data/rag-demo/rows.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "outputs" / outputs, tmp_path / "outputs" / outputs)
    for stage in stages:
        shutil.copytree(ROOT / "recordings" / stage, tmp_path / "recordings" / stage)
    monkeypatch.chdir(tmp_path)


def test_rag_aggregate_writes_the_committed_outputs_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, monkeypatch, "rag", ("rag_judge",))
    written = ("metrics.json", "report.md", "report.html")
    for name in written:
        (tmp_path / "outputs/rag" / name).unlink()
    rag_aggregate.run(load_rag_params(tmp_path / "params.yaml"))
    for name in written:
        assert (tmp_path / "outputs/rag" / name).read_bytes() == (ROOT / "outputs/rag" / name).read_bytes()


def test_rag_aggregate_shows_no_call_of_a_recording_that_fails_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, monkeypatch, "rag", ("rag_judge",))
    (tmp_path / "outputs/rag/report.html").unlink()
    calls = tmp_path / "recordings/rag_judge/calls.jsonl"
    text = calls.read_text(encoding="utf-8")
    calls.write_text(text.replace('"done_reason":"stop"', '"done_reason":"length"', 1), encoding="utf-8")
    with pytest.raises(CorruptRecordError):
        rag_aggregate.run(load_rag_params(tmp_path / "params.yaml"))
    assert not (tmp_path / "outputs/rag/report.html").exists()


def test_regen_aggregate_writes_the_committed_outputs_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, monkeypatch, "regen", ("regen_evaluate", "regen_generate", "regen_regenerate"))
    written = ("metrics.json", "items.csv", "report.html")
    for name in written:
        (tmp_path / "outputs/regen" / name).unlink()
    regen_aggregate.run(load_regen_params(tmp_path / "params.yaml"))
    for name in written:
        committed = (ROOT / "outputs/regen" / name).read_bytes()
        assert (tmp_path / "outputs/regen" / name).read_bytes() == committed
