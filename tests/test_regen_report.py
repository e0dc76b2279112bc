"""The regeneration experiment's page: every item, every attempt, the model's words as text."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.data.jsonl import read_jsonl
from pipeline.data.rag_rows import load_rag_rows
from pipeline.experiments.regen.report import render_regen_html
from pipeline.loops.regenerate import Regeneration
from tests.conftest import ROOT
from tests.report_dom import Page


def test_the_page_shows_every_attempt_escaped() -> None:
    regenerations = read_jsonl(ROOT / "outputs/regen/regenerated.jsonl", Regeneration)
    rows = {row.id: row for row in load_rag_rows(ROOT / "data/rag-demo/rows.jsonl")}
    metrics = json.loads((ROOT / "outputs/regen/metrics.json").read_text(encoding="utf-8"))
    first = regenerations[0]
    hostile = first.attempts[0].answer.model_copy(update={"text": "<script>alert(1)</script> & more"})
    attempts = (first.attempts[0].model_copy(update={"answer": hostile}), *first.attempts[1:])
    regenerations[0] = first.model_copy(update={"attempts": attempts})
    html = render_regen_html(metrics, regenerations, rows, "<b>title</b>", Path("report.html"))
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    assert "<b>title</b>" not in html
    page = Page(html)
    for r in regenerations:
        section = page.ids[f"item-{r.item}"]
        assert len([e for e in section.elements() if e.tag == "h4"]) == len(r.attempts)


def test_a_run_that_regenerated_nothing_renders_its_page() -> None:
    # regenerate.enabled=false (the README's `exp`) or no answer below the threshold: the
    # regeneration latency has no percentiles, and the page says so instead of failing the stage.
    regenerations = read_jsonl(ROOT / "outputs/regen/regenerated.jsonl", Regeneration)
    rows = {row.id: row for row in load_rag_rows(ROOT / "data/rag-demo/rows.jsonl")}
    metrics = json.loads((ROOT / "outputs/regen/metrics.json").read_text(encoding="utf-8"))
    metrics["latency_s"]["regeneration"] = {"n": 0, "unmeasured": 0}
    html = render_regen_html(metrics, regenerations, rows, "title", Path("report.html"))
    assert "regeneration none" in html
