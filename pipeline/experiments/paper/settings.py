"""The paper experiment's `aggregate` section: where Figure 2, the plots and the reports go."""

from __future__ import annotations

from pipeline.llm.settings import Section


class AggregateSettings(Section):
    metrics_out: str = "metrics.json"
    plots_dir: str = "plots"
    report: str = "report.md"
    html_report: str = "report.html"
