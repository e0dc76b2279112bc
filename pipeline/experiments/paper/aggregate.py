"""The paper's aggregate stage: metrics.json (Figure 2 and the loop's bookkeeping), the plots, and
the report (report.md, report.html and one page per item), from the refinement records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.data.recorded_calls import stage_call_counts
from pipeline.data.recorded_models import design_model
from pipeline.experiments.paper.aggregation import LLM_STAGES, compute_metrics, markdown_report, write_plots
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.paper.report.html import load_records, write_report
from pipeline.judges.rubric.judge import reply_reader
from pipeline.loops.results import Refinement, read_refinements
from pipeline.stats.stability import stability


def _refinements(params: PaperParams) -> list[Refinement]:
    return read_refinements(Path(params.refine.out), params.judge.metrics)


def _metrics(params: PaperParams, refinements: list[Refinement]) -> dict[str, Any]:
    recorded = stage_call_counts(Path(params.cache.recordings), LLM_STAGES)
    summary = compute_metrics(refinements, params.judge.metrics, recorded)
    if params.judge.samples > 1:  # only then: a run with one sample writes what it wrote before
        summary["judge_stability"] = judge_stability(refinements, params)
    return summary


def judge_stability(refinements: list[Refinement], params: PaperParams) -> dict[str, Any]:
    """Per metric, over every judgement made (carried-over ones not again): how much its samples
    spread (pipeline.stats.stability), and how the judgement used downstream combined them."""
    out: dict[str, Any] = {"samples": params.judge.samples, "combine": params.judge.combine}
    for metric in params.judge.metrics:
        rows = [
            [None if s is None else float(s) for s in judged.samples]
            for r in refinements
            for it in r.iterations
            if (judged := it.metrics.get(metric)) is not None and not judged.carried_over and judged.samples
        ]
        found = stability(rows, params.refine.threshold)
        out[metric] = {
            "judgements": found.judgements,
            "within_item_sd": None if found.within_sd is None else round(found.within_sd, 4),
            "straddle_threshold_share": None
            if found.straddle_share is None
            else round(found.straddle_share, 4),
            "krippendorff_alpha_interval": None
            if found.alpha_interval is None
            else round(found.alpha_interval, 4),
        }
    return out


def run(params: PaperParams) -> None:
    settings = params.aggregate
    refinements = _refinements(params)
    summary = _metrics(params, refinements)
    metrics = Path(settings.metrics_out)
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_plots(Path(settings.plots_dir), refinements, summary)
    _write_report(params, refinements, summary)


def report(params: PaperParams) -> list[Path]:
    """The report pages again, as the stage writes them."""
    refinements = _refinements(params)
    return _write_report(params, refinements, _metrics(params, refinements))


def _write_report(params: PaperParams, refinements: list[Refinement], summary: dict[str, Any]) -> list[Path]:
    settings = params.aggregate
    model = design_model(Path(params.cache.recordings), LLM_STAGES)  # as recorded, not as params say
    markdown, index = Path(settings.report), Path(settings.html_report)
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(markdown_report(summary, model), encoding="utf-8")
    records = load_records(Path(params.cache.recordings))
    # The replies read as the judge stage read them: its metric labels and decimal policy.
    read = reply_reader(params.judge)
    pages = write_report(index, refinements, summary, records, f"judgeloop: {model}", read)
    return [markdown, index, *(index.parent / pages.folder / name for name in sorted(pages.pages))]
