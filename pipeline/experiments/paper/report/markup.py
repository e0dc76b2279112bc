"""A placed text (.texts.Placed) as the `<pre>` element an item page shows it in.

Written here rather than as a jinja macro because it is the report's innermost loop: about 45 `<pre>`
elements a page, each a handful of segments, 6,000 at the paper's 133 items, where a macro's call
and its autoescaped fields cost more than the rest of the page's template (bench/README.md, issue
31, agg-pages). The output is the macro's, byte for byte, and escaped the same way: every id, class,
role and label through markupsafe's escape (jinja's autoescape), every text through `exact`; every
text and label a reader sees through `shown`, as the templates' `visible` shows it.

Only elements that some link points to get an id (`referenced`). All on one line: whitespace in a
`<pre>` is content. A `<pre>` drops one newline right after its start tag, so a text starting with
one gets another.
"""

from __future__ import annotations

from collections.abc import Container
from functools import lru_cache

from markupsafe import Markup, escape

from pipeline.experiments.paper.report.texts import Placed
from pipeline.llm.terminal import shown, shown_apart


def exact(text: str) -> Markup:
    """Text content of an element, escaped: & and <, all that can start markup or a reference there
    (quotes and > need no escape outside attributes, and prompts are full of them), and every
    control, bidi and invisible character shown as its escape, as every page shows a text
    (pipeline.reports.templating.visible): a carriage return would read as a newline, a bidi
    override would reorder the prompt on the screen. What the page shows is then what the prompt holds, each
    character of it (`judgeloop audit --format jsonl` gives the characters themselves)."""
    return Markup(_escaped(text))


def _escaped(text: str) -> str:
    """exact's text as a plain str: pre joins many of them and marks the whole element once."""
    return _markup(shown(text))


def _markup(shown_text: str) -> str:
    return shown_text.replace("&", "&amp;").replace("<", "&lt;")


def pre(
    p: Placed, referenced: Container[str], kind: str = "", role: str = "", with_id: bool = False
) -> Markup:
    """`p` in a `<pre>` of class `kind` and data-role `role` (each left out when empty), with its id
    when `with_id` or when a link points to it, a span with an id around each part a link points to,
    and a link for each reference to a text shown earlier."""
    out = ["<pre"]
    if kind:
        out.append(f' class="{escape(kind)}"')
    if role:  # shown by the stylesheet (content: attr(data-role))
        out.append(f' data-role="{escape(shown(role))}"')
    if with_id or p.id in referenced:
        out.append(f' id="{escape(p.id)}"')
    out.append(">\n" if p.lead[:1] == "\n" else ">")
    out.append(_escaped(p.lead))
    core = p.core_id in referenced
    if core:
        out.append(f'<span id="{escape(p.core_id)}">')
    for n, s in enumerate(p.segments):
        # A backslash that ends a part reads with the start of the next (shown_apart); the lead and
        # the trail are whitespace, and end in none.
        text = shown(s.text) if s.text[-1:] != "\\" else _shown_before(p, n)
        if s.target:
            out.append(f'<a href="#{escape(s.target)}">{escape(text)}</a>')
        elif s.home in referenced:
            out.append(f'<span id="{escape(s.home)}">{_markup(text)}</span>')
        else:
            out.append(_markup(text))
    if core:
        out.append("</span>")
    out.append(_escaped(p.trail))
    out.append("</pre>")
    return Markup("".join(out))


def _shown_before(p: Placed, n: int) -> str:
    return shown_apart([*(s.text for s in p.segments[n:]), p.trail])[0]


def shared_pre(p: Placed, referenced: Container[str]) -> Markup:
    """`pre(p, referenced)` for a prompt template's part: the same few parts on every page, so each is
    written once a process for each set of its ids that some link points to."""
    ids = (p.id, p.core_id, *(s.home for s in p.segments))
    return _shared_pre(p, frozenset(i for i in ids if i in referenced))


@lru_cache(maxsize=512)
def _shared_pre(p: Placed, referenced: frozenset[str]) -> Markup:
    return pre(p, referenced)
