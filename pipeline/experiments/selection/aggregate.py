"""The selection's aggregate stage: metrics.json and the page, from both stages' records and calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.data.jsonl import read_records
from pipeline.data.recorded_calls import stage_call_counts
from pipeline.data.recorded_models import design_model
from pipeline.experiments.selection.aggregation import compute_metrics
from pipeline.experiments.selection.files import METRICS, PAGE, PICKS, SCORES
from pipeline.experiments.selection.params import SelectionParams
from pipeline.experiments.selection.report import render_selection_page
from pipeline.experiments.selection.score import ScoredRequest
from pipeline.llm.files import atomic_write
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo

STAGES = ("select_score", "select_pick")
Records = list[dict[str, Any]]


def _summarize(params: SelectionParams) -> tuple[Records, Records, dict[str, Any]]:
    scored_records = read_records(SCORES)
    picks = read_records(PICKS)
    recordings = Path(params.cache.recordings)
    keys = {stage: [c.call.record.key for c in read_stage(recordings / stage)] for stage in STAGES}
    recorded = stage_call_counts(recordings, STAGES)
    metrics = compute_metrics([ScoredRequest.from_record(r) for r in scored_records], picks, keys, recorded)
    return scored_records, picks, metrics


def _write_page(params: SelectionParams, scored: Records, picks: Records, metrics: dict[str, Any]) -> Path:
    memo = VerifiedMemo.beside(Path(params.cache.dir))  # verified in full before: not again
    title = f"judgeloop selection: {design_model(Path(params.cache.recordings), STAGES, memo)}"
    atomic_write(PAGE, render_selection_page(title, PAGE, metrics, scored, picks))
    return PAGE


def run(params: SelectionParams) -> None:
    scored, picks, metrics = _summarize(params)
    atomic_write(METRICS, json.dumps(metrics, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    _write_page(params, scored, picks, metrics)


def report(params: SelectionParams) -> list[Path]:
    """The page again, as the stage writes it."""
    return [_write_page(params, *_summarize(params))]
