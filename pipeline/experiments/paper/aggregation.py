"""Figure 2 and the loop's bookkeeping, from the refinement records alone.

"before" is iteration 0 (the assess stage's assessment as the judge scored it); "after" is the
iteration the loop kept (the last, or the best with refine.keep=best); an item the loop never
touched counts the same in both, as in the paper's 142-participant figure. Means are over scored
metrics only, and the unscored are counted beside them: an unreadable reply is never a number.
SD is the sample standard deviation (n-1); n=1 has none.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from pipeline.judges.scores.reading import READ_REASONS
from pipeline.judges.unscored import unscored_reasons
from pipeline.loops.results import Refinement

# The paper's Figure 2 (142 DAIC-WOZ participants, mean ± SD), from shared notes.
PAPER_FIGURE2: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "coherence": ((4.96, 0.20), (5.00, 0.00)),
    "specificity": ((4.37, 0.62), (4.38, 0.58)),
    "accuracy": ((4.33, 0.53), (4.36, 0.48)),
    "completeness": ((3.61, 0.85), (3.72, 0.61)),
}


def _summary(scores: list[int | float | None]) -> dict[str, Any]:
    scored = [s for s in scores if s is not None]
    return {
        "mean": round(fmean(scored), 4) if scored else None,
        "sd": round(stdev(scored), 4) if len(scored) > 1 else None,
        "n": len(scored),
        "unscored": len(scores) - len(scored),
    }


def figure2(refinements: list[Refinement], metrics: tuple[str, ...]) -> dict[str, Any]:
    """Per metric, the scores before (iteration 0) and after (the kept iteration)."""

    def scores(metric: str, kept: bool) -> list[int | float | None]:
        judged = [r.iterations[r.kept if kept else 0].metrics for r in refinements]
        return [by_metric[metric].score for by_metric in judged if metric in by_metric]

    return {m: {"before": _summary(scores(m, False)), "after": _summary(scores(m, True))} for m in metrics}


def readings(refinements: list[Refinement]) -> dict[str, int]:
    """How each judgement's score was read (pipeline.judges.scores reasons), so a decimal rounded or
    left unscored (judge.decimal_scores) and a prose verdict are counted, not hidden in the means."""
    counts = Counter(
        judged.reading
        for r in refinements
        for it in r.iterations
        for judged in it.metrics.values()
        if not judged.carried_over
    )
    return dict(sorted(counts.items()))


# The design's LLM stages, whose recorded calls the metrics count (pipeline.data.recorded_calls).
LLM_STAGES = ("assess", "judge", "refine")


def compute_metrics(
    refinements: list[Refinement],
    metrics: tuple[str, ...],
    recorded: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """`recorded`: each LLM stage's call counts, from its recording (what `judgeloop audit` shows;
    pipeline.data.recorded_calls.stage_call_counts); None: no recording to count from."""
    recorded = recorded or {}
    refined = [r for r in refinements if len(r.iterations) > 1]
    return {
        "items": len(refinements),
        "figure2": figure2(refinements, metrics),
        "refined_items": len(refined),
        "mean_iterations": round(fmean(len(r.iterations) - 1 for r in refined), 4) if refined else 0,
        "stop_reasons": dict(sorted(Counter(r.stop_reason for r in refinements).items())),
        "invalid_assessments": {
            "initial": sum(not r.iterations[0].assessment.valid for r in refinements),
            "kept": sum(not r.iterations[r.kept].assessment.valid for r in refinements),
        },
        "calls": {stage: counts["calls"] for stage, counts in sorted(recorded.items())},
        "recorded_calls": {stage: dict(counts) for stage, counts in sorted(recorded.items())},
        "readings": readings(refinements),
    }


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_plots(directory: Path, refinements: list[Refinement], summary: dict[str, Any]) -> None:
    rows = []
    for metric, phases in summary["figure2"].items():
        for phase in ("before", "after"):
            stats = phases[phase]
            rows.append([f"{metric} {phase}", metric, phase, stats["mean"], stats["sd"], stats["n"]])
    _write_csv(directory / "figure2.csv", ["bar", "metric", "phase", "mean", "sd", "n"], rows)
    trajectory = [
        [f"{r.item} {metric}", r.item, it.iteration, metric, judged.score]
        for r in refinements
        for it in r.iterations
        for metric, judged in it.metrics.items()
        if judged.score is not None
    ]
    _write_csv(
        directory / "scores_by_iteration.csv", ["series", "item", "iteration", "metric", "score"], trajectory
    )
    _write_csv(
        directory / "iterations_per_item.csv",
        ["item", "iterations", "stop_reason"],
        [[r.item, len(r.iterations) - 1, r.stop_reason] for r in refinements],
    )


def _fmt(stats: dict[str, Any]) -> str:
    if stats["mean"] is None:
        return f"— (n=0, {stats['unscored']} unscored)"
    sd = "—" if stats["sd"] is None else f"{stats['sd']:.2f}"
    extra = f", {stats['unscored']} unscored" if stats["unscored"] else ""
    return f"{stats['mean']:.2f} ± {sd} (n={stats['n']}{extra})"


def unscored_why(summary: dict[str, Any]) -> str:
    """The reasons the judgements left unscored were given, with a hint ('' when none were)."""
    readings = summary.get("readings", {})
    return unscored_reasons(
        reason for reason, count in readings.items() if reason not in READ_REASONS for _ in range(count)
    )


def markdown_report(summary: dict[str, Any], model: str) -> str:
    lines = [
        "# judgeloop report",
        "",
        f"Model: `{model}`. Items: {summary['items']}; refined: {summary['refined_items']}; "
        f"mean iterations of the refined: {summary['mean_iterations']}.",
        f"Stop reasons: {', '.join(f'{k} {v}' for k, v in summary['stop_reasons'].items())}.",
        *([f"Why judgements were unscored: {why}."] if (why := unscored_why(summary)) else []),
        f"Invalid assessments: {summary['invalid_assessments']['initial']} initially, "
        f"{summary['invalid_assessments']['kept']} among those kept.",
        "",
        "## Judge scores before and after the feedback loop (the paper's Figure 2)",
        "",
        "| metric | ours before | ours after | paper before | paper after |",
        "|---|---|---|---|---|",
    ]
    for metric, phases in summary["figure2"].items():
        paper = PAPER_FIGURE2.get(metric)
        paper_cells = [f"{m:.2f} ± {s:.2f}" for m, s in paper] if paper else ["—", "—"]
        lines.append(
            f"| {metric} | {_fmt(phases['before'])} | {_fmt(phases['after'])} | "
            + " | ".join(paper_cells)
            + " |"
        )
    lines += [
        "",
        "Mean ± sample SD over the scored replies; unscored replies (no readable score after the re-asks) "
        "are counted, never averaged in. The paper's numbers are 142 DAIC-WOZ participants judged by "
        "Gemma 3 27B; ours are whatever params.yaml ran, so compare the shape, not the values.",
        "",
        f"LLM calls per stage: {', '.join(f'{k} {v}' for k, v in summary['calls'].items())}.",
        "",
    ]
    return "\n".join(lines)
