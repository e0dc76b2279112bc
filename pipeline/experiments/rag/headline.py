"""The RAG judge's headline numbers: rows scored, each dimension's mean (0-1), the overall's mean,
and per human label how well the overall score separates the rows (AUROC)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.experiments.design import Headline, dig


def headline(metrics: Mapping[str, Any]) -> Headline:
    rows: Headline = [("rows", dig(metrics, "rows")), ("scored", dig(metrics, "scored"))]
    rows += [
        (f"{name} mean (0-1)", dig(metrics, ("dimensions", name, "mean")))
        for name in metrics.get("dimensions", {})
    ]
    rows.append(("overall mean (0-1)", dig(metrics, "overall.overall.mean")))
    for label in metrics.get("agreement", {}):
        rows.append(
            (
                f"AUROC of overall vs {label}",
                dig(metrics, ("agreement", label, "scores", "overall", "auroc", "value")),
            )
        )
    return rows
