"""A recorded call's <div> as the report writes it (pipeline.experiments.paper.report.call_markup):
the bytes the jinja macro it replaced (templates/calls.html.j2 until issue 31, report-fast) wrote,
under the report's own template settings, whatever the call's fields, a missing call included."""

from __future__ import annotations

import jinja2
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.paper.report.call_markup import call_div
from pipeline.experiments.paper.report.markup import exact, pre
from pipeline.experiments.paper.report.texts import PageTexts
from pipeline.experiments.paper.report.views import CallView, MessageView
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.reports.templating import make_environment

# templates/calls.html.j2 as it was, and item.html.j2's call of it.
MACRO = """{% macro call(c) %}
{% if c.record is none %}
<div class="call missing" id="{{ c.id }}"><strong>{{ c.label }}</strong><p class="missing-text">call not recorded: <code>{{ c.key }}</code></p><p class="note">Its prompt and reply are not in the recordings given to the report.</p></div>
{% else %}
<div class="call" id="{{ c.id }}"><b>{{ c.label }}</b>{% if c.reading %} → <b>{{ c.reading }}</b> <i>({{ c.reading_note }})</i>{% endif %} <small><code>{{ c.key }}</code> · {% if show_model %}{{ c.record.model.backend }}:{{ c.record.model.name }} · {% endif %}answered {{ c.record.created_at }} · {{ c.options }}</small>
{% for m in c.messages %}{% if m.collapsed %}<details class="msg"><summary><span class="role">{{ m.role }}</span>{{ "{:,}".format(m.text.chars) }} characters, {{ m.text.lines }} lines</summary>{{ pre(m.text, referenced) }}</details>{% else %}{{ pre(m.text, referenced, role=m.role) }}{% endif %}
{% endfor %}
{{ pre(c.reply, referenced, "reply") }}</div>
{% endif %}
{% endmacro %}
"""  # noqa: E501
CALLER = (
    '{% import "calls.html.j2" as calls with context %}\n'
    "{% for call in calls_ %}{{ calls.call(call) }}{% endfor %}"
)


def by_macro(calls: list[CallView], referenced: set[str], show_model: bool) -> str:
    env = make_environment(exact=exact)
    env.loader = jinja2.DictLoader({"calls.html.j2": MACRO, "caller.html.j2": CALLER})
    env.globals.update(pre=pre)
    template = env.get_template("caller.html.j2")
    return template.render(calls_=calls, referenced=referenced, show_model=show_model)


ODD = st.sampled_from(["", "a", "x\"<y>&z'", "score 4", "  ", "\r\n", "評価"]) | st.text(max_size=30)


@st.composite
def calls(draw: st.DrawFn) -> tuple[list[CallView], set[str]]:
    texts = PageTexts()
    views, ids = [], []
    for n in range(draw(st.integers(1, 4))):
        ident, key = f"c{n}&<{n}>", draw(ODD)
        if draw(st.booleans()):
            views.append(CallView(ident, draw(ODD), key, None, "", "", "", (), None))
            continue
        model = ModelIdentity(backend=draw(ODD), name=draw(ODD), digest="d")
        contents = draw(st.lists(ODD | st.just("line\n" * 30), min_size=1, max_size=3))
        roles = st.sampled_from(["system", "user", "assistant"])
        request = ChatRequest(messages=tuple(Message(role=draw(roles), content=c) for c in contents))
        record = CallRecord.new(model, request, ChatReply(text=draw(ODD)))
        messages = tuple(
            MessageView(m.role, texts.place(m.content, f"{ident}-m{j}", "message"), draw(st.booleans()))
            for j, m in enumerate(request.messages)
        )
        reply = texts.place(record.reply.text, f"{ident}-reply", "reply")
        ids += [p.id for p in (*(m.text for m in messages), reply)]
        views.append(
            CallView(ident, draw(ODD), key, record, draw(ODD), draw(ODD), draw(ODD), messages, reply)
        )
    referenced = set(draw(st.lists(st.sampled_from(ids), unique=True))) if ids else set()
    return views, referenced


@settings(max_examples=150, deadline=None)
@given(calls(), st.booleans())
def test_a_call_is_written_as_the_macro_wrote_it(
    found: tuple[list[CallView], set[str]], show_model: bool
) -> None:
    views, referenced = found
    assert "".join(call_div(c, referenced, show_model) for c in views) == by_macro(
        views, referenced, show_model
    )


def test_every_field_is_escaped() -> None:
    hostile = '<script>alert("x")</script>&'
    view = CallView(hostile, hostile, hostile, None, "", "", "", (), None)
    html = call_div(view, set(), show_model=True)
    assert "<script>" not in html and html.count("&lt;script&gt;") == 3
