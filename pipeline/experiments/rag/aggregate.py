"""The RAG judge's aggregate stage: score distributions, agreement with the human labels, and the
report (report.md, report.html).

Held per row: its judgement without its texts (the numbers the metrics need) and where its line
lies in rag.out. The judge's recording is read and verified once, its calls held packed and parsed
one row at a time when the page reaches that row (pipeline.data.recorded_stages); the page is
written as it is rendered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.recorded_models import model_label
from pipeline.data.recorded_stages import StageRecords
from pipeline.data.result_places import ResultPlaces
from pipeline.experiments.rag.aggregation import LLM_STAGES, compute_metrics, markdown_report, numbers_only
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.params import RagParams
from pipeline.experiments.rag.report import page_entries, rag_page_chunks
from pipeline.llm.files import atomic_write, atomic_write_chunks
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import RecordedCall

Judgements = ResultPlaces[RagJudgement]


def _recorded(params: RagParams) -> StageRecords:
    """The judge's recorded calls, verified in full (content the stages verified before, as their
    memo holds it, is not verified again), counted and held packed."""
    memo = VerifiedMemo.beside(Path(params.cache.dir))
    return StageRecords.read(Path(params.cache.recordings), LLM_STAGES, memo)


def _summarize(params: RagParams) -> tuple[Judgements, StageRecords, dict[str, Any]]:
    judgements: Judgements = ResultPlaces(Path(params.rag.out), RagJudgement, lambda j: j.item)
    numbers = [numbers_only(j) for j in judgements.scan()]
    records = _recorded(params)
    return judgements, records, compute_metrics(numbers, params.rag, records.counts)


def first_call(records: StageRecords, key: str) -> RecordedCall | None:
    """The recorded call of `key` (its first copy, by stage then line), parsed from its verified line."""
    for index in records.indexes.values():
        call = index.call(key)
        if call is not None:
            return call
    return None


def _write_report(
    params: RagParams, judgements: Judgements, records: StageRecords, metrics: dict[str, Any]
) -> list[Path]:
    settings = params.rag
    model = model_label(records.models())  # as recorded, not as params say
    markdown, page = Path(settings.report_md), Path(settings.report_html)
    atomic_write(markdown, markdown_report(metrics, model))
    rows = load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)
    entries = page_entries(rows, judgements.get, lambda key: first_call(records, key))
    title = f"judgeloop RAG judge: {model}"
    atomic_write_chunks(page, rag_page_chunks(entries, metrics, settings, title, page))
    return [markdown, page]


def run(params: RagParams) -> None:
    judgements, records, metrics = _summarize(params)
    metrics_out = Path(params.rag.metrics_out)
    atomic_write(metrics_out, json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    _write_report(params, judgements, records, metrics)


def report(params: RagParams) -> list[Path]:
    """The report again, as the stage writes it."""
    return _write_report(params, *_summarize(params))
