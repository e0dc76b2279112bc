"""The RAG judge's report page: the agreement tables, then per row the question, the answer, each
dimension's score, the judge's reasoning, and the exact prompt and reply of every call it made.

Rendered with jinja2 under autoescape: every text on the page (a question, a retrieved document,
a model's reply) is data, never markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.likert import LIKERT_VALUES
from pipeline.llm.records import RecordedCall
from pipeline.reports.frame import frame
from pipeline.reports.templating import make_environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


def render_rag_html(
    rows: Sequence[RagRow],
    judgements: Sequence[RagJudgement],
    metrics: Mapping[str, Any],
    calls: Mapping[str, RecordedCall],
    settings: RagSettings,
    title: str,
    page: Path,
) -> str:
    """The page that will be written at `page` (its link to the report index is relative)."""
    by_item = {j.item: j for j in judgements}
    entries = [
        {
            "row": row,
            "judgement": by_item[row.id].judgement,
            "calls": [calls[key] for key in by_item[row.id].judgement.call_keys if key in calls],
        }
        for row in rows
        if row.id in by_item
    ]
    return (
        make_environment(TEMPLATES)
        .get_template("rag.html.j2")
        .render(
            **frame(page, title),
            metrics=metrics,
            entries=entries,
            dimensions=settings.dimensions.items,
            score_values=LIKERT_VALUES,
        )
    )
