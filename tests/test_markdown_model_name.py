"""report.md names the model as recorded (a colleague's recordings, a server's model listing): a
name holding a backtick, a blank line, a `|` or a control cannot end its code span and write
Markdown of its own (an image fetched from elsewhere, a heading, a table row) into the committed
report; it is shown in one code span, controls as escapes (writers-red)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pipeline.experiments.paper.aggregation import markdown_report as paper_markdown
from pipeline.experiments.rag.aggregation import markdown_report as rag_markdown
from pipeline.llm.terminal import shown
from tests.conftest import ROOT

HOSTILE = [
    "m`\n\n![x](https://tracker.example/t.png)",
    "``a``",
    "` leading and trailing `",
    "a | b\n| row | forged |",
    "x\n# a heading",
    "m\x1b[2J\u202e",
]
REPORTS: dict[str, tuple[Callable[[dict[str, Any], str], str], str]] = {
    "paper": (paper_markdown, "outputs/paper/metrics.json"),
    "rag": (rag_markdown, "outputs/rag/metrics.json"),
}


def _shape(tokens: list[Token]) -> list[Any]:
    return [(t.type, t.tag, [c.type for c in t.children or []]) for t in tokens]


def _code(tokens: list[Token]) -> list[str]:
    return [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]


@pytest.mark.parametrize("design", sorted(REPORTS))
@pytest.mark.parametrize("name", HOSTILE)
def test_a_model_name_stays_in_its_code_span(design: str, name: str) -> None:
    render, metrics = REPORTS[design]
    summary = json.loads((ROOT / metrics).read_text(encoding="utf-8"))
    markdown = MarkdownIt("commonmark").enable("table")
    plain = markdown.parse(render(summary, "plain"))
    hostile = markdown.parse(render(summary, name))
    assert _shape(hostile) == _shape(plain)
    codes = _code(hostile)
    assert codes[: _code(plain).index("plain")] == _code(plain)[: _code(plain).index("plain")]
    assert shown(name, one_line=True).strip(" ") in codes


def test_a_plain_name_is_written_as_before() -> None:
    summary = json.loads((ROOT / "outputs/paper/metrics.json").read_text(encoding="utf-8"))
    assert "Model: `ollama:qwen2.5:7b`. Items:" in paper_markdown(summary, "ollama:qwen2.5:7b")
