"""summeval_calibrate: the judge against SummEval's ratings: metrics, plot data, page (params: summeval)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.experiments.summeval.calibration import experiment_rows, plot_csv, summeval_metrics
from pipeline.experiments.summeval.params import load_summeval_params
from pipeline.experiments.summeval.report import render_summeval_html
from pipeline.llm.keys import canonical_json


def _write(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


@click.command()
def main() -> None:
    params = load_summeval_params()
    settings = params.summeval
    rows = experiment_rows(params)
    _, metrics = summeval_metrics(params, rows)
    _write(settings.metrics_out, canonical_json(metrics) + "\n")
    _write(settings.plot_csv, plot_csv(rows))
    title = f"judgeloop SummEval calibration: {params.llm.backend}:{params.llm.model}"
    _write(settings.html_report, render_summeval_html(metrics, rows.judgements, rows.humans, title))


if __name__ == "__main__":
    main()
