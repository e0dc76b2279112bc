"""The paper experiment's `aggregate` section: where Figure 2, the plots and the reports go."""

from __future__ import annotations

from pipeline.llm.settings import Section


class AggregateSettings(Section):
    metrics_out: str = "outputs/paper/metrics.json"
    plots_dir: str = "outputs/paper/plots"
    report: str = "outputs/paper/report.md"
    html_report: str = "outputs/paper/report.html"
