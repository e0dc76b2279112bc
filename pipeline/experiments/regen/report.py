"""The regeneration experiment's page (outputs/regen/report.html): the policy's figures
(metrics.json), then each item: its question, every attempt's answer with the evaluator's quality,
issues and hint, why the loop stopped, and which attempt was delivered. Rendered an item at a
time (regen_page_chunks): the table from small summaries, each section from its item read again.

Rendered by jinja2 with autoescaping (pipeline.reports.templating): answers and the evaluator's
words are model output, shown as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.data.rag_rows import RagRow
from pipeline.loops.regenerate import Regeneration
from pipeline.reports.frame import frame
from pipeline.reports.templating import make_environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _question(rows: Mapping[str, RagRow], item: str) -> str | None:
    row = rows.get(item)
    return None if row is None else row.question


def regen_page_chunks(
    metrics: Mapping[str, Any],
    table: Sequence[Regeneration],
    items: Iterable[Regeneration],
    rows: Mapping[str, RagRow],
    title: str,
    page: Path,
) -> Iterator[str]:
    """The page that will be written at `page` (its link to the report index is relative), in pieces
    as rendered. `table`: each item as the table of items shows it (numbers_only's summaries will
    do); `items`: each item in full, in the same order, read as its section is reached."""
    sections = ({"r": r, "question": _question(rows, r.item)} for r in items)
    return (
        make_environment(TEMPLATES, num=_num)
        .get_template("regen.html.j2")
        .generate(**frame(page, title), metrics=metrics, table=table, items=sections)
    )


def render_regen_html(
    metrics: Mapping[str, Any],
    regenerations: Sequence[Regeneration],
    rows: Mapping[str, RagRow],
    title: str,
    page: Path,
) -> str:
    """The whole page at once, from results in memory."""
    return "".join(regen_page_chunks(metrics, regenerations, regenerations, rows, title, page))
