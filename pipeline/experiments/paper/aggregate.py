"""The paper's aggregate stage: metrics.json (Figure 2 and the loop's bookkeeping), the plots, and
the report (report.md, report.html and one page per item), from the refinement records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.data.recorded_models import model_label
from pipeline.data.recorded_stages import StageRecords
from pipeline.experiments.paper.aggregation import LLM_STAGES, compute_metrics, markdown_report, write_plots
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.paper.report.html import write_report
from pipeline.judges.rubric.judge import reply_reader
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.loops.results import Refinement, read_refinements
from pipeline.stats.stability import stability


def _refinements(params: PaperParams) -> list[Refinement]:
    return read_refinements(Path(params.refine.out), params.judge.metrics)


def _recorded(params: PaperParams) -> StageRecords:
    """The LLM stages' recorded calls, read and verified once, counted (the calls, the model) one at
    a time and held packed, each item's calls parsed for its page (pipeline.data.recorded_stages); a
    recording the stages verified in full before (their memo) is not verified again."""
    memo = VerifiedMemo.beside(Path(params.cache.dir))
    return StageRecords.read(Path(params.cache.recordings), LLM_STAGES, memo)


def _metrics(params: PaperParams, refinements: list[Refinement], calls: StageRecords) -> dict[str, Any]:
    recorded = {stage: calls.counts[stage] for stage in sorted(LLM_STAGES)}
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
    calls = _recorded(params)
    summary = _metrics(params, refinements, calls)
    metrics = Path(settings.metrics_out)
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_plots(Path(settings.plots_dir), refinements, summary)
    _write_report(params, refinements, summary, calls)


def report(params: PaperParams) -> list[Path]:
    """The report pages again, as the stage writes them."""
    refinements = _refinements(params)
    calls = _recorded(params)
    return _write_report(params, refinements, _metrics(params, refinements, calls), calls)


def _write_report(
    params: PaperParams,
    refinements: list[Refinement],
    summary: dict[str, Any],
    calls: StageRecords,
) -> list[Path]:
    settings = params.aggregate
    # The model as recorded, not as params say (pipeline.data.recorded_models).
    model = model_label(calls.models())
    markdown, index = Path(settings.report), Path(settings.html_report)
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(markdown_report(summary, model), encoding="utf-8")
    # Every call by key, its first copy by stage then line (as pipeline.data.recorded_calls.first_by_key),
    # parsed when its item's page is written.
    # The replies read as the judge stage read them: its metric labels and decimal policy.
    read = reply_reader(params.judge)
    pages = write_report(index, refinements, summary, calls, f"judgeloop: {model}", read)
    return [markdown, index, *(index.parent / pages.folder / name for name in sorted(pages.pages))]
