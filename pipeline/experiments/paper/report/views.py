"""What the report's templates are given for one item (templates/item.html.j2 and
.call_markup) and for its row on the index (report.html.j2): plain frozen data, every string still to
be escaped by the template, the sparklines already SVG (marked safe: drawn by pipeline.reports.svg,
which escapes their labels)."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from pipeline.experiments.paper.report.texts import Placed
from pipeline.llm.records import CallRecord


@dataclass(frozen=True)
class MessageView:
    role: str
    text: Placed
    collapsed: bool


@dataclass(frozen=True)
class CallView:
    id: str
    label: str
    key: str
    record: CallRecord | None  # None: not in the recordings given to the report
    reading: str  # a judge reply read again with today's extractor; "" for an assessment
    reading_note: str
    options: str  # the name of its options in the page header
    messages: tuple[MessageView, ...]
    reply: Placed | None


@dataclass(frozen=True)
class Carried:
    metric: str
    score: str
    source: int  # the iteration whose judgement it is


@dataclass(frozen=True)
class JudgementView:
    id: str
    metric: str
    score: str
    how: str
    low: bool
    calls: tuple[CallView, ...]
    recorded: Placed | None  # the results' text, when the last call's record is missing


@dataclass(frozen=True)
class Chip:
    text: str
    low: bool


@dataclass(frozen=True)
class IterationView:
    id: str
    number: int
    kept: bool
    chips: tuple[Chip, ...]
    feedback: Placed | None
    feedback_from: int
    valid: bool
    problem: str
    unverified_quotes: tuple[str, ...]
    calls: tuple[CallView, ...]
    recorded: Placed | None
    judgements: tuple[JudgementView, ...]
    carried: tuple[Carried, ...]


@dataclass(frozen=True)
class Cell:
    text: str
    classes: str
    href: str


@dataclass(frozen=True)
class Row:
    number: int
    kept: bool
    cells: tuple[Cell | None, ...]
    valid: bool
    low: str


@dataclass(frozen=True)
class ItemView:
    id: str
    name: str
    stop_reason: str
    stop_text: str
    refined: int
    kept: int
    mean_before: str
    mean_after: str
    transcript: Placed | None
    metrics: tuple[str, ...]
    rows: tuple[Row, ...]
    sparklines: tuple[Markup, ...]
    iterations: tuple[IterationView, ...]


@dataclass(frozen=True, slots=True)
class ItemRow:
    """An item's row on the index page, linking to the item's page (`href`, relative to the index).
    Slotted: the report keeps one an item until the index is written."""

    id: str
    href: str
    name: str
    stop_reason: str
    refined: int
    kept: int
    mean_before: str
    mean_after: str
    low: str  # the metrics still low at the kept iteration
