"""The paper's aggregate stage: metrics.json (Figure 2 and the loop's bookkeeping), the plots, and
the report (report.md, report.html and one page per item), from the refinement records."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.data.recorded_models import model_label
from pipeline.data.recorded_stages import StageRecords
from pipeline.experiments.paper.aggregation import LLM_STAGES, MetricsTally, PlotWriter, markdown_report
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.paper.report.html import write_report
from pipeline.judges.rubric.judge import reply_reader
from pipeline.judges.scores.explicit import label_patterns
from pipeline.judges.scores.lazy import compile_all
from pipeline.llm.files import atomic_write
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.loops.results import Refinement, RefinementFile
from pipeline.stats.stability import stability


def _refinements(params: PaperParams) -> RefinementFile:
    """refinement.jsonl, read an item at a time on each pass (nothing of it held between items)."""
    return RefinementFile(Path(params.refine.out), tuple(params.judge.metrics))


def _recorded(params: PaperParams) -> StageRecords:
    """The LLM stages' recorded calls, read and verified once, counted (the calls, the model) one at
    a time and held packed, each item's calls parsed for its page (pipeline.data.recorded_stages); a
    recording the stages verified in full before (their memo) is not verified again."""
    memo = VerifiedMemo.beside(Path(params.cache.dir))
    return StageRecords.read(Path(params.cache.recordings), LLM_STAGES, memo)


class _StabilityTally:
    """judge_stability's rows taken one item at a time: each judgement's samples (a few numbers)."""

    def __init__(self, params: PaperParams) -> None:
        self.params = params
        self.rows: dict[str, list[list[float | None]]] = {metric: [] for metric in params.judge.metrics}

    def add(self, r: Refinement) -> None:
        for metric, rows in self.rows.items():
            rows.extend(
                [None if s is None else float(s) for s in judged.samples]
                for it in r.iterations
                if (judged := it.metrics.get(metric)) is not None
                and not judged.carried_over
                and judged.samples
            )

    def summary(self) -> dict[str, Any]:
        params = self.params
        out: dict[str, Any] = {"samples": params.judge.samples, "combine": params.judge.combine}
        for metric in params.judge.metrics:
            found = stability(self.rows[metric], params.refine.threshold)
            out[metric] = {
                "judgements": found.judgements,
                "within_item_sd": _rounded(found.within_sd),
                "straddle_threshold_share": _rounded(found.straddle_share),
                "krippendorff_alpha_interval": _rounded(found.alpha_interval),
            }
        return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def judge_stability(refinements: Iterable[Refinement], params: PaperParams) -> dict[str, Any]:
    """Per metric, over every judgement made (carried-over ones not again): how much its samples
    spread (pipeline.stats.stability), and how the judgement used downstream combined them."""
    tally = _StabilityTally(params)
    for r in refinements:
        tally.add(r)
    return tally.summary()


def _summarize(params: PaperParams, calls: StageRecords, plots: PlotWriter | None = None) -> dict[str, Any]:
    """metrics.json's content, in one pass over refinement.jsonl (an item at a time: what is kept is
    counts and a few scores an item); with `plots`, the plots' item tables written in the same pass."""
    metrics = MetricsTally(params.judge.metrics)
    # Only with samples: a run with one sample writes what it wrote before.
    stable = _StabilityTally(params) if params.judge.samples > 1 else None
    for r in _refinements(params):
        metrics.add(r)
        if stable is not None:
            stable.add(r)
        if plots is not None:
            plots.add(r)
    summary = metrics.summary({stage: calls.counts[stage] for stage in sorted(LLM_STAGES)})
    if stable is not None:
        summary["judge_stability"] = stable.summary()
    return summary


def run(params: PaperParams) -> None:
    settings = params.aggregate
    calls = _recorded(params)
    with PlotWriter(Path(settings.plots_dir)) as plots:
        summary = _summarize(params, calls, plots)
        plots.close(summary)
    atomic_write(Path(settings.metrics_out), json.dumps(summary, indent=2, sort_keys=True) + "\n")
    _write_report(params, summary, calls)


def report(params: PaperParams) -> list[Path]:
    """The report pages again, as the stage writes them."""
    calls = _recorded(params)
    return _write_report(params, _summarize(params, calls), calls)


def _write_report(params: PaperParams, summary: dict[str, Any], calls: StageRecords) -> list[Path]:
    settings = params.aggregate
    # The model as recorded, not as params say (pipeline.data.recorded_models).
    model = model_label(calls.models())
    markdown, index = Path(settings.report), Path(settings.html_report)
    atomic_write(markdown, markdown_report(summary, model))
    # Every call by key, its first copy by stage then line (as pipeline.data.recorded_calls.first_by_key),
    # parsed when its item's page is written.
    # The replies read as the judge stage read them: its metric labels and decimal policy.
    read = reply_reader(params.judge)
    # The patterns that read the replies, compiled once here rather than by each page writer after
    # the fork (pipeline.reports.page_shares): the same patterns, compiled earlier.
    compile_all()
    for metric in params.judge.metrics:
        label_patterns((metric,))
    pages = write_report(index, _refinements(params), summary, calls, f"judgeloop: {model}", read)
    return [markdown, index, *(index.parent / pages.folder / name for name in sorted(pages.pages))]
