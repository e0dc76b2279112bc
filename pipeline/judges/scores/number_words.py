"""Number words in verdict positions: "a score of two", "scoring a one out of five", "rated it four".

A word is read only where the same sentence written with a digit is a verdict by the prose grammar:
the reply is read a second time with each number word (zero to ten) written as its digit, and only the
verdicts whose span holds such a word are kept, mapped back onto the reply as written. Everything that
makes a digit no verdict applies unchanged ("one of the five points" is a partitive, "two out of five
sentences" a count, "if it had one more quote" a condition). A word that is a pronoun or part of an
idiom is never a number: "this one", "the one", "each one", "one by one", "one another", "one-sided".
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from pipeline.judges.scores.candidates import Candidate
from pipeline.judges.scores.lazy import lazy_compile

DIGITS: Final[dict[str, str]] = {
    word: str(value)
    for value, word in enumerate(
        ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    )
}
NUMBER_WORD: Final = lazy_compile(
    rf"(?<![\w'’-])(?P<word>{'|'.join(DIGITS)})(?![\w'’-])"
    # "one by one", "one another", "one more", "one at a time", "one after the other"
    r"(?![ \t]{1,3}(?:by|another|more|at[ \t]a[ \t]time|after|other|else)\b)",
    re.IGNORECASE,
)
# "this one", "the one", "each one", "no one", "the previous one": a pronoun, not a number.
_PRONOUN_BEFORE: Final = lazy_compile(
    r"\b(?:this|that|the|each|every|any|no|some|which|another|other|only|just|previous|next|last|first"
    r"|second|same|right|wrong|better|best|worse|worst|single|new|old|latter|former|original)[ \t]{1,3}$",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class Translation:
    """The reply with number words as digits, and where each digit came from."""

    text: str
    starts: tuple[int, ...]  # where each replaced word starts in the translation
    originals: tuple[tuple[int, int], ...]  # its span in the reply as written
    words: tuple[str, ...]

    def original(self, position: int) -> int:
        """The reply's index for ``position`` in the translation (inside a digit: the word's start)."""
        at = bisect.bisect_right(self.starts, position) - 1
        if at < 0:
            return position
        start, (word_start, word_end) = self.starts[at], self.originals[at]
        digits = len(DIGITS[self.words[at]])
        if position < start + digits:
            return word_start if position == start else word_end
        return word_end + position - (start + digits)


def translate(text: str) -> Translation | None:
    """None when the reply holds no number word that could be a number."""
    pieces: list[str] = []
    starts: list[int] = []
    originals: list[tuple[int, int]] = []
    words: list[str] = []
    done = length = 0
    for match in NUMBER_WORD.finditer(text):
        if _PRONOUN_BEFORE.search(text, max(0, match.start() - 12), match.start()):
            continue
        pieces.append(text[done : match.start()])
        length += match.start() - done
        word = match.group("word").lower()
        starts.append(length)
        originals.append((match.start(), match.end()))
        words.append(word)
        pieces.append(DIGITS[word])
        length += len(DIGITS[word])
        done = match.end()
    if not starts:
        return None
    pieces.append(text[done:])
    return Translation("".join(pieces), tuple(starts), tuple(originals), tuple(words))


def word_candidates(text: str, read: Callable[[str], Iterable[Candidate]]) -> Iterator[Candidate]:
    """The verdicts ``read`` finds in the translated reply whose span holds a number word, placed in
    the reply as written."""
    translation = translate(text)
    if translation is None:
        return
    for found in read(translation.text):
        start = found.end - len(found.matched)
        first = bisect.bisect_left(translation.starts, start)
        if first >= len(translation.starts) or translation.starts[first] >= found.end:
            continue  # no word in it: the reading of the reply as written has it already
        begin, end = translation.original(start), translation.original(found.end)
        yield dataclasses.replace(
            found, position=translation.original(found.position), end=end, matched=text[begin:end]
        )
