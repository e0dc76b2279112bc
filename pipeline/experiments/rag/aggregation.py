"""The RAG judge's numbers, from its judgements alone: score distributions per dimension, agreement
with the human labels, and whether the judge's confidence predicts disagreement with people.

Agreement, per binary human label and per 0-1 score (each dimension, the weighted overall, the
simple mean, and the log-probability-weighted overall where every row has one): AUROC with a
bootstrap 95% interval over rows, and the balanced accuracy at a threshold chosen on a random half
of the rows, measured on the other half (pipeline.stats.classification). Failed judgements are left out
of every statistic and counted; a statistic that cannot be computed (one class absent, a constant
score) is null with the reason, never a number.

Confidence: for each label in `rag.label_scores`, a row "agrees" with people when its score is on
the label's side of the middle (>= 0.75 for a 1, <= 0.25 for a 0; a middling 0.5 agrees with
neither). The AUROC of a confidence for telling agreeing rows from the others says whether it
predicts disagreement (0.5: not at all); compared for the self-reported confidence and the
log-probability of the score written.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import Any

from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.likert import LIKERT_VALUES
from pipeline.judges.structured.judge import ScoredDimensions
from pipeline.reports.markdown import code_span, table_cell
from pipeline.stats.bootstrap import Estimate
from pipeline.stats.classification import auroc_estimate, held_out_balanced_accuracy

DIGITS = 4


def _num(value: float) -> float | None:
    return None if math.isnan(value) else round(value, DIGITS)


def _estimate(est: Estimate) -> dict[str, Any]:
    return {"value": _num(est.value), "low": _num(est.low), "high": _num(est.high)}


def _summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "mean": round(fmean(values), DIGITS) if values else None,
        "sd": round(stdev(values), DIGITS) if len(values) > 1 else None,
    }


def score_table(verdicts: Sequence[ScoredNumbers], settings: RagSettings) -> dict[str, list[float]]:
    """Every 0-1 score compared with the labels, by name, one value per scored row."""
    table = {name: [v.dimensions[name].value for v in verdicts] for name in settings.dimensions.names}
    table["overall"] = [v.overall for v in verdicts]
    table["overall_simple"] = [v.overall_simple for v in verdicts]
    expected = [v.overall_expected for v in verdicts]
    if verdicts and all(e is not None for e in expected):
        table["overall_expected"] = [float(e) for e in expected if e is not None]
    return table


def _agreement(scores: list[float], labels: list[bool], settings: RagSettings) -> dict[str, Any]:
    out: dict[str, Any] = {
        "auroc": _estimate(
            auroc_estimate(scores, labels, resamples=settings.bootstrap_resamples, seed=settings.seed)
        )
    }
    try:
        held = held_out_balanced_accuracy(
            scores, labels, resamples=settings.bootstrap_resamples, seed=settings.seed
        )
    except ValueError as exc:
        out["balanced_accuracy"] = {"value": None, "undefined": str(exc)}
    else:
        out["balanced_accuracy"] = {
            **_estimate(held.balanced_accuracy),
            "threshold": round(held.threshold, DIGITS),
            "fit_rows": held.fit_rows,
            "eval_rows": held.eval_rows,
        }
    return out


def _agrees(value: float, label: int) -> bool:
    return value >= 0.75 if label else value <= 0.25


def _confidence(pairs: list[tuple[RowNumbers, ScoredNumbers]], settings: RagSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, score_name in sorted(settings.label_scores.items()):
        rows = [(r, v) for r, v in pairs if label in r.labels and score_name in v.dimensions]
        if not rows:
            continue
        agree = [_agrees(v.dimensions[score_name].value, r.labels[label]) for r, v in rows]
        entry: dict[str, Any] = {
            "score": score_name,
            "agree": sum(agree),
            "disagree": len(agree) - sum(agree),
        }
        self_reported = [v.confidence_value for _, v in rows]
        entry["self_reported"] = _estimate(
            auroc_estimate(self_reported, agree, resamples=settings.bootstrap_resamples, seed=settings.seed)
        )
        logprob = [v.dimensions[score_name].logprob for _, v in rows]
        entry["logprob"] = (
            _estimate(
                auroc_estimate(
                    [lp.chosen_probability for lp in logprob if lp is not None],
                    agree,
                    resamples=settings.bootstrap_resamples,
                    seed=settings.seed,
                )
            )
            if all(lp is not None for lp in logprob)
            else None
        )
        out[label] = entry
    return out


def _dimensions(verdicts: Sequence[ScoredNumbers], settings: RagSettings) -> dict[str, Any]:
    """Per dimension: its weight, how often each 1-5 score was given, and the 0-1 values' summary."""
    dimensions: dict[str, Any] = {}
    for dim in settings.dimensions.items:
        scores = [v.dimensions[dim.name].score for v in verdicts]
        dimensions[dim.name] = {
            "weight": dim.weight,
            "counts": {str(s): scores.count(s) for s in LIKERT_VALUES},
            **_summary([v.dimensions[dim.name].value for v in verdicts]),
        }
    return dimensions


def _agreement_table(
    pairs: list[tuple[RowNumbers, ScoredNumbers]], table: dict[str, list[float]], settings: RagSettings
) -> dict[str, Any]:
    """Per human label: its positives and negatives, and every score's agreement with it."""
    agreement: dict[str, Any] = {}
    for label in sorted({name for r, _ in pairs for name in r.labels}):
        rows = [i for i, (r, _) in enumerate(pairs) if label in r.labels]
        flags = [bool(pairs[i][0].labels[label]) for i in rows]
        agreement[label] = {
            "positives": sum(flags),
            "negatives": len(flags) - sum(flags),
            "scores": {
                name: _agreement([values[i] for i in rows], flags, settings) for name, values in table.items()
            },
        }
    return agreement


@dataclass(frozen=True, slots=True)
class ChosenProbability:
    chosen_probability: float


@dataclass(frozen=True, slots=True)
class DimensionNumbers:
    score: int
    value: float
    logprob: ChosenProbability | None


@dataclass(frozen=True, slots=True)
class ScoredNumbers:
    dimensions: dict[str, DimensionNumbers]
    overall: float
    overall_simple: float
    overall_expected: float | None
    confidence_value: float
    attempts: int


@dataclass(frozen=True, slots=True)
class FailedNumbers:
    kind: str


@dataclass(frozen=True, slots=True)
class RowNumbers:
    """What compute_metrics reads of a row's judgement, a few numbers (no reasoning, reply, call
    keys, samples or log-probability tables): the aggregate stage holds this of every row, the
    rest only while the page shows that row."""

    labels: dict[str, int]
    judgement: ScoredNumbers | FailedNumbers


def numbers_only(judged: RagJudgement | RowNumbers) -> RowNumbers:
    if isinstance(judged, RowNumbers):
        return judged
    kept = judged.judgement
    if not isinstance(kept, ScoredDimensions):
        return RowNumbers(judged.labels, FailedNumbers(kept.kind))
    dimensions = {
        name: DimensionNumbers(
            d.score, d.value, None if d.logprob is None else ChosenProbability(d.logprob.chosen_probability)
        )
        for name, d in kept.dimensions.items()
    }
    return RowNumbers(
        judged.labels,
        ScoredNumbers(
            dimensions,
            kept.overall,
            kept.overall_simple,
            kept.overall_expected,
            kept.confidence_value,
            kept.attempts,
        ),
    )


# The design's LLM stage, whose recorded calls the metrics count (pipeline.data.recorded_calls).
LLM_STAGES = ("rag_judge",)


def compute_metrics(
    judgements: Sequence[RagJudgement | RowNumbers],
    settings: RagSettings,
    recorded: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """`recorded`: the judge stage's call counts, from its recording (what `judgeloop audit` shows);
    `reasked` (rows asked again, scored or not) is theirs. None: no recording to count from."""
    recorded = recorded or {}
    rows = [numbers_only(r) for r in judgements]
    pairs = [(r, r.judgement) for r in rows if isinstance(r.judgement, ScoredNumbers)]
    verdicts = [v for _, v in pairs]
    failures = Counter(r.judgement.kind for r in rows if isinstance(r.judgement, FailedNumbers))
    table = score_table(verdicts, settings)
    return {
        "rows": len(rows),
        "scored": len(verdicts),
        "failed": dict(sorted(failures.items())),
        "reasked": sum(counts["reasked"] for counts in recorded.values()),
        "scored_after_reask": sum(1 for v in verdicts if v.attempts > 1),
        "recorded_calls": {stage: dict(counts) for stage, counts in sorted(recorded.items())},
        "prompt_mode": settings.prompt_mode,
        "dimensions": _dimensions(verdicts, settings),
        "overall": {name: _summary(table[name]) for name in ("overall", "overall_simple")},
        "confidence_self_reported": _summary([v.confidence_value for v in verdicts]),
        "agreement": _agreement_table(pairs, table, settings),
        "confidence_vs_disagreement": _confidence(pairs, settings),
    }


def _cell(est: dict[str, Any] | None) -> str:
    if est is None or est.get("value") is None:
        return "—"
    low, high = est.get("low"), est.get("high")
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{est['value']:.2f}{interval}"


def markdown_report(metrics: dict[str, Any], model: str) -> str:
    failed = ", ".join(f"{k} {v}" for k, v in metrics["failed"].items()) or "none"
    lines = [
        "# RAG judge",
        "",
        f"Model {code_span(model)}, prompt mode {code_span(metrics['prompt_mode'])}. "
        f"Rows {metrics['rows']}, scored {metrics['scored']} ({metrics['scored_after_reask']} after a "
        f"re-ask), failed: {failed}; {metrics['reasked']} asked again.",
        "",
        "## Scores (1-5 counts; mean on 0-1)",
        "",
        "| dimension | weight | 1 | 2 | 3 | 4 | 5 | mean ± sd |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, dim in metrics["dimensions"].items():
        counts = " | ".join(str(dim["counts"][str(s)]) for s in LIKERT_VALUES)
        sd = "—" if dim["sd"] is None else f"{dim['sd']:.2f}"
        mean = "—" if dim["mean"] is None else f"{dim['mean']:.2f}"
        lines.append(f"| {table_cell(name)} | {dim['weight']} | {counts} | {mean} ± {sd} |")
    for label, entry in metrics["agreement"].items():
        lines += [
            "",
            f"## Agreement with human {code_span(label)} "
            f"({entry['positives']} positive, {entry['negatives']} negative)",
            "",
            "| score | AUROC [95% CI] | balanced accuracy, held-out half [95% CI] | threshold |",
            "|---|---|---|---|",
        ]
        for name, stats in entry["scores"].items():
            ba = stats["balanced_accuracy"]
            threshold = "—" if ba.get("threshold") is None else f"{ba['threshold']:.3f}"
            why = f" ({ba['undefined']})" if ba.get("undefined") else ""
            lines.append(f"| {table_cell(name)} | {_cell(stats['auroc'])} | {_cell(ba)}{why} | {threshold} |")
    if metrics["confidence_vs_disagreement"]:
        lines += [
            "",
            "## Does confidence predict agreement with people? (AUROC of confidence, agreeing vs not)",
            "",
            "| label | score | agree / disagree | self-reported | log-probability |",
            "|---|---|---|---|---|",
        ]
        for label, entry in metrics["confidence_vs_disagreement"].items():
            lines.append(
                f"| {table_cell(label)} | {table_cell(entry['score'])} | "
                f"{entry['agree']} / {entry['disagree']} | "
                f"{_cell(entry['self_reported'])} | {_cell(entry['logprob'])} |"
            )
    lines += [
        "",
        "AUROC: the chance that a row people labelled 1 outscores one labelled 0 (0.5 = chance); "
        "intervals are bootstrap percentiles over rows. Failed judgements are counted above and left "
        "out of every statistic.",
        "",
    ]
    return "\n".join(lines)
