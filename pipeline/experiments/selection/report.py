"""The selection experiment's page: the run's metrics, then every request's pool, scores, picks and
explanations, with the keys of the calls each number rests on (`judgeloop audit --key` shows one).

Rendered with jinja2 under autoescape: track names, requests and the judge's reasons are untrusted
text and reach the reader as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.reports.frame import frame
from pipeline.reports.templating import make_environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def render_selection_page(
    title: str,
    page: Path,
    metrics: Mapping[str, Any],
    scored: Sequence[Mapping[str, Any]],
    picks: Sequence[Mapping[str, Any]],
) -> str:
    """`scored` and `picks`: the score and pick records, one per request, in the same order."""
    by_request = {p["request"]: p for p in picks}
    requests = []
    for record in scored:
        request_id = record["request"]["id"]
        pick = by_request[request_id]
        weighted = {row["candidate"]: row["weighted"] for row in pick["selection"]["ranking"]}
        criteria = sorted(record["framework"]["criteria"])
        requests.append(
            {
                "request": record["request"],
                "framework": record["framework"],
                "criteria": criteria,
                "pool": record["pool"],
                "weighted": weighted,
                "picks": pick["selection"]["picks"],
                "top_k": pick["selection"]["top_k_by_score"],
                "selection": pick["selection"],
                "comparisons": pick["comparisons"],
                "explanations": pick["explanations"],
                "names": {c["track"]["track_id"]: c["track"]["track_name"] for c in record["pool"]},
            }
        )
    template = make_environment(TEMPLATES, num=_num).get_template("selection.html.j2")
    return template.render(**frame(page, title), metrics=metrics, requests=requests)
