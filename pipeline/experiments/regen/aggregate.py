"""The regeneration experiment's aggregate stage: metrics.json and the per-item table."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.regen.aggregation import compute_metrics, write_items
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.loops.regenerate import Regeneration


def run(params: RegenParams) -> None:
    rows = {row.id: row for row in load_rows(params)}
    regenerations = read_jsonl(Path(params.regenerate.out), Regeneration)
    settings = params.regen_aggregate
    summary = compute_metrics(params, regenerations, rows)
    Path(settings.metrics_out).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_items(Path(settings.items_out), regenerations)
