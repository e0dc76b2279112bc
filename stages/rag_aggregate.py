"""rag_aggregate: score distributions, agreement with the human labels, and the report page
(params: rag)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipeline.data.jsonl import read_jsonl
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.recorded_calls import recorded_calls
from pipeline.experiments.rag.aggregation import compute_metrics, markdown_report
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.params import load_rag_params
from pipeline.reports.rag import render_rag_html


@click.command()
def main() -> None:
    params = load_rag_params()
    settings = params.rag
    judgements = read_jsonl(Path(settings.out), RagJudgement)
    metrics = compute_metrics(judgements, settings)
    model = f"{params.llm.backend}:{params.llm.model}"
    Path(settings.metrics_out).parent.mkdir(parents=True, exist_ok=True)
    Path(settings.metrics_out).write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    Path(settings.report_md).write_text(markdown_report(metrics, model), encoding="utf-8")
    rows = load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)
    calls = recorded_calls(Path(params.cache.recordings) / "rag_judge", verify=False)
    html = render_rag_html(rows, judgements, metrics, calls, settings, f"RAG judge: {model}")
    Path(settings.report_html).write_text(html, encoding="utf-8")


if __name__ == "__main__":
    main()
