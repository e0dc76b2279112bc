"""The regeneration experiment's `regen_aggregate` section: where the metrics, the per-item table
and the page go."""

from __future__ import annotations

from pipeline.llm.settings import Section


class RegenAggregateSettings(Section):
    metrics_out: str = "outputs/regen/metrics.json"
    items_out: str = "outputs/regen/items.csv"
    html_report: str = "outputs/regen/report.html"
