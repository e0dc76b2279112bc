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
from collections.abc import Iterable, Mapping
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from pipeline.judges.scores.reading import READ_REASONS
from pipeline.judges.unscored import unscored_reasons
from pipeline.llm.files import AtomicText
from pipeline.loops.results import Refinement
from pipeline.reports.markdown import code_span, table_cell

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


# The design's LLM stages, whose recorded calls the metrics count (pipeline.data.recorded_calls).
LLM_STAGES = ("assess", "judge", "refine")
_PHASES = ("before", "after")


class MetricsTally:
    """compute_metrics's numbers taken one item at a time (the aggregate stage streams
    refinement.jsonl): counts, and for Figure 2 each item's before and after score per metric (a
    few numbers an item, kept so that means and SDs are computed exactly as over the whole list)."""

    def __init__(self, metrics: tuple[str, ...]) -> None:
        self.metrics = tuple(dict.fromkeys(metrics))
        self.items = 0
        self.scores: dict[tuple[str, str], list[int | float | None]] = {
            (m, phase): [] for m in self.metrics for phase in _PHASES
        }
        self.refined_iterations: list[int] = []  # of each refined item
        self.stop_reasons: Counter[str] = Counter()
        self.invalid = {"initial": 0, "kept": 0}
        self.readings: Counter[str] = Counter()

    def add(self, r: Refinement) -> None:
        self.items += 1
        for phase, at in zip(_PHASES, (0, r.kept), strict=True):
            judged = r.iterations[at].metrics
            for m in self.metrics:
                if m in judged:
                    self.scores[m, phase].append(judged[m].score)
        if len(r.iterations) > 1:
            self.refined_iterations.append(len(r.iterations) - 1)
        self.stop_reasons[r.stop_reason] += 1
        self.invalid["initial"] += not r.iterations[0].assessment.valid
        self.invalid["kept"] += not r.iterations[r.kept].assessment.valid
        self.readings.update(
            judged.reading for it in r.iterations for judged in it.metrics.values() if not judged.carried_over
        )

    def figure2(self) -> dict[str, Any]:
        """Per metric, the scores before (iteration 0) and after (the kept iteration)."""
        return {m: {phase: _summary(self.scores[m, phase]) for phase in _PHASES} for m in self.metrics}

    def summary(self, recorded: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Any]:
        """`recorded`: each LLM stage's call counts, from its recording (what `judgeloop audit`
        shows; pipeline.data.recorded_calls.stage_call_counts); None: no recording to count from."""
        recorded = recorded or {}
        refined = self.refined_iterations
        return {
            "items": self.items,
            "figure2": self.figure2(),
            "refined_items": len(refined),
            "mean_iterations": round(fmean(refined), 4) if refined else 0,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "invalid_assessments": dict(self.invalid),
            "calls": {stage: counts["calls"] for stage, counts in sorted(recorded.items())},
            "recorded_calls": {stage: dict(counts) for stage, counts in sorted(recorded.items())},
            # How each judgement's score was read (pipeline.judges.scores reasons), so a decimal
            # rounded or left unscored (judge.decimal_scores) and a prose verdict are counted, not
            # hidden in the means.
            "readings": dict(sorted(self.readings.items())),
        }


def _tally(refinements: Iterable[Refinement], metrics: tuple[str, ...]) -> MetricsTally:
    tally = MetricsTally(metrics)
    for r in refinements:
        tally.add(r)
    return tally


def figure2(refinements: Iterable[Refinement], metrics: tuple[str, ...]) -> dict[str, Any]:
    """Per metric, the scores before (iteration 0) and after (the kept iteration)."""
    return _tally(refinements, metrics).figure2()


def compute_metrics(
    refinements: Iterable[Refinement],
    metrics: tuple[str, ...],
    recorded: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """MetricsTally over `refinements`, in one pass (see MetricsTally.summary for `recorded`)."""
    return _tally(refinements, metrics).summary(recorded)


def _write_csv(path: Path, header: list[str], rows: Iterable[list[Any]]) -> None:
    with AtomicText(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _figure2_rows(summary: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for metric, phases in summary["figure2"].items():
        for phase in _PHASES:
            stats = phases[phase]
            rows.append([f"{metric} {phase}", metric, phase, stats["mean"], stats["sd"], stats["n"]])
    return rows


class PlotWriter:
    """The plots' tables, written as the items come (scores_by_iteration.csv and
    iterations_per_item.csv a row at a time; figure2.csv from the summary at `close`), so that a
    whole run's rows are never held. A context manager: the files are closed however it ends."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory  # made by its first table's writer (files.folder_to_write)
        # Each replaces its file in one step when closed whole (a failed run keeps the last good one).
        self._files = [
            AtomicText(directory / name) for name in ("scores_by_iteration.csv", "iterations_per_item.csv")
        ]
        self._trajectory, self._iterations = (csv.writer(f.handle, lineterminator="\n") for f in self._files)
        self._trajectory.writerow(["series", "item", "iteration", "metric", "score"])
        self._iterations.writerow(["item", "iterations", "stop_reason"])

    def add(self, r: Refinement) -> None:
        self._trajectory.writerows(
            [f"{r.item} {metric}", r.item, it.iteration, metric, judged.score]
            for it in r.iterations
            for metric, judged in it.metrics.items()
            if judged.score is not None
        )
        self._iterations.writerow([r.item, len(r.iterations) - 1, r.stop_reason])

    def close(self, summary: dict[str, Any] | None = None) -> None:
        """Close the item tables; with `summary`, write figure2.csv from it."""
        for table in self._files:
            table.commit()
        if summary is not None:
            _write_csv(
                self.directory / "figure2.csv",
                ["bar", "metric", "phase", "mean", "sd", "n"],
                _figure2_rows(summary),
            )

    def __enter__(self) -> PlotWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        for table in self._files:
            table.discard()  # a table not closed whole leaves the old file (after close: nothing to do)


def write_plots(directory: Path, refinements: Iterable[Refinement], summary: dict[str, Any]) -> None:
    with PlotWriter(directory) as plots:
        for r in refinements:
            plots.add(r)
        plots.close(summary)


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
        f"Model: {code_span(model)}. Items: {summary['items']}; refined: {summary['refined_items']}; "
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
            f"| {table_cell(metric)} | {_fmt(phases['before'])} | {_fmt(phases['after'])} | "
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
