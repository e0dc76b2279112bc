"""The regeneration experiment's aggregate stage: metrics.json, the per-item table and the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.data.jsonl import read_jsonl
from pipeline.data.rag_rows import RagRow
from pipeline.data.recorded_calls import stage_call_counts
from pipeline.data.recorded_models import design_model
from pipeline.experiments.regen.aggregation import LLM_STAGES, compute_metrics, write_items
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.regen.report import render_regen_html
from pipeline.loops.regenerate import Regeneration


def _summarize(params: RegenParams) -> tuple[list[Regeneration], dict[str, RagRow], dict[str, Any]]:
    rows = {row.id: row for row in load_rows(params)}
    regenerations = read_jsonl(Path(params.regenerate.out), Regeneration)
    recorded = stage_call_counts(Path(params.cache.recordings), LLM_STAGES)
    return regenerations, rows, compute_metrics(params, regenerations, rows, recorded)


def _write_page(
    params: RegenParams, regenerations: list[Regeneration], rows: dict[str, RagRow], metrics: dict[str, Any]
) -> Path:
    page = Path(params.regen_aggregate.html_report)
    page.parent.mkdir(parents=True, exist_ok=True)
    title = f"judgeloop regeneration: {design_model(Path(params.cache.recordings), LLM_STAGES)}"
    page.write_text(render_regen_html(metrics, regenerations, rows, title, page), encoding="utf-8")
    return page


def run(params: RegenParams) -> None:
    regenerations, rows, summary = _summarize(params)
    metrics = Path(params.regen_aggregate.metrics_out)
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_items(Path(params.regen_aggregate.items_out), regenerations)
    _write_page(params, regenerations, rows, summary)


def report(params: RegenParams) -> list[Path]:
    """The page again, as the stage writes it."""
    return [_write_page(params, *_summarize(params))]
