"""The regeneration experiment's page (outputs/regen/report.html): the policy's figures
(metrics.json), then each item: its question, every attempt's answer with the evaluator's quality,
issues and hint, why the loop stopped, and which attempt was delivered.

Rendered by jinja2 with autoescaping (pipeline.reports.templating): answers and the evaluator's
words are model output, shown as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def render_regen_html(
    metrics: Mapping[str, Any],
    regenerations: Sequence[Regeneration],
    rows: Mapping[str, RagRow],
    title: str,
    page: Path,
) -> str:
    """The page that will be written at `page` (its link to the report index is relative)."""
    return (
        make_environment(TEMPLATES, num=_num)
        .get_template("regen.html.j2")
        .render(
            **frame(page, title),
            metrics=metrics,
            items=[
                {"r": r, "question": rows[r.item].question if r.item in rows else None} for r in regenerations
            ],
        )
    )
