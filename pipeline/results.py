"""What the stages write: one JSON line per item, sorted by item, in canonical JSON.

Same results, same bytes: a replay must reproduce every output exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import InputError
from pipeline.llm.keys import canonical_json


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Assessment(Result):
    item: str
    text: str  # the model's last reply, exactly as written
    sections: dict[str, str] | None  # the XML sections, when the reply validated
    valid: bool
    problem: str | None = None  # why the last reply failed validation
    call_keys: tuple[str, ...]  # every call made, re-asks included
    unverified_quotes: tuple[str, ...] = ()


class MetricJudgement(Result):
    metric: str
    score: int | None  # None: unscored after every re-ask; never a default
    reading: str  # how the score was read (pipeline.scores reasons)
    explanation: str  # the judge's last reply, exactly as written
    call_keys: tuple[str, ...]
    carried_over: bool = False  # refine.rejudge=low: not re-judged this iteration


def in_order(metrics: dict[str, MetricJudgement], order: Sequence[str]) -> dict[str, MetricJudgement]:
    """The metrics in the configured order (judge.metrics). The files are canonical JSON with sorted
    keys, so what is read back lists them alphabetically; prompts and reports follow the config."""
    return {name: metrics[name] for name in order if name in metrics} | {
        name: judged for name, judged in metrics.items() if name not in order
    }


class Judgement(Result):
    item: str
    metrics: dict[str, MetricJudgement]


class Iteration(Result):
    iteration: int
    assessment: Assessment
    metrics: dict[str, MetricJudgement]
    low_metrics: tuple[str, ...]  # what triggered (or would trigger) the next iteration
    regeneration_prompt: str | None = None  # the feedback prompt that produced this assessment


class Refinement(Result):
    item: str
    iterations: tuple[Iteration, ...]
    stop_reason: str  # passed_initially | passed | max_iterations | disabled
    kept: int  # index of the iteration reported as "after"


R = TypeVar("R", bound=Result)


def write_jsonl(path: Path, results: Iterable[Result]) -> None:
    rows = sorted(results, key=lambda r: str(getattr(r, "item", "")))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(canonical_json(r.model_dump(mode="json")) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


def read_jsonl(path: Path, model: type[R]) -> list[R]:
    if not path.exists():
        raise InputError(str(path), None, "file not found", "run the stage that writes it first (dvc repro)")
    out: list[R] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            out.append(model.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            raise InputError(
                str(path), number, f"not a {model.__name__} record ({exc})", "re-run the stage that writes it"
            ) from exc
    return out


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
