"""A line's width as a terminal shows it, for tables that keep to 100 columns (`judgeloop compare`).

len() counts characters; a terminal gives an East Asian wide or fullwidth character (a metric named
连贯性, an emoji) two columns and a combining mark none, so a name cut by len() overflowed its table.
Text reaching here has been escaped (pipeline.llm.terminal.shown): no control character is left.
"""

from __future__ import annotations

import unicodedata


def _width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def columns(text: str) -> int:
    """How many columns `text` takes on a terminal."""
    return len(text) if text.isascii() else sum(map(_width, text))


def fit(text: str, width: int) -> str:
    """`text` in at most `width` columns: cut, and an ellipsis, where it is wider."""
    if columns(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += _width(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + "…"


def pad(text: str, width: int) -> str:
    """`text` followed by spaces to `width` columns."""
    return text + " " * max(width - columns(text), 0)


def right(text: str, width: int) -> str:
    """`text` after spaces to `width` columns (set to the right)."""
    return " " * max(width - columns(text), 0) + text
