"""The paper experiment's `aggregate` section: where Figure 2, the plots and the reports go."""

from __future__ import annotations

from pipeline.llm.settings import OutParam, Section


class AggregateSettings(Section):
    metrics_out: OutParam = "outputs/paper/metrics.json"
    plots_dir: OutParam = "outputs/paper/plots"
    report: OutParam = "outputs/paper/report.md"
    html_report: OutParam = "outputs/paper/report.html"
