"""A recorded call (.views.CallView) as the `<div>` an item page shows it in: how its reply was read,
its key, its messages and its reply; or, when it is not in the recordings, a plain statement that it
is missing.

Written here rather than as a jinja macro (templates/calls.html.j2 before issue 31, report-fast) for
the same reason as .markup's `<pre>`: about 12 calls a page, each a macro call whose fields cost more
than the page around them. The output is the macro's, byte for byte, and escaped the same way: every
field through markupsafe's escape (jinja's autoescape), each text through .markup's `pre`.
"""

from __future__ import annotations

from collections.abc import Container

from markupsafe import Markup, escape

from pipeline.experiments.paper.report.markup import pre
from pipeline.experiments.paper.report.views import CallView

_MISSING = (
    '<div class="call missing" id="{id}"><strong>{label}</strong><p class="missing-text">call not '
    'recorded: <code>{key}</code></p><p class="note">Its prompt and reply are not in the recordings '
    "given to the report.</p></div>\n"
)


def call_div(c: CallView, referenced: Container[str], show_model: bool) -> Markup:
    """`c` as its page shows it; `show_model`: the call's model named (a run of several models)."""
    if c.record is None:
        return Markup(_MISSING.format(id=escape(c.id), label=escape(c.label), key=escape(c.key)))
    record, reply = c.record, c.reply
    assert reply is not None  # a recorded call always has its reply placed (.items)
    out = [f'<div class="call" id="{escape(c.id)}"><b>{escape(c.label)}</b>']
    if c.reading:
        out.append(f" → <b>{escape(c.reading)}</b> <i>({escape(c.reading_note)})</i>")
    out.append(f" <small><code>{escape(c.key)}</code> · ")
    if show_model:
        out.append(f"{escape(record.model.backend)}:{escape(record.model.name)} · ")
    out.append(f"answered {escape(record.created_at)} · {escape(c.options)}</small>\n")
    for m in c.messages:
        if m.collapsed:
            out.append(
                f'<details class="msg"><summary><span class="role">{escape(m.role)}</span>'
                f"{escape(format(m.text.chars, ','))} characters, {escape(m.text.lines)} lines</summary>"
                f"{pre(m.text, referenced)}</details>"
            )
        else:
            out.append(pre(m.text, referenced, role=m.role))
    out.append(f"{pre(reply, referenced, 'reply')}</div>\n")
    return Markup("".join(out))
