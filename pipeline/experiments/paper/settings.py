"""The paper experiment's `aggregate` section: where Figure 2, the plots and the reports go."""

from __future__ import annotations

from pipeline.llm.settings import PathParam, Section


class AggregateSettings(Section):
    metrics_out: PathParam = "outputs/paper/metrics.json"
    plots_dir: PathParam = "outputs/paper/plots"
    report: PathParam = "outputs/paper/report.md"
    html_report: PathParam = "outputs/paper/report.html"
