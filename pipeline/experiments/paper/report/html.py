"""The report for a reviewer: an index page (Figure 2, the run's facts, one row per item) and one page
per item with its iterations down to the exact prompts and replies, so each number in the report can
be traced to the text it came from (pipeline.reports.pages names and writes the files).

The pages are written by jinja2 templates (templates/ here) with autoescaping on:
transcripts and model replies are untrusted (a demo transcript tries to instruct the judge) and reach
the reviewer as text, never as markup; only the inline SVG charts, drawn by pipeline.reports.svg from
numbers and escaped labels, are marked safe. No page needs the network, and the same inputs give the
same bytes: no "generated at" timestamps.

Every long text is on an item's page once (.texts): a prompt shows its own words and
links to the transcript, template and assessment it contains, and iterations stay collapsed until
opened. One page per item keeps what a reader opens small at any number of items
(bench/report_size.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from pipeline.data.recorded_calls import recorded_calls
from pipeline.experiments.paper.aggregation import LLM_STAGES, PAPER_FIGURE2, unscored_why
from pipeline.experiments.paper.report.items import ItemBuilder, mean, options_text
from pipeline.experiments.paper.report.texts import PageTexts
from pipeline.experiments.paper.report.views import ItemRow
from pipeline.judges.rubric.judge import ReplyReader, reply_reader
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.llm.records import CallRecord
from pipeline.loops.results import Refinement
from pipeline.reports.frame import home_link, page_assets
from pipeline.reports.pages import page_stems, pages_folder, slug, write_pages
from pipeline.reports.svg import figure2_svg
from pipeline.reports.templating import make_environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


@cache
def environment() -> jinja2.Environment:
    return make_environment(TEMPLATES, exact=exact, slug=slug)


def exact(text: str) -> Markup:
    """Text content of an element, escaped: & and <, all that can start markup or a reference there
    (quotes and > need no escape outside attributes, and prompts are full of them), and a carriage
    return as a character reference, which the HTML parser would otherwise read as a newline: a
    prompt must read back character for character."""
    return Markup(text.replace("&", "&amp;").replace("<", "&lt;").replace("\r", "&#13;"))


def load_records(root: Path) -> dict[str, CallRecord]:
    """Every call the experiment's stages recorded under `root` (e.g. recordings/), by key,
    checksums verified. Only the folders of its own stages: a folder beside them that no stage owns
    (pinned by nothing) never shows on the pages, whatever calls it holds."""
    return {key: call.record for key, call in recorded_calls(root, stages=LLM_STAGES).items()}


def _stats(stats: dict[str, Any]) -> str:
    if stats["mean"] is None:
        return f"— (n=0, {stats['unscored']} unscored)"
    sd = "—" if stats["sd"] is None else f"{stats['sd']:.2f}"
    return f"{stats['mean']:.2f} ± {sd} (n={stats['n']}, {stats['unscored']} unscored)"


def _referenced(refinements: list[Refinement]) -> list[str]:
    return list(
        dict.fromkeys(
            key
            for r in refinements
            for it in r.iterations
            for key in (*it.assessment.call_keys, *(k for m in it.metrics.values() for k in m.call_keys))
        )
    )


@dataclass(frozen=True)
class _Used:
    """What the index page says of a referenced call: its model and its options."""

    model: tuple[str, str, str]  # backend, name, digest
    options: str


def _used(refinements: list[Refinement], records: Mapping[str, CallRecord]) -> list[_Used]:
    """The referenced calls' models and options, each call parsed once and dropped (records may
    parse each call when asked for: pipeline.data.recorded_stages)."""
    return [
        _Used((r.model.backend, r.model.name, r.model.digest), options_text(r))
        for k in _referenced(refinements)
        if (r := records.get(k)) is not None
    ]


def _option_names(used: list[_Used]) -> dict[str, str]:
    """A short name for each distinct set of options, most used first: calls cite the name, the header
    spells it out once."""
    counts = Counter(u.options for u in used)
    ranked = sorted(counts, key=lambda text: (-counts[text], text))
    return {text: f"options {n}" for n, text in enumerate(ranked, start=1)}


def _facts(
    refinements: list[Refinement],
    summary: dict[str, Any],
    records: Mapping[str, CallRecord],
    options: dict[str, str],
    used: list[_Used],
) -> dict[str, str]:
    keys = _referenced(refinements)
    models = dict.fromkeys(
        f"{backend}:{name} ({digest})" for backend, name, digest in (u.model for u in used)
    )
    counts = Counter(u.options for u in used)
    unscored = {p: sum(m[p]["unscored"] for m in summary["figure2"].values()) for p in ("before", "after")}
    invalid = summary["invalid_assessments"]
    return {
        "Model": ", ".join(models) or "unknown (no call recorded)",
        "Items": str(summary["items"]),
        "Refined items": str(summary["refined_items"]),
        "Mean iterations (refined items)": str(summary["mean_iterations"]),
        "Stop reasons": ", ".join(f"{k}: {v}" for k, v in summary["stop_reasons"].items()) or "—",
        "Unscored judgements": f"{unscored['before']} before, {unscored['after']} after",
        **({"Why unscored": why} if (why := unscored_why(summary)) else {}),
        "Invalid assessments": f"{invalid['initial']} initially, {invalid['kept']} among those kept",
        "LLM calls": ", ".join(f"{k}: {v}" for k, v in summary["calls"].items()) or "—",
        "Calls not recorded": f"{sum(k not in records for k in keys)} of {len(keys)}",
        **{name.capitalize(): f"{text} ({counts[text]:,} calls)" for text, name in options.items()},
    }


def _figure2_rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    for metric, phases in summary["figure2"].items():
        paper = PAPER_FIGURE2.get(metric)
        cells = [metric, _stats(phases["before"]), _stats(phases["after"])]
        rows.append(cells + ([f"{m:.2f} ± {s:.2f}" for m, s in paper] if paper else ["—", "—"]))
    return rows


@dataclass(frozen=True)
class RenderedReport:
    """The index page and the item pages (file name -> page), for the folder `folder` beside it."""

    index: str
    folder: str
    pages: dict[str, str]


def _item_page(
    r: Refinement,
    stem: str,
    every: Mapping[str, CallRecord],
    options: dict[str, str],
    read: ReplyReader,
    **page: Any,
) -> str:
    # The item's own calls only, parsed for this page and dropped after it (every item's calls, held
    # at once, are a whole run's prompts: pipeline.data.recorded_stages).
    records = {k: record for k in _referenced([r]) if (record := every.get(k)) is not None}
    # Each page is read alone, so each has its own texts: the transcript at the top of its item, the
    # templates its prompts contain at its end.
    texts = PageTexts()
    item = ItemBuilder(records, texts, options, read).item(r, stem)
    cited = {options_text(records[k]) for k in _referenced([r]) if k in records}
    return (
        environment()
        .get_template("item_page.html.j2")
        .render(
            item=item,
            options={name.capitalize(): text for text, name in options.items() if text in cited},
            templates=texts.cited_templates(),
            referenced=texts.referenced,
            **page,
        )
    )


def _row(r: Refinement, stem: str, folder: str) -> ItemRow:
    return ItemRow(
        id=stem,
        href=f"{quote(folder)}/{stem}.html",
        name=r.item,
        stop_reason=r.stop_reason,
        refined=len(r.iterations) - 1,
        kept=r.kept,
        mean_before=mean(r.iterations[0].metrics),
        mean_after=mean(r.iterations[r.kept].metrics),
        low=", ".join(r.iterations[r.kept].low_metrics),
    )


def _rendered(
    refinements: list[Refinement],
    summary: dict[str, Any],
    records: Mapping[str, CallRecord],
    title: str,
    index_name: str = "report.html",
    home: str | None = None,
    read: ReplyReader | None = None,
) -> tuple[str, str, Iterator[tuple[str, str]]]:
    """The index page, the item pages' folder, and the item pages (file name, page), each rendered when
    reached, so that a writer holds one page at a time. `records` maps call keys to calls (see
    load_records, or pipeline.data.recorded_stages), `index_name` is the index's file name, which the
    item pages link back to; `home`, the report index's address from the index page
    (pipeline.reports.frame), which every page links to; `read`, how the judge stage read a reply
    (reply_reader of the run's judge settings; default: the judge's defaults)."""
    read = read or reply_reader(JudgeSettings())
    used = _used(refinements, records)
    options = _option_names(used)
    show_model = len({u.model for u in used}) > 1
    folder = pages_folder(index_name)
    stems = page_stems([r.item for r in refinements])
    assets = page_assets()
    pages = (
        (
            f"{stem}.html",
            _item_page(
                r,
                stem,
                records,
                options,
                read,
                title=f"Item {r.item} · {title}",
                report_title=title,
                index_href=f"../{quote(index_name)}#{stem}",
                show_model=show_model,
                home=None if home is None else f"../{home}",
                **assets,
            ),
        )
        for r, stem in zip(refinements, stems, strict=True)
    )
    appendix = PageTexts()
    index = (
        environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            facts=_facts(refinements, summary, records, options, used),
            figure2_rows=_figure2_rows(summary),
            # Marked safe on purpose: drawn from numbers, its labels escaped by pipeline.reports.svg.
            figure2_svg=Markup(figure2_svg(summary["figure2"], PAPER_FIGURE2)),
            rows=[_row(r, stem, folder) for r, stem in zip(refinements, stems, strict=True)],
            templates=appendix.templates,
            referenced=appendix.referenced,
            home=home,
            **assets,
        )
    )
    return index, folder, pages


def render_report(
    refinements: list[Refinement],
    summary: dict[str, Any],
    records: Mapping[str, CallRecord],
    title: str,
    index_name: str = "report.html",
    home: str | None = None,
    read: ReplyReader | None = None,
) -> RenderedReport:
    """The report's pages, held together (see _rendered for the arguments)."""
    index, folder, pages = _rendered(refinements, summary, records, title, index_name, home, read)
    return RenderedReport(index, folder, dict(pages))


@dataclass(frozen=True)
class WrittenReport:
    """The index page as written, the item pages' folder beside it and their file names."""

    index: str
    folder: str
    pages: tuple[str, ...]


def write_report(
    index: Path,
    refinements: list[Refinement],
    summary: dict[str, Any],
    records: Mapping[str, CallRecord],
    title: str,
    read: ReplyReader | None = None,
) -> WrittenReport:
    """Render the report and write it: the index at `index`, the item pages in the folder beside it
    (written anew), each page written as it is rendered and dropped (a whole run's pages are about
    5 kB a call). The aggregate stage and `judgeloop report` both write it this way, `read` bound to
    the run's judge settings."""
    html, folder, pages = _rendered(refinements, summary, records, title, index.name, home_link(index), read)
    names: list[str] = []

    def named() -> Iterator[tuple[str, str]]:
        for name, page in pages:
            names.append(name)
            yield name, page

    write_pages(index, html, named())
    return WrittenReport(html, folder, tuple(names))
