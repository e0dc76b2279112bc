"""metrics.json and the per-item table of the regeneration experiment, from its records alone.

"before" is the original's evaluation; "after" is the delivered answer's. The latency an item adds
is what the user would wait for beyond the answer itself: its evaluation, then every regeneration
with its evaluation, in the durations recorded with each call. Percentiles are over items, with
linear interpolation between the closest ranks; an item whose duration is unknown is counted,
never taken as zero. Unscored answers are counted beside the means, never averaged in.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean, quantiles
from typing import Any

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.params import RegenParams
from pipeline.judges.quality.results import EvaluatedAnswer
from pipeline.llm.files import AtomicText
from pipeline.llm.latency import total_seconds
from pipeline.loops.regenerate import Regeneration
from pipeline.numbers import fsum


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _mean(values: Sequence[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    return {
        "mean": _round(fmean(known)) if known else None,
        "n": len(known),
        "unscored": len(values) - len(known),
    }


def _percentiles(values: Sequence[float | None]) -> dict[str, Any]:
    known = sorted(v for v in values if v is not None)
    out: dict[str, Any] = {"n": len(known), "unmeasured": len(values) - len(known)}
    if len(known) == 1:
        out |= {"p50": _round(known[0]), "p95": _round(known[0]), "total": _round(known[0])}
    elif known:
        cuts = quantiles(known, n=100, method="inclusive")
        out |= {"p50": _round(cuts[49]), "p95": _round(cuts[94]), "total": _round(fsum(known))}
    return out


def evaluation_s(r: Regeneration) -> float | None:
    return r.attempts[0].calls.total_s


def regeneration_s(r: Regeneration) -> float | None:
    return total_seconds(a.seconds for a in r.attempts[1:])


def _label_table(
    regenerations: Sequence[Regeneration], rows: dict[str, RagRow], answers: str
) -> dict[str, Any]:
    if answers != "given":
        return {
            "applies": False,
            "why": "the labels judge each row's given answer; with regen_generate.answers=generate the "
            "originals are the model's own answers, which no person labelled",
        }
    table: dict[str, Any] = {"applies": True}
    names = sorted({name for row in rows.values() for name in row.labels})
    for name in names:
        groups: dict[str, Any] = {}
        for value in sorted({row.labels[name] for row in rows.values() if name in row.labels}):
            group = [r for r in regenerations if rows[r.item].labels.get(name) == value]
            groups[str(value)] = {
                "items": len(group),
                "regenerated": sum(len(r.attempts) > 1 for r in group),
                "delivered_regeneration": sum(r.kept > 0 for r in group),
                "quality_before": _mean([r.attempts[0].quality for r in group]),
                "quality_after": _mean([r.delivered.quality for r in group]),
            }
        table[name] = groups
    return table


def _share(part: int, whole: int) -> float | None:
    return _round(part / whole) if whole else None


def _quality(regenerations: Sequence[Regeneration], regenerated: Sequence[Regeneration]) -> dict[str, Any]:
    return {
        "before": _mean([r.attempts[0].quality for r in regenerations]),
        "after": _mean([r.delivered.quality for r in regenerations]),
        "regenerated_before": _mean([r.attempts[0].quality for r in regenerated]),
        "regenerated_after": _mean([r.delivered.quality for r in regenerated]),
        "regenerated_new": _mean([a.quality for r in regenerated for a in r.attempts[1:]]),
    }


def _calls(regenerations: Sequence[Regeneration]) -> dict[str, Any]:
    added = sum(a.call_count for r in regenerations for a in r.attempts[1:])
    return {
        "original": sum(r.attempts[0].call_count for r in regenerations),  # generation + evaluation
        "added": added,  # regenerations and their evaluations
        "added_per_item": _share(added, len(regenerations)),
    }


def _latency(regenerations: Sequence[Regeneration]) -> dict[str, Any]:
    return {
        "evaluation": _percentiles([evaluation_s(r) for r in regenerations]),
        "regeneration": _percentiles([regeneration_s(r) for r in regenerations if len(r.attempts) > 1]),
        "added": _percentiles([total_seconds([evaluation_s(r), regeneration_s(r)]) for r in regenerations]),
    }


def _below(regenerations: Sequence[Regeneration], threshold: float) -> int:
    return sum(r.attempts[0].quality is not None and r.attempts[0].quality < threshold for r in regenerations)


def _numbers(attempt: EvaluatedAnswer) -> EvaluatedAnswer:
    answer = attempt.answer.model_copy(update={"text": "", "instruction": None})
    return attempt.model_copy(update={"answer": answer, "evaluation": None, "failure": None, "samples": None})


def numbers_only(r: Regeneration) -> Regeneration:
    """What compute_metrics, write_items and the page's table of items read of an item, its texts
    left out (answers, the evaluator's issues and hints, the regeneration prompts' feedback): the
    aggregate stage holds this of every item, the rest only while the page shows that item."""
    return r.model_copy(update={"attempts": tuple(map(_numbers, r.attempts)), "stop_detail": ""})


# The design's LLM stages, whose recorded calls the metrics count (pipeline.data.recorded_calls).
LLM_STAGES = ("regen_evaluate", "regen_generate", "regen_regenerate")


def compute_metrics(
    params: RegenParams,
    regenerations: Sequence[Regeneration],
    rows: dict[str, RagRow],
    recorded: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """`recorded`: each LLM stage's call counts, from its recording (what `judgeloop audit` shows;
    pipeline.data.recorded_calls); None: no recording to count from."""
    recorded = recorded or {}
    regenerated = [r for r in regenerations if len(r.attempts) > 1]
    kept_original = [r for r in regenerated if r.kept == 0]
    settings = params.regenerate
    return {
        "items": len(regenerations),
        "enabled": settings.enabled,
        "threshold": settings.threshold,
        "below_threshold_initially": _below(regenerations, settings.threshold),
        "regenerated": len(regenerated),
        "share_regenerated": _share(len(regenerated), len(regenerations)),
        "kept_original": len(kept_original),  # regenerated, no gain: the original delivered
        "share_kept_original": _share(len(kept_original), len(regenerated)),
        "stop_reasons": dict(sorted(Counter(r.stop_reason for r in regenerations).items())),
        "quality": _quality(regenerations, regenerated),
        "calls": _calls(regenerations),
        "recorded_calls": {stage: dict(counts) for stage, counts in sorted(recorded.items())},
        "latency_s": _latency(regenerations),
        "human_labels": _label_table(regenerations, rows, params.regen_generate.answers),
    }


ITEM_COLUMNS = [
    "item",
    "stop_reason",
    "regenerations",
    "kept",
    "quality_before",
    "quality_after",
    "generation_s",
    "evaluation_s",
    "regeneration_s",
    "calls",
]


def write_items(path: Path, regenerations: Sequence[Regeneration]) -> None:
    """One row per item: what the policy did, and the latency its evaluation and regeneration added."""
    with AtomicText(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(ITEM_COLUMNS)
        for r in regenerations:
            writer.writerow(
                [
                    r.item,
                    r.stop_reason,
                    len(r.attempts) - 1,
                    r.kept,
                    _round(r.attempts[0].quality),
                    _round(r.delivered.quality),
                    _round(r.attempts[0].answer.calls.total_s),
                    _round(evaluation_s(r)),
                    _round(regeneration_s(r)) if len(r.attempts) > 1 else 0.0,
                    sum(a.call_count for a in r.attempts),
                ]
            )
