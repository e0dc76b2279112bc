"""A key given twice in one JSON object of a data file is refused, naming the file, the line, the
key and the fix (pipeline.data.json_keys); json, orjson and pydantic would each keep the last."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.data.json_keys import RepeatedKey, loads_unique, repeated_key
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.settings import DataSettings
from pipeline.data.summeval import load_summeval
from pipeline.data.transcripts import load_transcripts
from pipeline.errors import InputError
from pipeline.experiments.rag.judge_evaluate import read_answer
from pipeline.llm.project_files import NOT_QUOTED
from pipeline.tools.cli import main
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"a": 1, "a": 2}', "a"),
        ('{"a": 1, "b": {"c": 1, "c": 1}}', "c"),  # the same value twice is still two keys
        ('[{"x": 1}, {"y": 1, "y": 2}]', "y"),
        ('{"\\u0061": 1, "a": 2}', "a"),  # an escape spells the same key
        ('{"a": 1, "A": 2, "b": [1, 1]}', None),
        ('{"a": {"a": {"a": 1}}}', None),  # one key in each of three objects
        ("[1, 2", None),  # not JSON: its parser's to refuse
    ],
)
def test_repeated_key_finds_the_key_another_parser_would_drop(text: str, key: str | None) -> None:
    assert repeated_key(text) == key
    assert repeated_key(text.encode("utf-8")) == key


def test_loads_unique_parses_as_json_does_or_names_the_key() -> None:
    text = '{"b": [1, {"c": null}], "a": "x"}'
    assert loads_unique(text) == json.loads(text)
    with pytest.raises(RepeatedKey) as raised:
        loads_unique('{"id": "301", "text": "t", "id": "302"}')
    assert raised.value.key == "id" and "'id' is given twice" in str(raised.value)


def _refused(call: object, where: str, key: str) -> InputError:
    assert callable(call)
    with pytest.raises(InputError) as raised:
        call()
    message = str(raised.value)
    assert message.startswith(f"{where}: "), message
    assert f"the key {key!r} is given twice in one object" in message, message
    assert "Fix: keep the key once in each object" in message, message
    return raised.value


def test_a_rag_row_giving_its_id_twice_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a file of the project: the key is quoted (pipeline.llm.project_files)
    good = '{"id": "a", "question": "q", "answer": "x"}'
    rows = tmp_path / "rows.jsonl"
    rows.write_text(f'{good}\n{{"id": "b", "question": "q", "answer": "y", "id": "c"}}\n', encoding="utf-8")
    _refused(lambda: load_rag_rows(rows), f"{rows}:2", "id")


def test_a_key_outside_the_project_is_not_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the file is not the project's: its text is not shown (a secret, perhaps)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "question": "q", "answer": "x", "sk-secret": 1, "sk-secret": 2}\n')
    with pytest.raises(InputError) as raised:
        load_rag_rows(rows)
    assert "sk-secret" not in str(raised.value) and NOT_QUOTED in str(raised.value)
    assert str(raised.value).startswith(f"{rows}:1: ")


@pytest.mark.parametrize(
    "line",
    [
        '{"id": "301", "text": "Ellie: hi", "id": "302"}',
        '{"id": "301", "turns": [{"speaker": "Ellie", "text": "hi", "text": "bye"}]}',
    ],
)
def test_a_jsonl_interview_giving_a_key_twice_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.jsonl").write_text('{"id": "300", "text": "Ellie: fine"}\n\n' + line + "\n")
    settings = DataSettings.model_validate({"transcripts": "."})
    key = "id" if '"id": "302"' in line else "text"
    _refused(lambda: load_transcripts(settings, root=tmp_path), "b.jsonl:3", key)


def test_a_summeval_line_giving_a_rating_twice_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    lines = (ROOT / "data" / "summeval-demo" / "summeval-demo.jsonl").read_text("utf-8").splitlines()
    # The demo's line 2 with its first rating's coherence given a second time, as the last key.
    first = '"coherence": '
    at = lines[1].index(first)
    twice = lines[1][:at] + '"coherence": 1, ' + lines[1][at:]
    assert json.loads(twice) == json.loads(lines[1])  # what json.loads reads: the 1 dropped silently
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], twice, *lines[2:]]) + "\n", encoding="utf-8")
    _refused(lambda: load_summeval(path), f"{path}:2", "coherence")


def test_a_human_rating_given_twice_is_refused_by_calibrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scores = tmp_path / "s.jsonl"
    scores.write_text('{"item": "x/1", "group": "g", "system": "s", "metric": "coherence", "score": 4}\n')
    humans = tmp_path / "h.jsonl"
    humans.write_text('{"item": "x/1", "metric": "coherence", "ratings": [1], "ratings": [5]}\n')
    result = CliRunner().invoke(main, ["calibrate", "--scores", str(scores), "--human", str(humans)])
    assert result.exit_code != 0
    assert f"{humans}:1: the key 'ratings' is given twice" in result.output, result.output


def test_a_rag_agents_answer_giving_its_answer_twice_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "answer.json"
    path.write_text(
        '{\n  "answer": "Paris",\n  "sources_used": [],\n  "answer": "Lyon"\n}\n', encoding="utf-8"
    )
    _refused(lambda: read_answer(path), str(path), "answer")
    path.write_text('{"answer": "Paris", "sources_used": ["a", "a"]}\n', encoding="utf-8")
    assert read_answer(path).answer == "Paris"  # a value repeated in a list is no key given twice


def test_a_number_past_pythons_digits_is_an_error_naming_its_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """json.loads raised a bare ValueError for an int of more than 4,300 digits, which SummEval's
    reader and judge-evaluate's let through as a traceback."""
    monkeypatch.chdir(tmp_path)
    long = "1" * 5000
    with pytest.raises(json.JSONDecodeError) as raised:
        loads_unique('{"a": 1,\n "b": ' + long + "}")
    assert (raised.value.lineno, raised.value.colno) == (2, 7)
    lines = (ROOT / "data" / "summeval-demo" / "summeval-demo.jsonl").read_text("utf-8").splitlines()
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join([lines[0], '{"id": ' + long + "}"]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"corpus\.jsonl:2: not JSON \(a number of more than 4,300 digits\)"):
        load_summeval(corpus)
    answer = tmp_path / "answer.json"
    answer.write_text('{"answer": "x",\n "n": ' + long + "}\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"answer\.json:2: opens like JSON but is not JSON \(a number of more"
    ):
        read_answer(answer)


def test_a_long_key_given_twice_is_shown_cut_and_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key is the file's text, as long as its line: the message showed it whole (a 100 kB error
    line); it shows the first 80 characters, escaped (no control character reaches the terminal)."""
    monkeypatch.chdir(tmp_path)
    key = "\x1b[2J" + "k" * 100_000
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"id": "a", "question": "q", "answer": "x", key: 1})[:-1] + f", {json.dumps(key)}: 2}}\n"
    )
    with pytest.raises(InputError) as raised:
        load_rag_rows(rows)
    message = str(raised.value)
    assert f"the key {(key[:80])!r}... (100,004 characters) is given twice" in message, message[:300]
    assert len(message) < 500 and "\x1b" not in message
    assert (
        str(RepeatedKey(key))
        == f"the key {(key[:80])!r}... (100,004 characters) is given twice in one object"
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"id": "q7"}, "row_id (ARES's id) and 'id' (this format's) are both given"),
        ({"labels": {"answer_faithfulness": 0}}, "row_id (ARES's id) and 'labels' (this format's)"),
        ({"row_id": True}, "row_id is bool, not a whole number or text"),
        ({"row_id": 1.0}, "row_id is float, not a whole number or text"),
    ],
)
def test_a_rag_row_mixing_ares_and_this_format_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict[str, object], problem: str
) -> None:
    """A row with ARES's row_id was read as ARES's, and this format's id, contexts, source_ids and
    labels beside it were dropped silently: one field under two names, as a CSV's two columns
    (pipeline.data.input_files.repeated_column). row_id true or 1.0 became the ids "True", "1.0"."""
    monkeypatch.chdir(tmp_path)
    ares = {"row_id": 3, "question": "q", "answer": "a", "human_answer_faithfulness": 1}
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(ares) + "\n" + json.dumps({**ares, "row_id": 4, **extra}) + "\n")
    with pytest.raises(InputError, match=rf"rows\.jsonl:2: not a RAG row \({re.escape(problem)}"):
        load_rag_rows(rows)
    rows.write_text(json.dumps(ares) + "\n")
    assert [(r.id, r.labels) for r in load_rag_rows(rows)] == [("3", {"answer_faithfulness": 1})]


@pytest.mark.parametrize("flag", ['"false"', "0", '"true"'])
def test_a_rag_rows_filter_flag_that_is_no_boolean_is_refused(tmp_path: Path, flag: str) -> None:
    """`only` kept a row whose flag was truthy: the text "false" kept it (ARES's flags are booleans)."""
    rows = tmp_path / "rows.jsonl"
    row = '{"id": "a", "question": "q", "answer": "x", "in_v1_1_filtered": %s}\n'
    rows.write_text(row % "true" + row.replace('"a"', '"b"') % "false")
    assert [r.id for r in load_rag_rows(rows, only="in_v1_1_filtered")] == ["a"]
    rows.write_text(row % "null" + row.replace('"a"', '"b"') % "true")  # null: missing (pandas), false
    assert [r.id for r in load_rag_rows(rows, only="in_v1_1_filtered")] == ["b"]
    rows.write_text(row % "true" + row.replace('"a"', '"b"') % flag)
    with pytest.raises(
        InputError, match=r"rows\.jsonl:2: the flag 'in_v1_1_filtered' is \w+, not true or false"
    ):
        load_rag_rows(rows, only="in_v1_1_filtered")
