"""The paper's headline numbers: each metric's mean score before and after the loop (Figure 2),
and how much refining it took (`judgeloop compare`, the report index)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.experiments.design import Headline, dig


def headline(metrics: Mapping[str, Any]) -> Headline:
    rows: Headline = []
    for metric in metrics.get("figure2", {}):
        for phase in ("before", "after"):
            rows.append((f"{metric} {phase} (mean 1-5)", dig(metrics, ("figure2", metric, phase, "mean"))))
    rows += [
        ("items", dig(metrics, "items")),
        ("items refined", dig(metrics, "refined_items")),
        ("mean iterations", dig(metrics, "mean_iterations")),
    ]
    return rows
