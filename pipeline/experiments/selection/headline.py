"""Selection's headline numbers: diversity targets met, the picks' weighted score against the top k
by score alone (the price of diversity), the judge's position consistency and its failures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.experiments.design import Headline, dig


def headline(metrics: Mapping[str, Any]) -> Headline:
    return [
        ("requests", dig(metrics, "requests")),
        ("diversity targets met", dig(metrics, "diversity.targets_met")),
        ("diversity targets unmet", dig(metrics, "diversity.targets_unmet")),
        ("picks' weighted score (mean)", dig(metrics, "weighted_score.picks_mean")),
        ("top k by score alone (mean)", dig(metrics, "weighted_score.top_k_by_score_mean")),
        ("price of diversity", dig(metrics, "weighted_score.price_of_diversity")),
        ("position consistency", dig(metrics, "pairwise.position_consistency")),
        ("ratings scored", dig(metrics, "judgements.scored")),
        ("ratings failed", dig(metrics, "judgements.failed")),
    ]
