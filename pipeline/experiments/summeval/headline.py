"""SummEval's headline numbers: per dimension, how the judge's scores agree with the experts'
(summary-level Spearman of the written and of the probability-weighted score, Krippendorff's α)
and the experts' own α, the ceiling (`judgeloop compare`, the report index)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.experiments.design import Headline, Number, dig


def _at(metrics: Mapping[str, Any], dimension: str, path: str) -> Number | None:
    """The number at `path` under a dimension, whose name (from the metrics file) may hold a dot."""
    return dig(metrics, ("metrics", dimension, *path.split(".")))


def headline(metrics: Mapping[str, Any]) -> Headline:
    rows: Headline = []
    for dimension in metrics.get("metrics", {}):
        rows += [
            (f"{dimension}: Spearman, score", _at(metrics, dimension, "score.levels.summary.spearman.value")),
            (
                f"{dimension}: Spearman, weighted",
                _at(metrics, dimension, "weighted_score.levels.summary.spearman.value"),
            ),
            (
                f"{dimension}: α judge vs experts",
                _at(metrics, dimension, "weighted_score.alpha_judge_vs_mean_human"),
            ),
            (f"{dimension}: α among experts", _at(metrics, dimension, "human_alpha")),
        ]
    return rows
