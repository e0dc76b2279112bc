"""Verdicts that close the reply inside its last sentence: after a semicolon or a comma, or in parentheses.

    fraction_closing  "... is missing; 4 out of 5.", "..., 3/5.", "... therefore it is irrelevant (2/5)."
    verdict_closing   "..., score of 2.", "...; a score of 4.", "..., an overall rating of 3."

What makes these a verdict is where they stand: the reply's last words, after its justification, as
``fraction_closing`` reads a fraction alone after a blank line. The same phrase anywhere else is a count
or a description and is not read ("...; 2 out of 4 claims are supported, and ..."): nothing may follow
but "overall" and the sentence's end. A fraction in parentheses is read only when nothing in its
sentence is a number (a count restated as a fraction, "it supports 2 of the 5 claims (2/5).", is not a
verdict), and never when a noun follows it inside the parentheses ("(2/5 claims)"). A list of numbers
before the comma ("1, 2, 3/5") is no clause at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Literal

from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.prose_context import generic, hedged, hypothetical
from pipeline.judges.scores.prose_lexicon import FRACTION_B, NOUN, SP, VALUE_B

ClosingKind = Literal["fraction_closing", "verdict_closing"]

# After ";" or ",": an optional article and one word ("a final", "an overall"), then the fraction or
# "<noun> of N".
_AFTER_PUNCT: Final = r"(?<=[;,][ \t])(?:(?:an?|the|my|its)[ \t]{1,3})?(?:(?:overall|final|total)[ \t]{1,3})?"
FRACTION_AFTER_PUNCT: Final = lazy_compile(rf"{_AFTER_PUNCT}{FRACTION_B}", re.IGNORECASE)
SCORE_OF_AFTER_PUNCT: Final = lazy_compile(rf"{_AFTER_PUNCT}{NOUN}{SP}of{SP}{VALUE_B}", re.IGNORECASE)
# "(2/5)", "(4 out of 5)", "(score: 4/5)": nothing but the fraction inside.
PARENTHESIZED: Final = lazy_compile(
    rf"\([ \t]{{0,3}}(?:{NOUN}[ \t]{{0,3}}[:=]?[ \t]{{0,3}})?{FRACTION_B}[ \t]{{0,3}}\)", re.IGNORECASE
)
GRAMMAR: Final[tuple[tuple[ClosingKind, re.Pattern[str]], ...]] = (
    ("fraction_closing", FRACTION_AFTER_PUNCT),
    ("verdict_closing", SCORE_OF_AFTER_PUNCT),
    ("fraction_closing", PARENTHESIZED),
)
# After the verdict: "overall", then the sentence's end, then nothing but blanks and markdown.
_TAIL: Final = lazy_compile(r"[ \t*_]{0,4}(?:overall[ \t*_]{0,4})?[.!]?[ \t*_\"”')]{0,6}", re.IGNORECASE)
_DIGIT: Final = lazy_compile(r"[0-9]")
_SENTENCE_END: Final = ".!?\n"
_LOOK_BACK: Final = 400


def _closes_the_reply(text: str, end: int, content_end: int) -> bool:
    tail = _TAIL.match(text, end)
    return tail is not None and tail.end() >= content_end


def _sentence_has_another_number(text: str, start: int) -> bool:
    """A digit earlier in the verdict's sentence: the parentheses restate a count, or quote a figure."""
    window = max(0, start - _LOOK_BACK)
    opening = max(text.rfind(mark, window, start) for mark in _SENTENCE_END)
    return _DIGIT.search(text, max(opening + 1, window), start) is not None


def _after_a_list(text: str, start: int) -> bool:
    """ "1, 2, 3/5": the comma separates numbers, not a clause from its verdict."""
    before = text[max(0, start - 3) : start].rstrip(" \t")
    return len(before) >= 2 and before[-2].isdigit()


def closing_matches(text: str) -> Iterator[tuple[ClosingKind, re.Match[str]]]:
    """Every verdict that ends the reply inside its last sentence, with its kind; the caller checks the
    scale. At most one per pattern can end the reply, so only the last match of each is looked at."""
    content_end = len(text.rstrip())
    for kind, pattern in GRAMMAR:
        match = None
        for match in pattern.finditer(text, max(0, content_end - _LOOK_BACK)):  # noqa: B007 (the last)
            continue
        if match is None or not _closes_the_reply(text, match.end(), content_end):
            continue
        start = match.start()
        if hypothetical(text, start) or generic(text, start) or hedged(text, start):
            continue
        if pattern is PARENTHESIZED and _sentence_has_another_number(text, start):
            continue
        if pattern is not PARENTHESIZED and _after_a_list(text, start):
            continue
        yield kind, match
