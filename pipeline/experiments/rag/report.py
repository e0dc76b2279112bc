"""The RAG judge's report page: the agreement tables, then per row the question, the answer, each
dimension's score, the judge's reasoning, and the exact prompt and reply of every call it made.

Rendered with jinja2 under autoescape: every text on the page (a question, a retrieved document,
a model's reply) is data, never markup. The page is rendered a row at a time (`rag_page_chunks`):
each row's judgement and calls are looked up when its section is reached and dropped after, so the
stage holds one row's calls, never the run's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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


def page_entries(
    rows: Iterable[RagRow],
    judgement_of: Callable[[str], RagJudgement | None],
    call_of: Callable[[str], RecordedCall | None],
) -> Iterator[dict[str, Any]]:
    """Each judged row's section, in the rows' order, its judgement and calls looked up as it is
    reached (a row without a judgement has no section; a key not recorded, no call)."""
    for row in rows:
        judged = judgement_of(row.id)
        if judged is None:
            continue
        calls = [call_of(key) for key in judged.judgement.call_keys]
        yield {"row": row, "judgement": judged.judgement, "calls": [c for c in calls if c is not None]}


def rag_page_chunks(
    entries: Iterable[dict[str, Any]],
    metrics: Mapping[str, Any],
    settings: RagSettings,
    title: str,
    page: Path,
) -> Iterator[str]:
    """The page that will be written at `page` (its link to the report index is relative), in
    pieces as rendered: the rows' sections as `entries` yields them."""
    return (
        make_environment(TEMPLATES)
        .get_template("rag.html.j2")
        .generate(
            **frame(page, title),
            metrics=metrics,
            entries=entries,
            dimensions=settings.dimensions.items,
            score_values=LIKERT_VALUES,
        )
    )


def render_rag_html(
    rows: Sequence[RagRow],
    judgements: Sequence[RagJudgement],
    metrics: Mapping[str, Any],
    calls: Mapping[str, RecordedCall],
    settings: RagSettings,
    title: str,
    page: Path,
) -> str:
    """The whole page at once, from results and calls in memory."""
    by_item = {j.item: j for j in judgements}
    entries = page_entries(rows, by_item.get, calls.get)
    return "".join(rag_page_chunks(entries, metrics, settings, title, page))
