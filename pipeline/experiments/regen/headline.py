"""Regeneration's headline numbers: quality before and after, how many were regenerated, and what
it cost (`judgeloop compare`, the report index)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.experiments.design import Headline, dig


def headline(metrics: Mapping[str, Any]) -> Headline:
    return [
        ("items", dig(metrics, "items")),
        ("quality before (mean 0-1)", dig(metrics, "quality.before.mean")),
        ("quality after (mean 0-1)", dig(metrics, "quality.after.mean")),
        ("share regenerated", dig(metrics, "share_regenerated")),
        ("share that kept the original", dig(metrics, "share_kept_original")),
        ("calls added per item", dig(metrics, "calls.added_per_item")),
        ("latency added per item, p50 (s)", dig(metrics, "latency_s.added.p50")),
    ]
