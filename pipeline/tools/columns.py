"""A line's width as a terminal shows it, for tables that keep to 100 columns (`judgeloop compare`).

len() counts characters; a terminal gives an East Asian wide or fullwidth character (a metric named
连贯性, an emoji) two columns, a combining mark (é written e and U+0301), a Devanagari vowel sign or
a Hangul medial vowel none, and an emoji and its skin tone or presentation selector two together
(👍🏽, ❤️). That is the wcwidth library's table, the one terminals' own libraries follow (here a
dependency of DVC's, pinned in requirements/lock.txt), where counting by hand (unicodedata's
combining class and East Asian width) got about two thousand characters wrong: a name cut by it
overflowed its table or left its numbers out of line. A text is cut between graphemes, never
between a letter and its mark. Text reaching here has been escaped (pipeline.llm.terminal.shown):
no control character is left (were one left, it counts one column, as its escape would).
"""

from __future__ import annotations

from wcwidth import iter_graphemes, wcswidth


def columns(text: str) -> int:
    """How many columns `text` takes on a terminal."""
    if text.isascii():
        return len(text)
    width = wcswidth(text)
    return width if width >= 0 else sum(max(wcswidth(grapheme), 1) for grapheme in iter_graphemes(text))


def fit(text: str, width: int) -> str:
    """`text` in at most `width` columns: cut between graphemes, and an ellipsis, where it is wider."""
    if columns(text) <= width:
        return text
    kept, used = [], 0
    for grapheme in iter_graphemes(text):
        used += columns(grapheme)
        if used > width - 1:
            break
        kept.append(grapheme)
    return "".join(kept) + "…"


def pad(text: str, width: int) -> str:
    """`text` followed by spaces to `width` columns."""
    return text + " " * max(width - columns(text), 0)


def right(text: str, width: int) -> str:
    """`text` after spaces to `width` columns (set to the right)."""
    return " " * max(width - columns(text), 0) + text
