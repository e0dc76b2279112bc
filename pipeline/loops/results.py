"""What the feedback loop produces, per item: every iteration, and why the loop stopped."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.data.jsonl import Result, iter_jsonl
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


def _in_order(r: Refinement, order: Sequence[str]) -> Refinement:
    iterations = tuple(it.model_copy(update={"metrics": in_order(it.metrics, order)}) for it in r.iterations)
    return r.model_copy(update={"iterations": iterations})


def iter_refinements(path: Path, order: Sequence[str]) -> Iterator[Refinement]:
    """The refine stage's output one item at a time, each iteration's metrics in the configured
    order (judge.metrics)."""
    for r in iter_jsonl(path, Refinement):
        yield _in_order(r, order)


def read_refinements(path: Path, order: Sequence[str]) -> list[Refinement]:
    """The refine stage's output, held whole (iter_refinements, or RefinementFile, reads it an item
    at a time)."""
    return list(iter_refinements(path, order))


@dataclass(frozen=True)
class RefinementFile:
    """The refine stage's output as something read again from the file each time it is iterated, an
    item at a time: a reader that needs two passes (the report: what every page shares, then the
    pages) holds one item, never the run's results."""

    path: Path
    order: tuple[str, ...]

    def __iter__(self) -> Iterator[Refinement]:
        return iter_refinements(self.path, self.order)
