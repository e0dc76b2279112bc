"""A text that holds an escape's own characters (a model typing the six characters `\\u202e`) is
shown apart from the character it names (a real U+202E, shown as `\\u202e`), by every writer that
shows escapes: the terminal, the pages' templates and <pre>, a Markdown cell, an SVG label. The rule
is pipeline.llm.terminal's: a backslash run before an escape's look is shown doubled, so a shown text
reads back to the text."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.paper.report.markup import exact
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.terminal import guarded, shown, shown_line
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.reports.markdown import table_cell
from pipeline.reports.svg import svg_text
from pipeline.reports.templating import make_environment
from pipeline.tools.audit.formats import format_text

TYPED = "\\u202e"  # six characters a model typed
REAL = "\u202e"  # the character itself

_NAMED = {"r": "\r", "v": "\x0b", "f": "\x0c", "b": "\x08", "0": "\x00", "n": "\n", "t": "\t"}
_READ = re.compile(r"(\\+)([rvfb0nt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})?")


def read_back(text: str) -> str:
    """A shown text read as the module's docstring says a reader reads it."""

    def one(match: re.Match[str]) -> str:
        run, look = match[1], match[2]
        if look is None:
            return run
        half = run[: len(run) // 2]
        if len(run) % 2 == 0:
            return half + look
        return half + (_NAMED[look] if look in _NAMED else chr(int(look[1:], 16)))

    return _READ.sub(one, text)


def _page_text(text: str) -> str:
    return make_environment().from_string("<p>{{ v }}</p>").render(v=text)


def _page_attribute(text: str) -> str:
    return make_environment().from_string('<p title="{{ v }}"></p>').render(v=text)


def _audit(text: str) -> str:
    """What `judgeloop audit` prints of a reply (its text format), as the command prints it."""
    identity = ModelIdentity(backend="fake", name="m", digest="d")
    request = ChatRequest(messages=(Message(role="user", content="Rate this."),))
    record = CallRecord.new(identity, request, ChatReply(text=text, done_reason="stop"))
    call = RecordedCall(context=CallContext(stage="judge", item="901", step=0), record=record)
    return guarded(format_text(call, {}))


WRITERS: dict[str, Callable[[str], str]] = {
    "audit": _audit,
    "a line of status, exp list, diff": shown_line,
    "a page's text": _page_text,
    "a page's attribute": _page_attribute,
    "an item page's <pre>": exact,
    "a Markdown table cell": table_cell,
    "an SVG label": svg_text,
}


@pytest.mark.parametrize("writer", WRITERS.values(), ids=WRITERS.keys())
@pytest.mark.parametrize("typed, real", [(TYPED, REAL), ("\\x1b[2J", "\x1b[2J"), ("a\\rb", "a\rb")])
def test_typed_escape_characters_are_shown_apart_from_the_character(
    writer: Callable[[str], str], typed: str, real: str
) -> None:
    assert writer(typed) != writer(real)
    assert writer("\\" + real) not in (writer(typed), writer(real))  # a backslash, then the character


def test_the_typed_characters_show_with_the_backslash_doubled_and_other_backslashes_as_they_are() -> None:
    assert shown(TYPED) == "\\\\u202e" and shown(REAL) == "\\u202e"
    assert shown("C:\\data \\alpha \\ \\u12 \\x1") == "C:\\data \\alpha \\ \\u12 \\x1"


TRICKY = st.text(
    st.sampled_from(["\\", "u", "U", "x", "2", "0", "e", "F", "n", "t", "\t", "\n", "\r", REAL, "\x1b", "a"])
    | st.characters(codec=None, exclude_categories=()),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_a_shown_text_reads_back_to_the_text(text: str) -> None:
    """Two texts never show the same: each of the three forms reads back by one rule."""
    assert read_back(shown(text)) == text
    assert read_back(shown(text, one_line=True)) == text
    assert read_back(shown_line(text)) == text


def test_audit_s_raw_text_keeps_the_reply_as_recorded() -> None:
    """`audit --raw`: the exact text, a typed escape's backslash not doubled (the header's values are
    shown on one line either way)."""
    identity = ModelIdentity(backend="fake", name="m", digest="d")
    request = ChatRequest(messages=(Message(role="user", content=f"say {TYPED}"),))
    record = CallRecord.new(identity, request, ChatReply(text=f"{TYPED}{REAL}", done_reason="stop"))
    call = RecordedCall(context=CallContext(stage="judge", item="901", step=0), record=record)
    raw = format_text(call, {}, raw=True)
    assert f"  | {TYPED}{REAL}\n" in raw and f"  | say {TYPED}\n" in raw
    assert f"  | {shown(TYPED + REAL)}\n" in format_text(call, {})
