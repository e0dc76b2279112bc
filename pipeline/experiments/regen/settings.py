"""The regeneration experiment's `regen_aggregate` section: where the metrics, the per-item table
and the page go."""

from __future__ import annotations

from pipeline.llm.settings import PathParam, Section


class RegenAggregateSettings(Section):
    metrics_out: PathParam = "outputs/regen/metrics.json"
    items_out: PathParam = "outputs/regen/items.csv"
    html_report: PathParam = "outputs/regen/report.html"
