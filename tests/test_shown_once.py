"""A recorded or configured text is shown once where it is written (pipeline.llm.terminal.shown), never
escaped twice, and never left unescaped (review9 of exact-left):

- a call's options (`stop` strings) on the paper report's pages and in `judgeloop audit`: spelled as
  Python's repr they were shown a second time, so a real newline stop read as the two characters a
  model types (`\\\\n`);
- `judgeloop audit`'s score line (a field's value, an error: not shown at all, so a typed `\\u202e`
  read as the character) and, in its Markdown, the heading and the score line (shown, but not escaped
  for Markdown, which halves a doubled backslash when it is rendered);
- an item page's `<pre>`, which shows its text in pieces: a backslash that ends one piece was shown
  without what follows it, so `\\` and a carriage return read as a typed `\\r`;
- `judgeloop diff --item`'s refusal lists the items the runs judged: ids from data files, printed
  with their control characters as they are."""

from __future__ import annotations

import html
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import tests.test_report_html as sample
from pipeline.experiments.paper.report.html import render_report
from pipeline.experiments.paper.report.markup import pre
from pipeline.experiments.paper.report.texts import PageTexts
from pipeline.judges.call_reading import CallReading
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.terminal import guarded, shown, shown_apart
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity, Options
from pipeline.tools.audit.formats import Readers, format_markdown, format_text
from pipeline.tools.diff.command import _item_view
from tests.test_typed_escapes import TRICKY, read_back

STOP = "a\nb\\nc"  # a real newline, then the two characters backslash and n
SPELLED = f"stop=['{STOP}']"  # what the options show, read back by the one rule


def test_the_options_on_the_report_pages_read_back_to_the_stop_string(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sample, "HOSTILE", "x")
    real = Options
    monkeypatch.setattr(sample, "Options", lambda stop: real(stop=(STOP,)))
    refinements, summary, records = sample.build_hostile()
    report = render_report(refinements, summary, records, "x")
    [page] = report.pages.values()
    for name, text in (("index", report.index), ("item page", page)):
        shown = [html.unescape(dd[: dd.index("</dd>")]) for dd in text.split("<dd>")[1:] if "stop=" in dd]
        assert shown, name
        for value in shown:
            assert "\n" not in value, name  # on one line
            assert read_back(value[value.index("stop=") :]).startswith(SPELLED), (name, value)


def _call(options: Options) -> RecordedCall:
    identity = ModelIdentity(backend="fake", name="m", digest="d")
    request = ChatRequest(messages=(Message(role="user", content="Rate this."),), options=options)
    record = CallRecord.new(identity, request, ChatReply(text="Score: 3", done_reason="stop"))
    return RecordedCall(context=CallContext(stage="judge", item="901", step=0), record=record)


def test_audit_s_options_read_back_to_the_stop_string() -> None:
    call = _call(Options(stop=(STOP,)))
    [line] = [line for line in format_text(call, {}).splitlines() if line.startswith("options")]
    assert read_back(line).endswith(SPELLED)
    [row] = [row for row in format_markdown(call, {}).splitlines() if row.startswith("| options")]
    assert read_back(row).endswith(f"{SPELLED}` |")


def test_diff_s_refusal_shows_the_items_it_lists_escaped() -> None:
    judged: dict[Any, Any] = {("paper", "301\x1b[2J\u202e", 0, "coherence"): None}
    run = SimpleNamespace(judgements=judged, calls={})
    with pytest.raises(click.ClickException) as refused:
        _item_view(run, run, "999", None, None)  # type: ignore[arg-type]
    message = refused.value.format_message()
    assert "301\\x1b[2J\\u202e" in message and "\x1b" not in message and "\u202e" not in message


TYPED, REAL = "\\u202e", "\u202e"


def _read_as(reading: CallReading) -> Readers:
    return {"judge": lambda context, record: reading}


def _rendered(markdown: str) -> str:
    """The text a reader of the rendered Markdown sees (`audit --format markdown` pasted in an issue)."""
    return html.unescape(MarkdownIt().render(markdown))


@pytest.mark.parametrize(
    "reading",
    [
        lambda text: CallReading(3, "read", matched=f"Score: 3 {text}"),
        lambda text: CallReading(None, "invalid", fields={"verdict": f"yes {text}"}),
        lambda text: CallReading(None, "invalid", error=f"not a score: {text}"),
    ],
    ids=["matched", "field", "error"],
)
def test_audit_s_score_line_shows_a_typed_escape_apart_from_the_character(
    reading: Callable[[str], CallReading],
) -> None:
    """In the text (a field's value and an error were printed unshown, a typed escape read as the
    character) and in the Markdown, rendered (the score line's backslashes were not escaped for it)."""
    typed, real = (_read_as(reading(text)) for text in (TYPED, REAL))
    call = _call(Options())
    text = [guarded(format_text(call, {}, read=read)).splitlines()[-1] for read in (typed, real)]
    assert text[0] != text[1] and read_back(text[0]).endswith(read_back(text[1]).replace(REAL, TYPED))
    marked = [
        _rendered(guarded(format_markdown(call, {}, read=read))).splitlines()[-1] for read in (typed, real)
    ]
    assert marked[0] != marked[1], marked


def test_audit_s_markdown_heading_shows_a_typed_escape_apart_from_the_character() -> None:
    headings = []
    for item in (f"9{TYPED}", f"9{REAL}", "9*a*"):
        call = RecordedCall(
            context=CallContext(stage="judge", item=item, step=0), record=_call(Options()).record
        )
        headings.append(_rendered(guarded(format_markdown(call, {}))).splitlines()[0])
    assert headings == [
        "<h3>stage=judge item=9\\\\u202e step=0</h3>",
        "<h3>stage=judge item=9\\u202e step=0</h3>",
        "<h3>stage=judge item=9*a* step=0</h3>",
    ]


def test_an_item_page_s_pre_reads_back_where_a_backslash_ends_one_of_its_pieces() -> None:
    """The `<pre>` shows a text in pieces (its outer whitespace, its parts, the texts it links to):
    each shown alone, a reply's closing backslash and the carriage return after it read as a typed
    `\\\\r`, and its typed `\\\\u202e` split after the backslash as the character."""
    texts = PageTexts()
    texts.start_item()
    for text in ("Score: 3 \\\r\n", "a \\\x0c", "plain\n"):
        element = str(pre(texts.place(text, "x", "reply"), set()))
        shown_text = html.unescape(element[element.index(">") + 1 : element.rindex("</pre>")])
        assert read_back(shown_text) == text, (text, shown_text)


@settings(max_examples=300, deadline=None)
@given(st.lists(TRICKY, max_size=5))
def test_texts_shown_apart_read_as_their_whole_shown(parts: list[str]) -> None:
    assert "".join(shown_apart(parts)) == shown("".join(parts))


@pytest.mark.parametrize(
    ("stops", "spelled"),
    [
        (("a', 'b",), """stop=["a', 'b"]"""),  # one stop holding a quote, a comma and a quote
        (("a", "b"), "stop=['a', 'b']"),  # two stops
        (('it\'s "x"',), """stop=['it\\'s "x"']"""),  # both quotes: the one around it escaped
        (("x\\'\"",), """stop=['x\\\\\\'"']"""),  # a backslash before the escaped quote: doubled
        (("a\\", "b"), """stop=['a\\\\', 'b']"""),  # a backslash before the closing quote: doubled (review16)
        (("it's\\",), """stop=["it's\\\\"]"""),  # the same between double quotes
    ],
)
def test_a_quote_in_a_stop_string_never_reads_as_the_end_of_it(stops: tuple[str, ...], spelled: str) -> None:
    """As Python spells a list (review9: `'` was written as itself between `'`, so one stop `a', 'b`
    read as two)."""
    call = _call(Options(stop=stops))
    [line] = [line for line in format_text(call, {}).splitlines() if line.startswith("options")]
    assert line.endswith(spelled), line
    assert spelled.removeprefix("stop=") == repr(list(stops))  # no character here that repr escapes else
