"""Text others wrote, placed in a report's Markdown (report.md) so it stays the text it is.

A model's name comes from the recordings (a colleague's, a server's model listing): a backtick ends
a code span early, a blank line ends the paragraph, and what follows is Markdown of the name's own
(an image fetched from elsewhere when the report is viewed, a heading, a table row). `code_span`
writes it as one code span on one line, whatever it holds.
"""

from __future__ import annotations

import re

from pipeline.llm.terminal import shown

_TICKS = re.compile(r"`+")


def code_span(text: str) -> str:
    """`text` as one inline code span: line breaks and controls shown as escapes (pipeline.llm.terminal),
    fenced by one backtick more than its longest run of them, padded by a space where it starts or
    ends with a backtick (CommonMark strips one such space each side). A plain name: `name`."""
    text = shown(text, one_line=True)
    fence = "`" * (max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
