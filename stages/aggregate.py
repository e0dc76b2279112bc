"""aggregate: metrics.json, plots and the reports from the refinement records (params: aggregate)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipeline.experiments.paper.aggregation import compute_metrics, markdown_report, write_plots
from pipeline.experiments.paper.params import load_paper_params
from pipeline.experiments.paper.report.html import load_records, write_report
from pipeline.loops.results import read_refinements


@click.command()
def main() -> None:
    params = load_paper_params()
    settings = params.aggregate
    refinements = read_refinements(Path(params.refine.out), params.judge.metrics)
    summary = compute_metrics(refinements, params.judge.metrics)
    Path(settings.metrics_out).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_plots(Path(settings.plots_dir), refinements, summary)
    model = f"{params.llm.backend}:{params.llm.model}"
    Path(settings.report).write_text(markdown_report(summary, model), encoding="utf-8")
    records = load_records(Path(params.cache.recordings))
    write_report(Path(settings.html_report), refinements, summary, records, f"judgeloop: {model}")


if __name__ == "__main__":
    main()
