"""Fuzzing a stage's results file as a later stage reads it (pipeline.data.jsonl, results_file,
result_places): refine reads assess's and judge's results, the RAG aggregate its judge's, and each
may come from a collaborator's run (outputs are DVC outputs, pulled like any other). Seeds: the
committed outputs, edited; and the file replaced by a folder. The property of
tests/fuzz/support.py: the results, or a clear error naming the file and the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.data.jsonl import Result, iter_jsonl, read_jsonl, read_records, write_jsonl, write_records
from pipeline.data.result_places import ResultPlaces
from pipeline.data.results_file import ResultsFile
from pipeline.errors import InputError
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.loops.results import Refinement
from tests.fuzz.support import clear_or_correct, committed, fuzz, inputs

FILES: list[tuple[str, type[Result]]] = [
    ("outputs/paper/assessments.jsonl", Assessment),
    ("outputs/paper/judgements.jsonl", AssessmentJudgements),
    ("outputs/paper/refinement.jsonl", Refinement),
    ("outputs/rag/judgements.jsonl", RagJudgement),
]
SEEDS = {name: committed(name)[:12000] for name, _ in FILES}  # a line or more of each


def _item(result: Result) -> str:
    return str(getattr(result, "item"))  # noqa: B009 (as pipeline.experiments.steps reads it)


def read_every_way(path: Path, model: type[Result]) -> None:
    """Every reader of a results file, each to its end: the results or a clear error."""
    clear_or_correct(lambda: read_jsonl(path, model))
    clear_or_correct(lambda: sum(1 for _ in iter_jsonl(path, model)))
    clear_or_correct(lambda: read_records(path))

    def by_item() -> None:
        results = ResultsFile(path, model, _item)
        list(results)
        for item in list(results._places):
            results[item]

    clear_or_correct(by_item)

    def placed() -> None:
        places = ResultPlaces(path, model, _item)
        items = [_item(result) for result in places.scan()]
        for item in items:
            places.get(item)

    clear_or_correct(placed)


@fuzz
@given(data=st.data())
def test_a_stage_s_results_file(sandbox: Path, data: st.DataObject) -> None:
    name, model = data.draw(st.sampled_from(FILES))
    path = sandbox / "results.jsonl"
    path.write_bytes(data.draw(inputs(SEEDS[name])))
    read_every_way(path, model)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        pytest.param(b'{"item":"\xff"}\n', 2, id="not UTF-8"),
        pytest.param(b'{"item":"\xed\xa0\x80"}\n', 2, id="a lone surrogate's bytes"),
        pytest.param('{"item":"1"}\u2028'.encode() + b"\xff\n", 2, id="after a U+2028, which ends no line"),
    ],
)
def test_a_results_file_that_is_not_utf8_is_refused_naming_it(sandbox: Path, data: bytes, line: int) -> None:
    """Found by the fuzzing: the readers decoded each chunk as UTF-8 unguarded, so a results file
    with bytes that are not UTF-8 failed with UnicodeDecodeError, naming neither file nor line."""
    path = sandbox / "not-utf8.jsonl"
    first = SEEDS["outputs/paper/assessments.jsonl"].split(b"\n")[0]
    path.write_bytes(first + b"\n" + data)
    for read in (
        lambda: read_jsonl(path, Assessment),
        lambda: read_records(path),
        lambda: list(ResultsFile(path, Assessment, _item)),
        lambda: list(ResultPlaces(path, Assessment, _item).scan()),
    ):
        with pytest.raises(InputError, match=rf"{path.name}:{line}: byte 0x.. is not UTF-8"):
            read()


def test_a_results_file_that_is_a_folder_is_refused_naming_it(sandbox: Path) -> None:
    path = sandbox / "a-folder.jsonl"
    path.mkdir()
    for read in (lambda: read_jsonl(path, Assessment), lambda: ResultsFile(path, Assessment, _item)):
        with pytest.raises(InputError, match=path.name):
            read()


def test_the_seeds_are_read_as_they_are(sandbox: Path) -> None:
    """Each seed (cut at a line's end) is a file its reader accepts."""
    for name, model in FILES:
        path = sandbox / "seed.jsonl"
        seed = SEEDS[name]
        path.write_bytes(seed[: seed.rfind(b"\n") + 1])
        assert read_jsonl(path, model)
        assert list(ResultsFile(path, model, _item))


class _Said(Result):
    item: str
    text: str


# Any text a result may hold: a model's reply or a transcript's quote (st.text gives no lone
# surrogate, which no result can be written with: tests/test_trust_surrogates.py).
_TEXTS = st.text(max_size=20) | st.sampled_from(
    ["a\u2028b", "\u2029", "a\x85b", "\x1c\x1d\x1e", "\r\n", "\x0b\x0c"]
)


@fuzz
@given(rows=st.lists(st.tuples(st.text(max_size=3), _TEXTS), max_size=6))
def test_every_reader_reads_back_what_a_stage_wrote(sandbox: Path, rows: list[tuple[str, str]]) -> None:
    """Found here: canonical JSON writes U+2028, U+2029 and U+0085 as they are (only the controls
    below U+0020 are escaped), and the readers cut the file where str.splitlines() cuts, so a
    result holding one (a reply, a quote) was written and then refused by the next stage as
    "not a record" ("re-run the stage" could not mend it)."""
    results = [_Said(item=item, text=text) for item, text in rows]
    path = sandbox / "said.jsonl"
    write_jsonl(path, results)
    expected = sorted(results, key=_item)
    assert read_jsonl(path, _Said) == list(iter_jsonl(path, _Said)) == expected
    assert read_records(path) == [r.model_dump() for r in expected]
    by_item = {_item(r): r for r in expected}
    places = ResultPlaces(path, _Said, _item)
    assert list(places.scan()) == expected
    assert {item: places.get(item) for item in by_item} == by_item
    if len(by_item) == len(expected):  # ResultsFile refuses an item on two lines
        results_file = ResultsFile(path, _Said, _item)
        assert list(results_file) == expected
        assert {item: results_file[item] for item in by_item} == by_item
    write_records(path, [r.model_dump() for r in expected])
    assert read_records(path) == [r.model_dump() for r in expected]
