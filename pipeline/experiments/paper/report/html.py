"""The report for a reviewer: an index page (Figure 2, the run's facts, one row per item) and one page
per item with its iterations down to the exact prompts and replies, so each number in the report can
be traced to the text it came from (pipeline.reports.pages names and writes the files).

The pages are written by jinja2 templates (templates/ here) with autoescaping on:
transcripts and model replies are untrusted (a demo transcript tries to instruct the judge) and reach
the reviewer as text, never as markup, each control, bidi or invisible character in it as its escape
(pipeline.reports.templating); only the inline SVG charts, drawn by pipeline.reports.svg from
numbers and escaped labels, are marked safe, and each placed text's <pre>, written by .markup with
every text and attribute escaped as autoescape would (the pages' innermost loop, kept out of jinja
for speed). No page needs the network, and the same inputs give the same bytes: no "generated at"
timestamps.

Every long text is on an item's page once (.texts): a prompt shows its own words and
links to the transcript, template and assessment it contains, and iterations stay collapsed until
opened. One page per item keeps what a reader opens small at any number of items
(bench/report_size.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from pipeline.data.recorded_calls import recorded_calls
from pipeline.data.recorded_stages import StageRecords
from pipeline.errors import ConfigError
from pipeline.experiments.paper.aggregation import LLM_STAGES, PAPER_FIGURE2, unscored_why
from pipeline.experiments.paper.report.items import ItemBuilder, mean, options_line, options_text
from pipeline.experiments.paper.report.markup import exact, pre, shared_pre
from pipeline.experiments.paper.report.texts import PageTexts
from pipeline.experiments.paper.report.views import ItemRow
from pipeline.judges.rubric.judge import ReplyReader, reply_reader
from pipeline.judges.rubric.settings import JudgeSettings
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ModelIdentity, Options
from pipeline.loops.results import Refinement
from pipeline.reports.frame import home_link, page_assets
from pipeline.reports.page_shares import WHOLE, Pages, Share
from pipeline.reports.pages import PageStems, pages_folder, slug, write_pages
from pipeline.reports.svg import figure2_svg
from pipeline.reports.templating import make_environment

TEMPLATES = Path(__file__).resolve().parent / "templates"


# An item page's template and those it includes, imports and extends.
ITEM_TEMPLATES = ("item_page.html.j2", "page.html.j2", "item.html.j2", "calls.html.j2")


@cache
def environment() -> jinja2.Environment:
    env = make_environment(TEMPLATES, exact=exact, slug=slug)
    # A placed text's <pre> (.markup): called by the templates, written in Python for speed.
    env.globals.update(pre=pre, shared_pre=shared_pre)
    return env


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


def _referenced(refinements: Iterable[Refinement]) -> list[str]:
    return list(
        dict.fromkeys(
            key
            for r in refinements
            for it in r.iterations
            for key in (*it.assessment.call_keys, *(k for m in it.metrics.values() for k in m.call_keys))
        )
    )


_HEX_KEY = re.compile(r"[0-9a-f]{64}")


def _compact(key: str) -> bytes | str:
    """A call key as held in the set of keys seen: a sha256 in lower-case hex as its 32 bytes (one to
    one), any other key as itself (a str never equals bytes)."""
    return bytes.fromhex(key) if _HEX_KEY.fullmatch(key) else key


class _IndexScan:
    """What the index page and every item page share, taken one item at a time (the first pass over
    the results): each item's row, and of every referenced call (a key cited by several items counted
    once, by its first) its model and options, each call parsed once and dropped (records may parse
    each call when asked for: pipeline.data.recorded_stages). What it keeps is a row an item, the calls
    seen and the counts. A call of StageRecords is marked seen at its line's place (a byte a call; a
    set of the keys seen was about 130 bytes a call, 1.3 kB an item: bench/README.md, "The report's
    memory"); a key the records do not hold, or of other records, is kept (32 bytes)."""

    def __init__(self, records: Mapping[str, CallRecord], folder: str) -> None:
        self.records, self.folder = records, folder
        self.rows: list[ItemRow] = []
        self.referenced = self.missing = 0
        self.models: dict[tuple[str, str, str], None] = {}  # backend, name, digest; first seen first
        self.option_counts: Counter[str] = Counter()
        self._seen: set[bytes | str] = set()  # the keys seen that have no place in StageRecords
        self._marks: dict[str, bytearray] = {}  # stage -> a byte a call line: 1 once its key is seen
        self._options: dict[Options, str] = {}  # each distinct set of options spelled once
        self._stems = PageStems()

    def add(self, r: Refinement) -> None:
        self.rows.append(_row(r, self._stems.stem(r.item), self.folder))
        for key in _referenced([r]):
            place = self.records.place(key) if isinstance(self.records, StageRecords) else None
            if not self._first_sight(key, place):
                continue
            self.referenced += 1
            found = self._header(key, place)
            if found is None:
                self.missing += 1
                continue
            model, options = found
            self.models.setdefault((model.backend, model.name, model.digest))
            text = self._options.get(options)
            if text is None:
                text = self._options[options] = options_line(options)
            self.option_counts[text] += 1

    def _first_sight(self, key: str, place: tuple[str, int] | None) -> bool:
        """Whether this key is seen for the first time (and now marked seen): by its place in
        StageRecords where it has one (the same key, the same place), else by the key itself."""
        if place is None:
            compact = _compact(key)
            if compact in self._seen:
                return False
            self._seen.add(compact)
            return True
        stage, found = place
        marks = self._marks.get(stage)
        if marks is None:
            assert isinstance(self.records, StageRecords)  # only StageRecords give places
            marks = self._marks[stage] = bytearray(self.records.lines(stage))
        if marks[found]:
            return False
        marks[found] = 1
        return True

    def _header(self, key: str, place: tuple[str, int] | None) -> tuple[ModelIdentity, Options] | None:
        """The call's model and options: from its verified line alone where the records can read
        them so (StageRecords.header_at, no prompt unpacked), else from its record."""
        if isinstance(self.records, StageRecords):
            return None if place is None else self.records.header_at(key, place)
        record = self.records.get(key)
        return None if record is None else (record.model, record.request.options)

    def option_names(self) -> dict[str, str]:
        """A short name for each distinct set of options, most used first: calls cite the name, the
        header spells it out once."""
        counts = self.option_counts
        ranked = sorted(counts, key=lambda text: (-counts[text], text))
        return {text: f"options {n}" for n, text in enumerate(ranked, start=1)}


def _facts(scan: _IndexScan, summary: dict[str, Any], options: dict[str, str]) -> dict[str, str]:
    models = dict.fromkeys(f"{backend}:{name} ({digest})" for backend, name, digest in scan.models)
    counts = scan.option_counts
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
        "Calls not recorded": f"{scan.missing} of {scan.referenced}",
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


def _same_items(
    refinements: Iterable[Refinement], rows: list[ItemRow]
) -> Iterator[tuple[Refinement, ItemRow]]:
    """The second pass's items beside the first pass's rows: the results read again must be the
    ones the index was made from."""
    count = 0
    for r in refinements:
        if count >= len(rows) or rows[count].name != r.item:
            raise ConfigError(
                "the refinement results changed while the report was written (an item the first read "
                f"did not have at {count + 1}: {r.item!r}). "
                "Fix: let the run finish, then write the report again"
            )
        yield r, rows[count]
        count += 1
    if count != len(rows):
        raise ConfigError(
            f"the refinement results changed while the report was written ({len(rows)} items read "
            f"first, {count} then). Fix: let the run finish, then write the report again"
        )


def _rendered(
    refinements: Iterable[Refinement],
    summary: dict[str, Any],
    records: Mapping[str, CallRecord],
    title: str,
    index_name: str = "report.html",
    home: str | None = None,
    read: ReplyReader | None = None,
) -> tuple[str, str, _Pages]:
    """The index page, the item pages' folder, and the item pages (file name, page), each rendered when
    reached, so that a writer holds one page at a time (a share of them each, where two processes
    write them: pipeline.reports.page_shares). `refinements` is read twice, an item at a
    time: once for what the pages share (the index's rows, the calls' models and options), then for
    the pages; a list or a RefinementFile (pipeline.loops.results), never a one-pass iterator.
    `records` maps call keys to calls (see load_records, or pipeline.data.recorded_stages),
    `index_name` is the index's file name, which the item pages link back to; `home`, the report
    index's address from the index page (pipeline.reports.frame), which every page links to; `read`,
    how the judge stage read a reply (reply_reader of the run's judge settings; default: the judge's
    defaults)."""
    if isinstance(refinements, Iterator):
        raise TypeError(
            "the report reads the refinements twice: give a list or a RefinementFile, not an iterator"
        )
    read = read or reply_reader(JudgeSettings())
    folder = pages_folder(index_name)
    scan = _IndexScan(records, folder)
    for r in refinements:
        scan.add(r)
    options = scan.option_names()
    show_model = len(scan.models) > 1
    assets = page_assets()

    def pages(share: Share = WHOLE) -> Iterator[tuple[str, str]]:
        """The pages of the items at the positions in `share`, rendered when reached; the results are
        read again whole (_same_items checks every item against the first pass)."""
        part, parts = share
        for n, (r, row) in enumerate(_same_items(refinements, scan.rows)):
            if n % parts != part:
                continue
            yield (
                f"{row.id}.html",
                _item_page(
                    r,
                    row.id,
                    records,
                    options,
                    read,
                    title=f"Item {r.item} · {title}",
                    report_title=title,
                    index_href=f"../{quote(index_name)}#{row.id}",
                    show_model=show_model,
                    home=None if home is None else f"../{home}",
                    **assets,
                ),
            )

    appendix = PageTexts()
    index = (
        environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            facts=_facts(scan, summary, options),
            figure2_rows=_figure2_rows(summary),
            # Marked safe on purpose: drawn from numbers, its labels escaped by pipeline.reports.svg.
            figure2_svg=Markup(figure2_svg(summary["figure2"], PAPER_FIGURE2)),
            rows=scan.rows,
            templates=appendix.templates,
            referenced=appendix.referenced,
            home=home,
            **assets,
        )
    )
    if scan.rows:  # the item pages' templates compiled here, once, not by each page writer (a fork)
        for name in ITEM_TEMPLATES:
            environment().get_template(name)
    return index, folder, _Pages(pages, tuple(f"{row.id}.html" for row in scan.rows))


@dataclass(frozen=True)
class _Pages:
    """The item pages, rendered when reached: a share of them (`render`), and every page's file name
    in the items' order."""

    render: Pages
    names: tuple[str, ...]


def render_report(
    refinements: Iterable[Refinement],
    summary: dict[str, Any],
    records: Mapping[str, CallRecord],
    title: str,
    index_name: str = "report.html",
    home: str | None = None,
    read: ReplyReader | None = None,
) -> RenderedReport:
    """The report's pages, held together (see _rendered for the arguments)."""
    index, folder, pages = _rendered(refinements, summary, records, title, index_name, home, read)
    return RenderedReport(index, folder, dict(pages.render(WHOLE)))


@dataclass(frozen=True)
class WrittenReport:
    """The index page as written, the item pages' folder beside it and their file names."""

    index: str
    folder: str
    pages: tuple[str, ...]


def write_report(
    index: Path,
    refinements: Iterable[Refinement],
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
    write_pages(index, html, pages.render, len(pages.names))
    return WrittenReport(html, folder, pages.names)
