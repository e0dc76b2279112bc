"""Which characters a terminal or a browser shows as nothing, or as a blank that is not a space: the
characters pipeline.llm.terminal writes as their escapes besides the controls.

The rule, from Unicode's properties rather than a list of characters someone has seen:
- every format character (general category Cf): the bidi controls, the zero-width characters, the
  tags that spell hidden ASCII, U+206A-U+206F, U+1D173-U+1D17A, and the prepended concatenation
  marks U+0600-U+0605 (Unicode means them to show, but a terminal does not);
- every Default_Ignorable_Code_Point (DerivedCoreProperties): Cf, the variation selectors and
  Other_Default_Ignorable_Code_Point: the combining grapheme joiner U+034F, the Hangul fillers
  U+115F, U+1160, U+3164 and U+FFA0, Khmer U+17B4 and U+17B5, U+2065, U+FFF0-U+FFF8, and the
  reserved ranges U+E0000-U+E0FFF that any future character there must also show as nothing;
- every space but the space (Zs: U+00A0, U+2000-U+200A, U+202F, U+3000...), the line and
  paragraph separators (Zl, Zp), lone surrogates (Cs: a terminal's UTF-8 cannot encode them) and
  the noncharacters U+FFFE and U+FFFF (no XML file may hold them);
- two symbols drawn blank, which no property names: U+2800 (the empty Braille pattern) and U+1D159
  (the null notehead).

So `seed` and `seed\\u3164` never read alike. The table is written here, not computed from the
running Python's unicodedata, so that a text is shown the same on every Python (3.11 has Unicode
14.0, 3.13 15.1): tests/test_shown_invisible.py derives it again from unicodedata and fails if the
two differ. Unassigned characters other than the reserved ignorable ones are left as they are: a
terminal draws them as a box, and a character Unicode assigns later (a new emoji) is one to show.

Two of them make visible text, and pass where they do (`kept_joiners`): the zero-width joiner
inside an emoji sequence, before an emoji (👨‍💻, 🏳️‍🌈: wcwidth's grapheme clusters, UAX #29; before
a mark, a skin tone or an Indic letter it draws nothing) and the emoji selector U+FE0F where it
changes how its character is drawn, by the width a terminal gives it (❤ U+2764 takes one column,
❤️ two), or stands before an emoji's joiner (👩‍❤️‍👨); after an ASCII character only in a keycap
(1️⃣: `1` U+FE0F alone is drawn as `1`). A selector that changes nothing (😀 U+FE0F, `a` U+FE0F)
and the text selector U+FE0E (which most terminals ignore) are shown as their escapes, and so is
every joiner of a cluster where any other character is. Those
widths and clusters are wcwidth's tables, pinned in requirements/lock.txt as the table here is.
Moving either to a newer Unicode (its new format characters: U+13439-U+1343F are 15.0's) is a change
of what the report pages show: re-record with it.
"""

from __future__ import annotations

import functools
import re

UNICODE_VERSION = "14.0.0"  # the unicodedata HIDDEN was derived from (Python 3.11's)
HIDDEN_BMP = (
    "\u00a0\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u1680"
    "\u17b4-\u17b5\u180b-\u180f\u2000-\u200f\u2028-\u202f\u205f-\u206f\u2800\u3000\u3164"
    "\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\ufffe-\uffff"
)
HIDDEN_ASTRAL = (
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d159\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
HIDDEN = HIDDEN_BMP + HIDDEN_ASTRAL  # a regular expression's class, without its brackets
_HIDDEN = re.compile(f"[\x00-\x1f\x7f-\x9f{HIDDEN}]")
_JOINER = "\u200d"
_SELECTORS = "\ufe0e\ufe0f"
_JOINERS = re.compile(f"[{_JOINER}{_SELECTORS}]")


def kept_joiners(text: str) -> frozenset[int]:
    """Where in `text` a zero-width joiner or a variation selector makes an emoji (see the module's
    docstring): these positions are shown as they are."""
    if not _JOINERS.search(text):
        return frozenset()
    from wcwidth import iter_graphemes  # here: 13 ms to import, for the few texts with an emoji

    kept: set[int] = set()
    at = 0
    for cluster in iter_graphemes(text):
        if len(cluster) > 1 and _JOINERS.search(cluster):
            kept.update(at + n for n in _kept_in(cluster))
        at += len(cluster)
    return frozenset(kept)


def _kept_in(cluster: str) -> list[int]:
    """The joiners of one grapheme cluster that make it what is drawn: none where another of its
    characters is hidden (the joiner would stand beside an escape, joining nothing)."""
    rest = _JOINERS.sub("", cluster)
    if _HIDDEN.search(rest):
        return []
    kept = []
    for n, char in enumerate(cluster):
        if char in _SELECTORS:
            if not _selects(cluster, n):
                return []  # a selector that changes nothing hides; the cluster's joiners with it
            kept.append(n)
        elif char == _JOINER:
            if not _joins(cluster, n):
                return []  # a joiner that joins nothing (last, or beside another) hides
            kept.append(n)
    return kept


def _joins(cluster: str, n: int) -> bool:
    """Whether the joiner at `n` joins two emoji: after a character that is no joiner, before an
    Extended_Pictographic one (UAX #29's GB11, wcwidth's pinned table). Before a mark, a skin tone
    or an Indic letter it is drawn as nothing (`👨` U+200D U+0301 reads as `👨́`)."""
    return 0 < n < len(cluster) - 1 and cluster[n - 1] != _JOINER and _pictographic(cluster[n + 1])


def _selects(cluster: str, n: int) -> bool:
    """Whether the selector at `n` changes how its character is drawn: by the width (❤ is one column,
    ❤️ two), and after an ASCII character only in a keycap (1️⃣): `1` U+FE0F alone is drawn as `1`
    by a terminal and a browser, though wcwidth gives it two columns. Inside a ZWJ sequence, an
    emoji's selector before the joiner is its emoji form (👩‍❤️‍👨), whatever the width. The text
    form's selector U+FE0E never: most terminals ignore it (⌚ U+FE0E is drawn as ⌚, two columns,
    where wcwidth gives one), so two names that differ by it would read alike."""
    from wcwidth import width

    if cluster[n] == "\ufe0e" or (cluster[n - 1 : n].isascii() and "\u20e3" not in cluster):
        return False
    if cluster[n + 1 : n + 2] == _JOINER and _pictographic(cluster[n - 1]):
        return True
    return bool(width(cluster) != width(cluster[:n] + cluster[n + 1 :]))


@functools.cache  # few distinct emoji in a text: their look-up, and the imports, once
def _pictographic(char: str) -> bool:
    """Whether `char` is Extended_Pictographic (wcwidth's pinned table of UAX #29's property)."""
    from wcwidth.bisearch import bisearch
    from wcwidth.table_grapheme import EXTENDED_PICTOGRAPHIC

    return bool(bisearch(ord(char), EXTENDED_PICTOGRAPHIC))
