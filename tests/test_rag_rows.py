"""RAG rows: our JSONL format and ARES's, with errors that name the file, the line and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.rag_rows import load_rag_rows
from pipeline.errors import InputError
from tests.conftest import ROOT, shared_dir

ARES = shared_dir() / "corpora" / "rag-ares" / "ares_rag_human.jsonl"


def test_the_demo_rows_load_with_their_labels() -> None:
    rows = load_rag_rows(ROOT / "data" / "rag-demo" / "rows.jsonl")
    assert [r.id for r in rows][:2] == ["d01", "d02"]
    assert rows[1].labels["answer_faithfulness"] == 0 and rows[1].contexts and rows[1].source_ids


@pytest.mark.skipif(
    not ARES.exists(), reason="../shared/corpora/rag-ares is not here (it is never committed)"
)
def test_the_ares_filtered_set_is_its_111_annotated_rows() -> None:
    rows = load_rag_rows(ARES, only="in_v1_1_filtered")
    assert len(rows) == 111
    assert {frozenset(r.labels) for r in rows} == {
        frozenset({"context_relevance", "answer_faithfulness", "answer_relevance"})
    }
    assert sum(r.labels["answer_faithfulness"] for r in rows) == 91  # SOURCE.md: AF 91/20


@pytest.mark.parametrize(
    ("content", "line", "expected"),
    [
        (
            '{"id": "a", "question": "q", "answer": "x"}\n{"id": "a", "question": "q", "answer": "y"}\n',
            2,
            "line 1",
        ),
        ('{"id": "a", "question": "q"}\n', 1, "answer"),
        ("not json\n", 1, "not JSON"),
        ("[1, 2]\n", 1, "not a JSON object"),
        ('{"id": "a", "question": "", "answer": "x"}\n', 1, "question"),
    ],
)
def test_bad_rows_name_their_line(tmp_path: Path, content: str, line: int, expected: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        load_rag_rows(path)
    assert caught.value.line == line and expected in caught.value.problem


def test_limit_and_filter(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    lines = [
        f'{{"id": "r{i}", "question": "q", "answer": "a", "keep": {str(i % 2 == 0).lower()}}}'
        for i in range(6)
    ]
    path.write_text("\n".join(lines) + "\n")
    assert [r.id for r in load_rag_rows(path, only="keep", limit=2)] == ["r0", "r2"]
    with pytest.raises(InputError, match="keep"):  # other keys are refused: a typo cannot pass silently
        load_rag_rows(path)
