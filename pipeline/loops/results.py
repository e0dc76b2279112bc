"""What the feedback loop produces, per item: every iteration, and why the loop stopped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.data.jsonl import Result, read_jsonl
from pipeline.judges.rubric.results import Assessment, MetricJudgement, in_order


class Iteration(Result):
    iteration: int
    assessment: Assessment
    metrics: dict[str, MetricJudgement]
    low_metrics: tuple[str, ...]  # what triggered (or would trigger) the next iteration
    regeneration_prompt: str | None = None  # the feedback prompt that produced this assessment


class Refinement(Result):
    item: str
    iterations: tuple[Iteration, ...]
    stop_reason: str  # passed_initially | passed | max_iterations | disabled | all_unscored | stage_unscored
    kept: int  # index of the iteration reported as "after"


def read_refinements(path: Path, order: Sequence[str]) -> list[Refinement]:
    """The refine stage's output, each iteration's metrics in the configured order (judge.metrics)."""
    return [
        r.model_copy(
            update={
                "iterations": tuple(
                    it.model_copy(update={"metrics": in_order(it.metrics, order)}) for it in r.iterations
                )
            }
        )
        for r in read_jsonl(path, Refinement)
    ]
