"""The SummEval calibration page: the table of agreement with people and a scatter per dimension.

Rendered from metrics.json's data and the judge's rows with a jinja2 template (autoescape on: a
summary id or a model name is data), self-contained and byte-stable: coordinates are rounded and
nothing depends on measured fonts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.data.ratings import HumanRatings
from pipeline.experiments.summeval.results import SummEvalJudgement
from pipeline.judges.likert import LIKERT_VALUES, to_unit
from pipeline.reports.frame import frame
from pipeline.reports.templating import make_environment
from pipeline.stats.correlation import LEVELS, STATISTICS

TEMPLATES = Path(__file__).resolve().parent / "templates"

KIND_NAMES = {"score": "argmax (the score written)", "weighted_score": "weighted (G-Eval)"}
STATISTIC_NAMES = {"spearman": "Spearman ρ", "kendall": "Kendall τ-b", "pearson": "Pearson r"}

# The scatter: human mean rating (x) against the judge's score (y), both on 1-5.
SIZE, MARGIN = 240.0, 34.0


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    kind: str  # "score" or "weighted_score": the marker's class
    title: str


def _coordinate(value: float, flip: bool) -> float:
    fraction = to_unit(value)
    return round(MARGIN + (1.0 - fraction if flip else fraction) * SIZE, 1)


def scatter_points(
    judgements: Sequence[SummEvalJudgement], humans: Mapping[tuple[str, str], HumanRatings], dimension: str
) -> list[Point]:
    points = []
    for j in judgements:
        human = humans.get((j.item, dimension))
        if j.dimension != dimension or human is None:
            continue
        for kind, value in (("score", j.score), ("weighted_score", j.weighted_score)):
            if value is None:
                continue
            title = f"{j.item}: human {human.mean:.2f}, {KIND_NAMES[kind]} {value:.2f}"
            points.append(Point(_coordinate(human.mean, False), _coordinate(float(value), True), kind, title))
    return points


def _cell(estimate: Mapping[str, Any] | None) -> str:
    if not estimate or estimate["value"] is None:
        return "n/a"
    low, high = estimate["ci95"]
    interval = "" if low is None or high is None else f" [{low:+.2f}, {high:+.2f}]"
    return f"{estimate['value']:+.2f}{interval}"


def _table_rows(metric: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kind in KIND_NAMES:
        data = metric.get(kind)
        if data is None:
            continue
        levels = data["levels"]
        skipped = levels.get("summary", {}).get("skipped", {})
        # Why a cell says n/a: the articles left out of the summary level, by reason.
        note = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()) if n)
        rows.append(
            {
                "kind": KIND_NAMES[kind],
                "used": data["items_used"],
                "unscored": data["items_unscored"],
                "alpha": "n/a"
                if data["alpha_judge_vs_mean_human"] is None
                else f"{data['alpha_judge_vs_mean_human']:+.2f}",
                "cells": [_cell(levels.get(level, {}).get(s)) for level in LEVELS for s in STATISTICS],
                "skipped": f"articles skipped: {note}" if note else "",
            }
        )
    return rows


def render_summeval_html(
    metrics: Mapping[str, Any],
    judgements: Sequence[SummEvalJudgement],
    humans: Sequence[HumanRatings],
    title: str,
    page: Path,
) -> str:
    """The page that will be written at `page` (its link to the report index is relative)."""
    by_key = {(h.item, h.metric): h for h in humans}
    dimensions = [
        {
            "name": name,
            "human_alpha": f"n/a ({metric.get('human_alpha_undefined', 'undefined')})"
            if metric["human_alpha"] is None
            else f"{metric['human_alpha']:+.2f}",
            "items_judged": metric["items_judged"],
            "rows": _table_rows(metric),
            "points": scatter_points(judgements, by_key, name),
            "outcomes": metrics["judge"]["outcomes"].get(name, {}),
        }
        for name, metric in metrics["metrics"].items()
    ]
    environment = make_environment(TEMPLATES)
    ticks = [{"value": v, "at": _coordinate(v, False), "at_y": _coordinate(v, True)} for v in LIKERT_VALUES]
    return environment.get_template("summeval.html.j2").render(
        **frame(page, title),
        metrics=metrics,
        dimensions=dimensions,
        levels=LEVELS,
        statistics=[STATISTIC_NAMES[s] for s in STATISTICS],
        ticks=ticks,
        low=MARGIN,
        high=MARGIN + SIZE,
        side=round(2 * MARGIN + SIZE, 1),
    )
