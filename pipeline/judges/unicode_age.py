"""A reply read as Unicode 14.0 reads it, whichever Python reads it.

The readers' patterns rest on what Python's Unicode database says of each character: `\\w`, `\\b`,
`\\d`, str.isalnum(), case. Python 3.11 knows Unicode 14.0, 3.12 15.0 and 3.13 15.1, and the 5,116
characters added in between (a Kawi letter, U+11F04; CJK ideographs of Extension I) are nothing to
3.11 and letters or digits to 3.12 or 3.13. So a recorded reply `Score: 4` followed by one was read
as 4 on 3.11 and as no score on 3.12: the replay of one recording wrote other outputs on another
Python. Every other character is read alike by the three in each property the readers rest on
(category, letter, digit, space, case: tests/test_scores_unicode_age.py holds their digest). Not in
all: str.isnumeric() of ten CJK ideographs (U+4E24 among them) on 3.13, str.islower() of five modifier
letters (U+10FC) from 3.12 on, str.isidentifier(), unicodedata.east_asian_width() of unassigned code
points, and repr(), NFKC and the combining class of the new characters differ; no reader of a reply
uses them.

`as_unicode_14` gives the text with each such character replaced by a private-use character, which
every Python reads as 3.11 reads an unassigned one (no letter, digit, space or case): one of its own
for each, not in the text, so that what a reading quotes maps back to the reply's own characters.
`checked_as_unicode_14` gives it for a yes-or-no check (the assessor's sections and quotes).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence

# The code points assigned in Unicode 15.0 and 15.1 (unassigned to Python 3.11's unicodedata,
# assigned to 3.13's), as (first, last).
ADDED_AFTER_14: tuple[tuple[int, int], ...] = (
    (0x00CF3, 0x00CF3), (0x00ECE, 0x00ECE), (0x02FFC, 0x02FFF), (0x031EF, 0x031EF), (0x10EFD, 0x10EFF),
    (0x1123F, 0x11241), (0x11B00, 0x11B09), (0x11F00, 0x11F10), (0x11F12, 0x11F3A), (0x11F3E, 0x11F59),
    (0x1342F, 0x1342F), (0x13439, 0x13455), (0x1B132, 0x1B132), (0x1B155, 0x1B155), (0x1D2C0, 0x1D2D3),
    (0x1DF25, 0x1DF2A), (0x1E030, 0x1E06D), (0x1E08F, 0x1E08F), (0x1E4D0, 0x1E4F9), (0x1F6DC, 0x1F6DC),
    (0x1F774, 0x1F776), (0x1F77B, 0x1F77F), (0x1F7D9, 0x1F7D9), (0x1FA75, 0x1FA77), (0x1FA87, 0x1FA88),
    (0x1FAAD, 0x1FAAF), (0x1FABB, 0x1FABD), (0x1FABF, 0x1FABF), (0x1FACE, 0x1FACF), (0x1FADA, 0x1FADB),
    (0x1FAE8, 0x1FAE8), (0x1FAF7, 0x1FAF8), (0x2B739, 0x2B739), (0x2EBF0, 0x2EE5D), (0x31350, 0x323AF),
)  # fmt: skip
_STARTS = [low for low, _ in ADDED_AFTER_14]
# The characters that may be one of them: the BMP's few ranges as they are, then everything from the
# first astral one on. Few ranges, so sre scans the class fast (the 35 above cost it 40 us for a reply
# of 450 characters); a reply's curly quotes, dashes, CJK and Hangul are not in it, and are not
# looked at one by one (all of a reply's distinct characters were: 0.75 ms for 3,000 CJK characters).
_IN_THE_BMP = "".join(f"{chr(low)}-{chr(high)}" for low, high in ADDED_AFTER_14 if high < 0x10000)
_FIRST_ASTRAL = chr(min(low for low, _ in ADDED_AFTER_14 if low >= 0x10000))
_MAY_BE_ADDED = re.compile(f"[{_IN_THE_BMP}{_FIRST_ASTRAL}-\U0010ffff]")


def _added(text: str) -> list[str]:
    """The distinct characters of `text` added since Unicode 14.0, in order."""
    if text.isascii():  # nearly every reply
        return []
    found = []
    for character in sorted(set(_MAY_BE_ADDED.findall(text))):  # an emoji at most, nearly always
        at = bisect.bisect_right(_STARTS, ord(character)) - 1
        if at >= 0 and ord(character) <= ADDED_AFTER_14[at][1]:
            found.append(character)
    return found


# Private use in planes 16 and 15: "Co" to every Unicode, for good; 131,068 of them.
_PRIVATE = re.compile("[\U000f0000-\U000ffffd\U00100000-\U0010fffd]")


def as_unicode_14(text: str) -> tuple[str, dict[int, str]]:
    """The text to read, and the table that maps what a reading quotes of it back to `text` ({} and
    `text` itself where it holds no character added since Unicode 14.0, nearly always)."""
    (readable,), back = all_as_unicode_14((text,))
    return readable, back


def all_as_unicode_14(texts: Sequence[str]) -> tuple[tuple[str, ...], dict[int, str]]:
    """`as_unicode_14` of texts read together (a reply, and the labels and the metric a reader looks
    for in it): a character is the same stand-in in each, and no stand-in is a character one holds."""
    added = _added("".join(texts))
    if not added:
        return tuple(texts), {}
    stand_ins = dict(zip(added, _unused("".join(texts)), strict=False))
    back = {ord(stand_in): character for character, stand_in in stand_ins.items()}
    # Texts holding every private-use character as well (131,068 of them) have no stand-in left for
    # the rest: each is read as U+FFFD, no letter either, and quoted so.
    table = {ord(character): stand_ins.get(character, "\ufffd") for character in added}
    return tuple(text.translate(table) for text in texts), back


def checked_as_unicode_14(text: str) -> str:
    """The text for a check that quotes nothing back (is a section empty of words? does a quote occur
    in the transcript?): each character added since Unicode 14.0 one and the same private-use
    character, which is no letter to any Python, as each of them is none to 3.11."""
    return text.translate(dict.fromkeys(map(ord, added), "\U00100000")) if (added := _added(text)) else text


def _unused(text: str) -> Iterator[str]:
    taken = set(_PRIVATE.findall(text))
    for first, last in ((0x100000, 0x10FFFD), (0xF0000, 0xFFFFD)):
        yield from (chr(code) for code in range(first, last + 1) if chr(code) not in taken)
