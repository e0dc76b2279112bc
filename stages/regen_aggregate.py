"""regen_aggregate: metrics.json and the per-item table of the regeneration experiment
(params: regen_aggregate, regenerate, regen_generate)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.regen.aggregation import compute_metrics, write_items
from pipeline.experiments.regen.params import load_regen_params, load_rows
from pipeline.loops.regenerate import Regeneration


@click.command()
def main() -> None:
    params = load_regen_params()
    rows = {row.id: row for row in load_rows(params)}
    regenerations = read_jsonl(Path(params.regenerate.out), Regeneration)
    settings = params.regen_aggregate
    summary = compute_metrics(params, regenerations, rows)
    Path(settings.metrics_out).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_items(Path(settings.items_out), regenerations)


if __name__ == "__main__":
    main()
