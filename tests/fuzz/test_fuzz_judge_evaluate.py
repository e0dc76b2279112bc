"""Fuzzing what `judgeloop judge-evaluate QUESTION --answer-file A --context-file C...` reads
(pipeline.experiments.rag.judge_evaluate.single_row): the answer file was fuzzed alone
(test_fuzz_data), the context files not at all. The property of tests/fuzz/support.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from pipeline.errors import InputError
from pipeline.experiments.rag.judge_evaluate import single_row
from tests.fuzz.support import clear_or_correct, fuzz, inputs

ANSWER = b'{"answer": "Set PORT in the config file.", "sources_used": ["s.md"]}\n'
CONTEXT = (
    "# Config\n\nThe port is set by PORT (default 8080).\n\ufeffA second paragraph, caf\u00e9.\n".encode()
)


@fuzz
@given(answer=inputs(ANSWER), context=inputs(CONTEXT))
def test_an_answer_and_a_context_file(sandbox: Path, answer: bytes, context: bytes) -> None:
    (sandbox / "answer.json").write_bytes(answer)
    (sandbox / "s.md").write_bytes(context)
    clear_or_correct(
        lambda: single_row("How do I change the port?", sandbox / "answer.json", (sandbox / "s.md",), None)
    )


def test_a_context_file_that_is_not_utf8_is_refused_naming_its_line(sandbox: Path) -> None:
    """Found by the fuzzing: a context file was read with read_text, so a byte that is not UTF-8
    (a Windows-1252 export, say) failed with UnicodeDecodeError, naming neither file nor line."""
    (sandbox / "answer.json").write_bytes(ANSWER)
    (sandbox / "s.md").write_bytes(b"line one\ncaf\xe9\n")
    with pytest.raises(InputError, match=r"s\.md:2: byte 0xe9 is not UTF-8"):
        single_row("Q?", sandbox / "answer.json", (sandbox / "s.md",), None)


def test_a_context_file_is_read_as_given(sandbox: Path) -> None:
    """The seed reads, its text whole (a byte order mark included, as the prompt always held it)."""
    (sandbox / "answer.json").write_bytes(ANSWER)
    (sandbox / "s.md").write_bytes(b"\xef\xbb\xbf" + CONTEXT)
    row = single_row("Q?", sandbox / "answer.json", (sandbox / "s.md",), None)
    assert row.contexts == ("\ufeff" + CONTEXT.decode(),)
