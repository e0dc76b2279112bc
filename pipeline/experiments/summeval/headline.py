"""SummEval's headline numbers: per dimension, how the judge's scores agree with the experts'
(summary-level Spearman of the written and of the probability-weighted score, Krippendorff's α)
and the experts' own α, the ceiling (`judgeloop compare`, the report index)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.experiments.design import Headline, dig


def headline(metrics: Mapping[str, Any]) -> Headline:
    rows: Headline = []
    for dimension in metrics.get("metrics", {}):
        at = f"metrics.{dimension}"
        rows += [
            (f"{dimension}: Spearman, score", dig(metrics, f"{at}.score.levels.summary.spearman.value")),
            (
                f"{dimension}: Spearman, weighted",
                dig(metrics, f"{at}.weighted_score.levels.summary.spearman.value"),
            ),
            (
                f"{dimension}: α judge vs experts",
                dig(metrics, f"{at}.weighted_score.alpha_judge_vs_mean_human"),
            ),
            (f"{dimension}: α among experts", dig(metrics, f"{at}.human_alpha")),
        ]
    return rows
