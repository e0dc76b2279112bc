"""What others wrote reaches the report pages, the report's Markdown tables and the SVG charts as
the text it is: a bidi override or isolate cannot reorder what the reader sees (Trojan Source), a
zero-width, tag or control character cannot hide, a carriage return cannot pass for a line break;
each shows as its escape, as the terminal shows it (pipeline.llm.terminal.shown). A `|` or a line
break in a name from params cannot break a Markdown table, and a control in a plot's label cannot
make an SVG invalid XML (show-esc; left open by writers-red, redteam4 and review5)."""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup, escape

import tests.test_report_html as sample
from pipeline.experiments.paper.aggregation import markdown_report as paper_markdown
from pipeline.experiments.paper.report.html import render_report
from pipeline.experiments.paper.report.markup import exact
from pipeline.experiments.rag.aggregation import markdown_report as rag_markdown
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.terminal import shown
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.reports.markdown import table_cell
from pipeline.reports.plots import plot_svg, standalone
from pipeline.reports.svg import figure2_svg, sparkline_svg, svg_text
from pipeline.reports.templating import make_environment
from pipeline.tools.cli import main
from tests.conftest import ROOT
from tests.report_dom import Page
from tests.test_diff import record
from tests.test_diff_page import hostile

# Every character a browser reorders by, hides, or reads as another; with markup and a backslash.
TROJAN = (
    'if \u202eaccess\u2066 = "ok"\u2069\u200b\u200e\u061c\ufeff\U000e0041\x1b[2J\rdone\x00\x85 & <b>\\u202e'
)
# Such characters raw in a page: bidi controls, zero-width and tag characters, C0 and C1 controls
# but the newline and the tab, the noncharacters XML refuses.
RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069"
    "\ufeff\ufff9-\uffff\U000e0000-\U000e007f\u2028\u2029]"
)
SHOWN = shown(TROJAN)  # what each page shows: `if \u202eaccess\u2066 = "ok"...`


def test_every_field_of_the_paper_report_shows_its_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index and the item's page (titles, headings, tables, the options, the SVG's labels and
    every prompt and reply in its <pre>) hold none of the characters raw, and show each as its escape."""
    monkeypatch.setattr(sample, "HOSTILE", TROJAN)
    refinements, summary, records = sample.build_hostile()
    report = render_report(refinements, summary, records, TROJAN)
    [page] = report.pages.values()
    for html in (report.index, page):
        assert not RAW.search(html), repr(RAW.search(html))
        assert "&#13;" not in html
        title = next(e for e in Page(html).root.walk() if e.tag == "title").text()
        assert title.endswith(SHOWN)
    index, item = Page(report.index), Page(page)
    assert SHOWN in next(e for e in index.root.walk() if e.tag == "svg").text()  # Figure 2's label
    assert SHOWN in next(e for e in item.root.walk() if e.tag == "h1").text()
    reply = next(r.reply.text for r in records.values() if r.reply.text.startswith("<assessment>"))
    assert shown(reply) in [e.text() for e in item.root.walk() if e.tag == "pre"]


def test_a_template_shows_the_escape_in_text_and_attributes_and_leaves_markup_be() -> None:
    """One filter for every page (pipeline.reports.templating): every design's page and the index
    are rendered by this environment."""
    template = make_environment().from_string('<p title="{{ v }}">{{ v }}|{{ n }}|{{ m }}</p>')
    html = template.render(v=TROJAN, n=3, m=Markup("<svg>\u202e</svg>"))
    assert html == f'<p title="{escape(SHOWN)}">{escape(SHOWN)}|3|<svg>\u202e</svg></p>'


def test_the_diff_page_shows_a_reply_s_controls(tmp_path: Path) -> None:
    a = record(tmp_path / "a", "judge-a")
    b = record(tmp_path / "b", "judge-b", responder_of=lambda model: hostile(model, TROJAN))
    out = tmp_path / "page"
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--design", "paper", "--html", str(out)])
    assert result.exit_code == 0, result.output
    html = (out / "index.html").read_text(encoding="utf-8")
    assert not RAW.search(html), repr(RAW.search(html))
    lines = [
        e.text() for e in Page(html).root.walk() if e.tag == "span" and "added" in e.attrs.get("class", "")
    ]
    assert any(shown(TROJAN) in line for line in lines)  # one line: the page breaks lines at \n only


# --- Markdown tables (report.md) -------------------------------------------------------------------

CELLS = [
    "a|b",
    "a | b\n| forged | row |",
    "![x](https://tracker.example/t.png)",
    "<img src=x onerror=alert(1)>",
    "_em_ and **strong** and ~~gone~~",
    "&#x202e;entity",
    "back\\slash\\|pipe",
    "`code`",
    "m\x1b[2J\u202e",
]
REPORTS: dict[str, tuple[Callable[[dict[str, Any], str], str], str, list[str]]] = {
    # Names from params and the data that land in a table's cells: a metric, a RAG dimension (each a
    # row of two tables and a score of a third), a human label column.
    "paper": (paper_markdown, "outputs/paper/metrics.json", ["coherence"]),
    "rag": (rag_markdown, "outputs/rag/metrics.json", ["accuracy", "answer_faithfulness"]),
}


def _renamed(summary_text: str, old: str, new: str) -> dict[str, Any]:
    """The summary with every key or value that is exactly `old` (a name) now `new`."""
    return json.loads(summary_text.replace(json.dumps(old), json.dumps(new)))  # type: ignore[no-any-return]


def _shape(tokens: list[Token]) -> list[Any]:
    return [(t.type, t.tag, [c.type for c in t.children or []]) for t in tokens]


def _cells(tokens: list[Token]) -> list[str]:
    inline = [t for t in tokens if t.type == "inline"]
    return [
        "".join(c.content for c in t.children or [])
        for before, t in itertools.pairwise(tokens)
        if before.type in ("td_open", "th_open") and t in inline
    ]


@pytest.mark.parametrize("design", sorted(REPORTS))
@pytest.mark.parametrize("name", CELLS)
def test_a_name_from_params_stays_in_its_table_cell(design: str, name: str) -> None:
    render, metrics, names = REPORTS[design]
    summary = (ROOT / metrics).read_text(encoding="utf-8")
    markdown = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    plain = markdown.parse(render(json.loads(summary), "m"))
    for old in names:
        hostile = markdown.parse(render(_renamed(summary, old, name), "m"))
        assert _shape(hostile) == _shape(plain)  # the same tables, rows and cells; text in each
        cells = list(zip(_cells(plain), _cells(hostile), strict=True))
        assert [h for p, h in cells if p == old] == [shown(name, one_line=True).strip()] * len(
            [p for p, _ in cells if p == old]
        )
        assert any(p == old for p, _ in cells)


# --- SVG ------------------------------------------------------------------------------------------

LABELS = ["\x01ctrl", "tab\tand\nline", "\u202ervo", "nul\x00", "non\uffffchar", "\x85c1"]


@pytest.mark.parametrize("label", LABELS)
def test_a_label_with_a_control_keeps_the_svg_valid_xml(label: str) -> None:
    rows = [{"metric": label, "mean": "3.5", "sd": "0.5", "phase": "before", "series": label}]
    drawings = [
        standalone(plot_svg(rows, x="mean", y="metric", title=label, template="bar_horizontal"), "text{}"),
        standalone(plot_svg(rows, x="mean", y="sd", title=label, template="linear"), "text{}"),
        figure2_svg(
            {label: {p: {"mean": 3.0, "sd": 1.0, "n": 3, "unscored": 0} for p in ("before", "after")}}, {}
        ),
        sparkline_svg([1, 2], 1, label),
    ]
    for svg in drawings:
        root = ET.fromstring(svg)  # raises on a character XML cannot hold
        texts = ["".join(e.itertext()) for e in root.iter() if e.tag.endswith(("text", "title"))]
        assert any(shown(label, one_line=True) in t for t in texts), texts
        assert not RAW.search(svg)


@pytest.mark.parametrize("name", ["m|x", "a`b", "m\n| forged | row |", "``", "m\u202e"])
def test_audit_s_markdown_header_keeps_a_model_name_in_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """`judgeloop audit --format markdown` heads each call with a table of two columns: the model's
    name (a server's, a colleague's recordings) is one code span in its cell, whatever it holds."""
    monkeypatch.chdir(tmp_path)
    request = ChatRequest(messages=(Message(role="user", content="Rate this."),))
    record = CallRecord.new(
        ModelIdentity(backend="fake", name=name, digest="d"), request, ChatReply(text="ok")
    )
    context = CallContext(stage="judge", item="901", step=0, labels={"role": "judge", "metric": "coherence"})
    write_stage(tmp_path / "recordings" / "judge", [RecordedCall(context=context, record=record)])
    result = CliRunner().invoke(main, ["audit", "--recordings", "recordings", "--format", "markdown"])
    assert result.exit_code == 0, result.output
    tokens = MarkdownIt("commonmark").enable("table").parse(result.stdout)
    rows = [t for t in tokens if t.type == "tr_open"]
    cells = _cells(tokens)
    assert len(cells) == 2 * len(rows)  # every row its two cells
    model = cells[cells.index("model") + 1]
    assert model == f"fake {shown(name, one_line=True)} (d)"
    code = [c for t in tokens if t.type == "inline" for c in t.children or [] if c.type == "code_inline"]
    assert f"fake {shown(name, one_line=True)} (d)" in [c.content.strip(" ") for c in code]


# --- any text -------------------------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)  # halves included


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_any_text_reaches_a_page_a_label_and_a_cell_as_itself_shown(text: str) -> None:
    """Whatever a reply holds (a lone surrogate, U+FFFF, any control): the page's text and attribute,
    the <pre>'s text, the SVG label and the table cell hold none of it raw, can be written as UTF-8,
    and parse back to the text as shown."""
    page = make_environment().from_string('<p title="{{ v }}">{{ v }}</p>').render(v=text)
    element = next(e for e in Page(page).root.walk() if e.tag == "p")
    assert element.text() == shown(text) and element.attrs["title"] == shown(text)
    for written in (page, exact(text), svg_text(text), table_cell(text)):
        assert not RAW.search(written)
        written.encode("utf-8")  # no lone surrogate
    assert (ET.fromstring(f"<t>{svg_text(text)}</t>").text or "") == shown(text, one_line=True)
    cells = _cells(MarkdownIt("commonmark").enable("table").parse(f"| a |\n|---|\n| {table_cell(text)} |\n"))
    assert cells == ["a", shown(text, one_line=True).strip()]  # a cell's edges are not its content
