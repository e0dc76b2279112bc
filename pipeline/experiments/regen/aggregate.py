"""The regeneration experiment's aggregate stage: metrics.json, the per-item table and the page.

Held per item: its numbers (numbers_only: qualities, call counts, durations; no answer text). The
page's sections read the results file again, an item at a time, and the page is written as it is
rendered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.data.jsonl import iter_jsonl
from pipeline.data.rag_rows import RagRow
from pipeline.data.recorded_calls import stage_call_counts
from pipeline.data.recorded_models import design_model
from pipeline.errors import InputError
from pipeline.experiments.regen.aggregation import LLM_STAGES, compute_metrics, numbers_only, write_items
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.regen.report import regen_page_chunks
from pipeline.llm.files import atomic_write, atomic_write_chunks
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.loops.regenerate import Regeneration

FIX = "re-run the stage that writes it"


def _summarize(params: RegenParams) -> tuple[list[Regeneration], dict[str, RagRow], dict[str, Any]]:
    rows = {row.id: row for row in load_rows(params)}
    regenerations = [numbers_only(r) for r in iter_jsonl(Path(params.regenerate.out), Regeneration)]
    recorded = stage_call_counts(Path(params.cache.recordings), LLM_STAGES)
    return regenerations, rows, compute_metrics(params, regenerations, rows, recorded)


def _write_page(
    params: RegenParams, regenerations: list[Regeneration], rows: dict[str, RagRow], metrics: dict[str, Any]
) -> Path:
    """`regenerations`: numbers_only's, for the table; each section reads its item again."""
    page = Path(params.regen_aggregate.html_report)
    memo = VerifiedMemo.beside(Path(params.cache.dir))  # verified in full before: not again
    title = f"judgeloop regeneration: {design_model(Path(params.cache.recordings), LLM_STAGES, memo)}"
    items = _same_items(Path(params.regenerate.out), regenerations)
    atomic_write_chunks(page, regen_page_chunks(metrics, regenerations, items, rows, title, page))
    return page


def _same_items(path: Path, summaries: list[Regeneration]) -> Iterator[Regeneration]:
    """The results file read again, an item at a time, each the item its summary was made from: a
    file changed between the two reads is refused, naming the line."""
    number = 0
    for full in iter_jsonl(path, Regeneration):
        if number >= len(summaries) or numbers_only(full) != summaries[number]:
            raise InputError(str(path), number + 1, "changed while it was being read", FIX)
        number += 1
        yield full
    if number != len(summaries):
        raise InputError(str(path), number + 1, "changed while it was being read", FIX)


def run(params: RegenParams) -> None:
    regenerations, rows, summary = _summarize(params)
    metrics = Path(params.regen_aggregate.metrics_out)
    atomic_write(metrics, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_items(Path(params.regen_aggregate.items_out), regenerations)
    _write_page(params, regenerations, rows, summary)


def report(params: RegenParams) -> list[Path]:
    """The page again, as the stage writes it."""
    return [_write_page(params, *_summarize(params))]
