"""pipeline.llm.invisible: every character a terminal shows as nothing (or as a blank that is not a
space) is written as its escape, from Unicode's properties; emoji, marks and CJK pass. And
pipeline.llm.terminal.isolated: a right-to-left name in a row of numbers leaves their order."""

from __future__ import annotations

import re
import unicodedata

import pytest

from pipeline.llm.invisible import HIDDEN, UNICODE_VERSION
from pipeline.llm.terminal import closed_isolates, guarded, isolated, shown

# PropList.txt's Other_Default_Ignorable_Code_Point and the variation selectors (stable lists).
OTHER_DEFAULT_IGNORABLE = [
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065), (0x3164, 0x3164),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F), (0xE0080, 0xE00FF),
    (0xE01F0, 0xE0FFF),
]  # fmt: skip
VARIATION_SELECTORS = [(0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF)]
BLANK_SYMBOLS = [(0x2800, 0x2800), (0x1D159, 0x1D159)]


def _by_rule(code: int) -> bool:
    category = unicodedata.category(chr(code))
    listed = OTHER_DEFAULT_IGNORABLE + VARIATION_SELECTORS + BLANK_SYMBOLS
    return (
        category in ("Cf", "Cs", "Zl", "Zp")
        or (category == "Zs" and code != 0x20)
        or code in (0xFFFE, 0xFFFF)
        or any(low <= code <= high for low, high in listed)
    )


@pytest.mark.skipif(
    unicodedata.unidata_version != UNICODE_VERSION,
    reason=f"the table is Unicode {UNICODE_VERSION}'s (Python 3.11's); here {unicodedata.unidata_version}",
)
def test_the_table_is_the_rule() -> None:
    table = re.compile(f"[{HIDDEN}]")
    wrong = [f"U+{c:04X}" for c in range(0x110000) if _by_rule(c) != bool(table.match(chr(c)))]
    assert wrong == []


@pytest.mark.parametrize(
    "char",
    ["\u115f", "\u1160", "\u3164", "\uffa0", "\u206a", "\u206f", "\U0001d173", "\U0001d17a", "\u0600",
     "\u0605", "\u034f", "\u17b4", "\u17b5", "\u180b", "\u180f", "\U000e0080", "\U000e0fff", "\u00a0",
     "\u2009", "\u202f", "\u3000", "\u2800", "\ufe0f", "\U000e0100", "\u200d"],
)  # fmt: skip
def test_review23s_invisible_characters_are_escapes(char: str) -> None:
    assert shown(f"seed{char}") == "seed" + ascii(char)[1:-1]  # \u3164, \xa0, \U000e0080
    assert shown(f"seed{char}") != shown("seed")
    assert guarded(f"seed{char}") == shown(f"seed{char}")


@pytest.mark.parametrize(
    "text",
    ["❤️", "👨‍💻", "🏳️‍🌈", "❤️‍🔥", "1️⃣", "👍🏽", "café", "é", "连贯性", "한국어", "a b", "\tx\n"],
)
def test_visible_text_passes(text: str) -> None:
    assert shown(text) == text
    assert guarded(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("😀\ufe0f", "😀\\ufe0f"),  # a selector that changes nothing
        ("a\ufe0f", "a\\ufe0f"),
        ("a\u200db", "a\\u200db"),  # a joiner that joins no emoji
        ("👨\u200d", "👨\\u200d"),
        ("👨\u200d\u200d💻", "👨\\u200d\\u200d💻"),  # joiners beside each other join nothing
        ("👨\u034f\u200d💻", "👨\\u034f\\u200d💻"),  # a joiner beside an escape joins nothing
    ],
)
def test_joiners_that_make_nothing_are_escapes(text: str, expected: str) -> None:
    assert shown(text) == expected


def test_guarded_lets_only_judgeloops_isolates_through() -> None:
    row = f"  {isolated(shown('مقياس'))}   1.0   2.0"
    assert guarded(row, isolates=True) == row
    assert guarded(row) == row.replace("\u2068", "\\u2068").replace("\u2069", "\\u2069")
    # A bidi control someone wrote was shown before the row was composed: it stays an escape.
    name = shown("\u2067x\u2069")
    assert guarded(f"{isolated(name)} 1", isolates=True) == "\u2068\\u2067x\\u2069\u2069 1"
    # An isolate unclosed, or around something to escape, is not judgeloop's: escaped.
    assert guarded("\u2068x 1", isolates=True) == "\\u2068x 1"
    assert guarded("\u2068\u202ex\u2069", isolates=True) == "\\u2068\\u202ex\\u2069"


def test_a_cut_leaves_no_isolate_open() -> None:
    assert closed_isolates("\u2068abc…") == "\u2068abc\u2069…"
    assert closed_isolates("\u2068a\u2069: \u2068b") == "\u2068a\u2069: \u2068b\u2069"
    assert closed_isolates("plain") == "plain"


def test_numbers_keep_their_order_after_a_right_to_left_name() -> None:
    """By the bidi algorithm itself (python-bidi, where installed): the row as a bidi terminal
    draws it. Without isolates the Arabic name takes the numbers into its run and run B's comes
    first; isolated, they read as written."""
    bidi = pytest.importorskip("bidi", reason="python-bidi is not installed (a test-only check)")
    name = "مقياس"
    plain = f"{name}   1.5   2.5"
    drawn = bidi.get_display(plain)
    assert drawn.index("2.5") < drawn.index("1.5")  # swapped: the fault
    kept = bidi.get_display(f"{isolated(name)}   1.5   2.5")
    assert kept.index("1.5") < kept.index("2.5")
