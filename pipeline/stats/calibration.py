"""A judge's scores against people's ratings, per metric: the rows in memory, joined and measured.

Any source of judgements feeds this: `judgeloop calibrate` reads two JSONL files into these rows;
an experiment's own judgements can be turned into `JudgedItem`s the same way (no export step).
An unscored item (the judge wrote no readable score) is counted and left out, never given a value.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.data.ratings import HumanRatings, JudgedItem
from pipeline.stats.bootstrap import Estimate
from pipeline.stats.correlation import LEVELS, STATISTICS, Level, LevelResult, Pair, correlate
from pipeline.stats.reliability import alpha_undefined, judge_human_alpha, ordinal_alpha
from pipeline.stats.scales import Scale, scale_difference, scale_of

ScoreKind = Literal["score", "weighted_score"]


@dataclass(frozen=True)
class ScoreCalibration:
    """One kind of judge score (argmax or weighted) of one metric against the mean human rating."""

    kind: ScoreKind
    items_used: int
    items_unscored: int
    groups: int
    levels: Mapping[Level, LevelResult]
    alpha_judge_human: float
    alpha_undefined: str | None = None  # why alpha_judge_human is NaN, where it is


@dataclass(frozen=True)
class MetricCalibration:
    metric: str
    items_judged: int  # rows of this metric in the judge's scores
    items_without_human: int  # of those, how many no human rated (left out)
    human_alpha: float  # the people among themselves: the ceiling
    ratings_per_item: tuple[int, int]  # fewest and most ratings an item has
    kinds: tuple[ScoreCalibration, ...]
    human_alpha_undefined: str | None = None  # why human_alpha is NaN, where it is
    judge_scale: Scale | None = None  # the scale the judge's scores are on, read from them
    human_scale: Scale | None = None  # the people's, read from their individual ratings
    scale_difference: str | None = None  # what differs between the two, in words; None: the same


def calibrate(
    scores: Sequence[JudgedItem],
    humans: Iterable[HumanRatings],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> list[MetricCalibration]:
    """Per metric (in the order first met in `scores`): every level's correlations with intervals,
    alpha judge-vs-human and the humans' own alpha. Metrics with no human-rated item are left out:
    the caller decides whether that is an error."""
    by_key = {(h.item, h.metric): h for h in humans}
    by_metric: dict[str, list[JudgedItem]] = defaultdict(list)
    for row in scores:
        by_metric[row.metric].append(row)
    results = []
    for metric, rows in by_metric.items():
        rated = [row for row in rows if (row.item, metric) in by_key]
        if rated:
            results.append(_calibrate_metric(metric, rows, rated, by_key, resamples, seed))
    return results


def _calibrate_metric(
    metric: str,
    rows: Sequence[JudgedItem],
    rated: Sequence[JudgedItem],
    by_key: Mapping[tuple[str, str], HumanRatings],
    resamples: int,
    seed: int,
) -> MetricCalibration:
    people = [by_key[row.item, metric] for row in rated]
    kinds: list[ScoreKind] = ["score"]
    if any(row.weighted_score is not None for row in rated):
        kinds.append("weighted_score")
    counts = [sum(r is not None for r in h.ratings) for h in people]
    judge_scale = scale_of(v for row in rated for v in (row.score, row.weighted_score) if v is not None)
    human_scale = scale_of(r for h in people for r in h.ratings if r is not None)
    return MetricCalibration(
        metric=metric,
        items_judged=len(rows),
        items_without_human=len(rows) - len(rated),
        human_alpha=ordinal_alpha([h.ratings for h in people]),
        ratings_per_item=(min(counts), max(counts)),
        kinds=tuple(_calibrate_kind(kind, rated, by_key, resamples, seed) for kind in kinds),
        human_alpha_undefined=alpha_undefined([h.ratings for h in people]),
        judge_scale=judge_scale,
        human_scale=human_scale,
        scale_difference=scale_difference(judge_scale, human_scale),
    )


def _calibrate_kind(
    kind: ScoreKind,
    rows: Sequence[JudgedItem],
    by_key: Mapping[tuple[str, str], HumanRatings],
    resamples: int,
    seed: int,
) -> ScoreCalibration:
    pairs = []
    for row in rows:
        value = row.score if kind == "score" else row.weighted_score
        if value is not None:
            human = by_key[row.item, row.metric].mean
            pairs.append(Pair(row.item, row.group, row.system, float(value), human))
    levels = correlate(pairs, resamples=resamples, seed=seed) if pairs else {}
    as_raters = [(p.judge, p.human) for p in pairs]
    return ScoreCalibration(
        kind=kind,
        items_used=len(pairs),
        items_unscored=len(rows) - len(pairs),
        groups=len({p.group for p in pairs}),
        levels=levels,
        alpha_judge_human=judge_human_alpha([p.judge for p in pairs], [p.human for p in pairs])
        if pairs
        else math.nan,
        alpha_undefined=alpha_undefined(as_raters) if pairs else "no scored item",
    )


# --- machine-readable form ----------------------------------------------------------------------


def _number(value: float) -> float | None:
    # JSON has no NaN: an undefined statistic is null. Rounded so that reruns on another machine
    # (another BLAS summation order) still give the same bytes.
    return None if math.isnan(value) else round(value, 6)


def _estimate_data(estimate: Estimate) -> dict[str, Any]:
    return {
        "value": _number(estimate.value),
        "ci95": [_number(estimate.low), _number(estimate.high)],
        "undefined_resamples": estimate.undefined_resamples,
    }


def _why_undefined(name: str, reason: str | None) -> dict[str, str]:
    # Beside a null alpha, why it is null; absent where alpha has a value.
    return {} if reason is None else {f"{name}_undefined": reason}


def _scale_data(scale: Scale | None) -> dict[str, Any] | None:
    if scale is None:
        return None
    return {"low": scale.low, "high": scale.high, "integers": scale.integers, "scale": scale.name}


def _scales_data(result: MetricCalibration) -> dict[str, Any]:
    return {
        "judge": _scale_data(result.judge_scale),
        "human": _scale_data(result.human_scale),
        "difference": result.scale_difference,
    }


def calibration_data(results: Sequence[MetricCalibration], *, resamples: int, seed: int) -> dict[str, Any]:
    """The results as plain JSON data (for --json and metrics.json)."""
    metrics: dict[str, Any] = {}
    for result in results:
        kinds: dict[str, Any] = {}
        for kind in result.kinds:
            kinds[kind.kind] = {
                "items_used": kind.items_used,
                "items_unscored": kind.items_unscored,
                "groups": kind.groups,
                "alpha_judge_vs_mean_human": _number(kind.alpha_judge_human),
                **_why_undefined("alpha_judge_vs_mean_human", kind.alpha_undefined),
                "levels": {
                    level: {
                        "units": kind.levels[level].units,
                        "skipped": dict(kind.levels[level].skipped),
                        **{s: _estimate_data(kind.levels[level].estimates[s]) for s in STATISTICS},
                    }
                    for level in LEVELS
                    if level in kind.levels
                },
            }
        metrics[result.metric] = {
            "items_judged": result.items_judged,
            "items_without_human": result.items_without_human,
            "human_alpha": _number(result.human_alpha),
            **_why_undefined("human_alpha", result.human_alpha_undefined),
            "scales": _scales_data(result),
            "ratings_per_item": list(result.ratings_per_item),
            **kinds,
        }
    return {"bootstrap": {"resamples": resamples, "seed": seed, "unit": "group"}, "metrics": metrics}
