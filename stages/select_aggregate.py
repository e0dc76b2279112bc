"""select_aggregate: the selection's metrics.json and page (params: llm.backend, llm.model)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipeline.data.jsonl import read_records
from pipeline.experiments.selection.aggregation import compute_metrics
from pipeline.experiments.selection.files import METRICS, PAGE, PICKS, SCORES
from pipeline.experiments.selection.params import load_selection_params
from pipeline.experiments.selection.score import ScoredRequest
from pipeline.llm.recordings import read_stage
from pipeline.reports.selection import render_selection_page

STAGES = ("select_score", "select_pick")


@click.command()
def main() -> None:
    params = load_selection_params()
    scored_records = read_records(SCORES)
    picks = read_records(PICKS)
    recordings = Path(params.cache.recordings)
    keys = {stage: [c.call.record.key for c in read_stage(recordings / stage)] for stage in STAGES}
    metrics = compute_metrics([ScoredRequest.from_record(r) for r in scored_records], picks, keys)
    METRICS.write_text(
        json.dumps(metrics, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    title = f"judgeloop selection: {params.llm.backend}:{params.llm.model}"
    PAGE.write_text(render_selection_page(title, metrics, scored_records, picks), encoding="utf-8")


if __name__ == "__main__":
    main()
