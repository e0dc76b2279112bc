"""The regeneration experiment's `regen_aggregate` section: where the metrics, the per-item table
and the page go."""

from __future__ import annotations

from pipeline.llm.settings import OutParam, Section


class RegenAggregateSettings(Section):
    metrics_out: OutParam = "outputs/regen/metrics.json"
    items_out: OutParam = "outputs/regen/items.csv"
    html_report: OutParam = "outputs/regen/report.html"
