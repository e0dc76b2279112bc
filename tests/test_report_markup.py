"""A placed text's <pre> as the report writes it (pipeline.experiments.paper.report.markup): the bytes
the jinja macro it replaced wrote, whatever the text, the ids a link points to and the element's
class and role; a prompt template's part written once a process and reused only where the same ids
are linked to; and the known texts skipped by length exactly as a search of each would skip them."""

from __future__ import annotations

import jinja2
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.paper.report.markup import exact, pre, shared_pre
from pipeline.experiments.paper.report.texts import PageTexts, Placed, _Known, template_parts

# The macro as templates/text.html.j2 held it before it was written in Python (issue 31, agg-pages).
MACRO = (
    '{% macro pre(p, class="", role="", id=False) %}<pre{% if class %} class="{{ class }}"{% endif %}'
    '{% if role %} data-role="{{ role }}"{% endif %}{% if id or p.id in referenced %} id="{{ p.id }}"'
    '{% endif %}>{% if p.lead[:1] == "\\n" %}{{ "\\n" }}{% endif %}{{ p.lead|exact }}'
    '{% if p.core_id in referenced %}<span id="{{ p.core_id }}">{% endif %}{% for s in p.segments %}'
    '{% if s.target %}<a href="#{{ s.target }}">{{ s.text }}</a>{% elif s.home in referenced %}'
    '<span id="{{ s.home }}">{{ s.text|exact }}</span>{% else %}{{ s.text|exact }}{% endif %}'
    "{% endfor %}{% if p.core_id in referenced %}</span>{% endif %}{{ p.trail|exact }}</pre>{% endmacro %}"
    "{{ pre(p, class, role, id) }}"
)


def by_macro(p: Placed, referenced: set[str], kind: str = "", role: str = "", with_id: bool = False) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["exact"] = exact
    return env.from_string(MACRO).render(
        p=p, referenced=referenced, **{"class": kind, "role": role, "id": with_id}
    )


LONG = [f"line {n} of <a long> interview & text\r\n" * 8 for n in range(3)]
FRAGMENTS = st.sampled_from([*LONG, "Score: 3", "\n", "  ", '"quoted" <b>', template_parts()[0][2]])
TEXTS = st.lists(st.lists(FRAGMENTS, max_size=6).map("".join) | st.text(max_size=300), min_size=1, max_size=8)
NAMES = st.sampled_from(["", "reply", "feedback", 'a"b', "<x>", "user"])


@settings(max_examples=150, deadline=None)
@given(TEXTS, st.data())
def test_pre_writes_what_the_macro_wrote(texts: list[str], data: st.DataObject) -> None:
    store = PageTexts()
    placed = [store.place(text, f"t{n}&<{n}>", f"text {n}") for n, text in enumerate(texts)]
    ids = sorted({i for p in placed for i in (p.id, p.core_id, *(s.home for s in p.segments)) if i})
    # Any set of the ids linked to, not only the store's: each branch of the element is reached.
    referenced = set(data.draw(st.lists(st.sampled_from(ids), unique=True))) if ids else set()
    for p in placed:
        kind, role, with_id = data.draw(NAMES), data.draw(NAMES), data.draw(st.booleans())
        assert pre(p, referenced, kind, role, with_id) == by_macro(p, referenced, kind, role, with_id)
        assert pre(p, store.referenced) == by_macro(p, store.referenced)


def test_a_template_part_is_written_again_for_other_linked_ids() -> None:
    store = PageTexts()
    label, part = next((label, p) for label, p in store.templates if p.core_id or p.references)
    assert label
    linked = {part.id, part.core_id}
    first = shared_pre(part, set())
    assert first == pre(part, set()) and 'id="' not in first
    assert shared_pre(part, linked) == pre(part, linked) != first
    assert shared_pre(part, linked | {"unrelated"}) is shared_pre(part, linked)  # the same element reused
    assert shared_pre(part, set()) == first


def reference_substitute(text: str, known: list[_Known]) -> list[str | _Known]:
    """_substitute as it was before texts longer than `text` were skipped by bisection."""
    pieces: list[str | _Known] = [text] if text else []
    for candidate in known:
        needle, out = candidate.text, []
        for piece in pieces:
            if isinstance(piece, _Known) or len(piece) < len(needle) or needle not in piece:
                out.append(piece)
                continue
            for n, between in enumerate(piece.split(needle)):
                if n:
                    out.append(candidate)
                if between:
                    out.append(between)
        pieces = out
    return pieces


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(FRAGMENTS, min_size=1, max_size=4).map("".join), max_size=10), TEXTS)
def test_known_texts_skipped_by_length_as_a_search_skips_them(knowns: list[str], texts: list[str]) -> None:
    known = sorted(
        (_Known(k, f"k{n}", f"known {n}") for n, k in enumerate(knowns)), key=lambda k: -len(k.text)
    )
    for text in texts:
        assert PageTexts._substitute(text, known) == reference_substitute(text, known)
