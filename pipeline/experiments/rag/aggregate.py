"""The RAG judge's aggregate stage: score distributions, agreement with the human labels, and the
report (report.md, report.html)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.data.jsonl import read_jsonl
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.recorded_calls import recorded_calls, stage_call_counts
from pipeline.data.recorded_models import design_model
from pipeline.experiments.rag.aggregation import LLM_STAGES, compute_metrics, markdown_report
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.params import RagParams
from pipeline.experiments.rag.report import render_rag_html


def _summarize(params: RagParams) -> tuple[list[RagJudgement], dict[str, Any]]:
    judgements = read_jsonl(Path(params.rag.out), RagJudgement)
    recorded = stage_call_counts(Path(params.cache.recordings), LLM_STAGES)
    return judgements, compute_metrics(judgements, params.rag, recorded)


def _write_report(params: RagParams, judgements: list[RagJudgement], metrics: dict[str, Any]) -> list[Path]:
    settings = params.rag
    model = design_model(Path(params.cache.recordings), LLM_STAGES)  # as recorded, not as params say
    markdown, page = Path(settings.report_md), Path(settings.report_html)
    markdown.write_text(markdown_report(metrics, model), encoding="utf-8")
    rows = load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)
    calls = recorded_calls(Path(params.cache.recordings) / "rag_judge", verify=False)
    page.write_text(
        render_rag_html(rows, judgements, metrics, calls, settings, f"judgeloop RAG judge: {model}", page),
        encoding="utf-8",
    )
    return [markdown, page]


def run(params: RagParams) -> None:
    judgements, metrics = _summarize(params)
    metrics_out = Path(params.rag.metrics_out)
    metrics_out.parent.mkdir(parents=True, exist_ok=True)
    metrics_out.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    _write_report(params, judgements, metrics)


def report(params: RagParams) -> list[Path]:
    """The report again, as the stage writes it."""
    return _write_report(params, *_summarize(params))
