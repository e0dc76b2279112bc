"""Text others wrote, placed in a report's Markdown (report.md) so it stays the text it is.

A model's name comes from the recordings (a colleague's, a server's model listing): a backtick ends
a code span early, a blank line ends the paragraph, and what follows is Markdown of the name's own
(an image fetched from elsewhere when the report is viewed, a heading, a table row). `code_span`
writes it as one code span on one line, whatever it holds.

A table's cells hold names from params and data files (a metric, a RAG dimension, a label column):
a `|` ends the cell early and a line break the table, so that the rows after it read under other
columns. `table_cell` writes such a name as one cell that reads as the text it is, `code_cell` a
value as one code span in a cell (`judgeloop audit --format markdown`'s header).
"""

from __future__ import annotations

import re

from pipeline.judges.unicode_age import as_unicode_14
from pipeline.llm.terminal import shown

_TICKS = re.compile(r"`+")
# What would end a cell or start Markdown of its own (code, emphasis, a link or an image, HTML or an
# entity, a strikethrough; a backslash itself); `_` only where it can open or close emphasis, so a
# name such as source_attribution is written as it is.
_CELL_SPECIAL = re.compile(r"[\\`*\[\]<&~|]|(?<![^\W_])_|_(?![^\W_])")


def code_span(text: str) -> str:
    """`text` as one inline code span: line breaks and controls shown as escapes (pipeline.llm.terminal),
    fenced by one backtick more than its longest run of them, padded by a space where it starts or
    ends with a backtick (CommonMark strips one such space each side). A plain name: `name`."""
    text = shown(text, one_line=True)
    fence = "`" * (max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table_cell(text: str) -> str:
    """`text` as one cell of a Markdown table (GFM): on one line, controls shown as escapes
    (pipeline.llm.terminal), and each character that would end the cell or start Markdown (see
    _CELL_SPECIAL) escaped with a backslash. A plain name is written as it is. Read as Unicode 14.0
    reads it, so that every Python writes it alike (pipeline.judges.unicode_age)."""
    readable, back = as_unicode_14(shown(text, one_line=True))
    return _CELL_SPECIAL.sub(lambda m: "\\" + m[0], readable).translate(back)


def code_cell(text: str) -> str:
    """`text` as one code span in a cell of a Markdown table (GFM): `code_span`, with each `|` as `\\|`,
    which ends no cell and reads as `|` in the span (GFM's one escape inside a code span)."""
    return code_span(text).replace("|", "\\|")
