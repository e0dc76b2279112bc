"""pipeline.llm.invisible: every character a terminal shows as nothing (or as a blank that is not a
space) is written as its escape, from Unicode's properties; emoji, marks and CJK pass. And
pipeline.llm.terminal.isolated: a right-to-left name in a row of numbers leaves their order."""

from __future__ import annotations

import re
import unicodedata
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm.invisible import HIDDEN, UNICODE_VERSION
from pipeline.llm.terminal import closed_isolates, guarded, isolated, shown
from pipeline.tools.compare import _pointer as compare_pointer
from pipeline.tools.compare import _row as compare_row
from pipeline.tools.compare_params import params_changes
from pipeline.tools.diff.text import change_line

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
    [
        "❤️",
        "👨‍💻",
        "🏳️‍🌈",
        "❤️‍🔥",
        "1️⃣",
        "#️⃣",
        "👩‍❤️‍👨",
        "©️",
        "👍🏽",
        "café",
        "é",
        "连贯性",
        "한국어",
        "a b",
        "\tx\n",
    ],
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
        # review26: a selector after an ASCII character is drawn as that character, but in a keycap
        ("1\ufe0f", "1\\ufe0f"),
        ("seed1\ufe0f", "seed1\\ufe0f"),
        ("#\ufe0f", "#\\ufe0f"),
        ("*\ufe0f", "*\\ufe0f"),
        ("⌚\ufe0e", "⌚\\ufe0e"),  # the text form: a terminal draws ⌚ as it is
        ("seed☔\ufe0e", "seed☔\\ufe0e"),
        # review26: a joiner before no emoji (a mark, a skin tone, an Indic letter) draws nothing
        ("👨\u200d\u0301", "👨\\u200d\u0301"),
        ("👍🏽\u200d\u0301", "👍🏽\\u200d\u0301"),
        ("👨\u200d🏻", "👨\\u200d🏻"),
        ("क्\u200dष", "क्\\u200dष"),
    ],
)
def test_joiners_that_make_nothing_are_escapes(text: str, expected: str) -> None:
    assert shown(text) == expected


def test_guarded_lets_only_judgeloops_isolates_through() -> None:
    row = f"  {isolated(shown('مقياس'))}   1.0   2.0"
    assert guarded(row, isolates=True) == row
    assert guarded(row) == row.replace("\u2068", "\\u2068").replace("\u2069", "\\u2069")
    # A bidi control someone wrote was shown before the row was composed: it stays an escape.
    name = shown("\u2067א\u2069")
    assert guarded(f"{isolated(name)} 1", isolates=True) == "\u2068\\u2067א\\u2069\u2069 1"
    # An isolate unclosed, or around something to escape, is not judgeloop's: escaped.
    assert guarded("\u2068x 1", isolates=True) == "\\u2068x 1"
    assert guarded("\u2068\u202ex\u2069", isolates=True) == "\\u2068\\u202ex\\u2069"


def test_only_a_right_to_left_text_is_isolated() -> None:
    assert isolated("rag.seed") == "rag.seed"
    assert isolated("连贯性 👍🏽") == "连贯性 👍🏽"
    assert isolated("שלום") == "\u2068שלום\u2069"
    assert isolated("m\u0663") == "\u2068m\u0663\u2069"  # an Arabic-Indic digit (AN)


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


def _drawn(line: str) -> str:
    """`line` as a terminal that lays out bidi text draws it (python-bidi: UAX #9), or a skip."""
    bidi = pytest.importorskip("bidi", reason="python-bidi is not installed (a test-only check)")
    drawn: str = bidi.get_display(line)
    return drawn


def test_a_compare_row_keeps_run_a_before_run_b() -> None:
    """`judgeloop compare`'s row for an Arabic metric, as compare prints it: A's number left of B's."""
    row = guarded(compare_row("الدقة", "1.5", "2.5", "+1"), isolates=True)
    assert row.count("\u2068") == 1 and row.count("\u2069") == 1
    drawn = _drawn(row)
    assert drawn.index("1.5") < drawn.index("2.5") < drawn.index("+1"), drawn


def test_a_params_change_keeps_its_sides_in_order() -> None:
    """`key: old → new` with a Hebrew key, and with Hebrew texts on both sides."""
    lines = params_changes(
        [{"params.yaml": {"מפתח": 1, "שם": "אלף"}}, {"params.yaml": {"מפתח": 2, "שם": "בית"}}]
    )
    assert [line.count("\u2068") for line in lines] == [1, 3]  # a number has no direction to isolate
    numbers, texts = (_drawn(guarded(line, isolates=True)) for line in lines)
    assert numbers.index("1") < numbers.index("2"), numbers
    assert texts.index("אלף"[::-1]) < texts.index("בית"[::-1]), texts  # each word drawn right to left


def test_a_diff_line_keeps_its_verdicts_in_order_unisolated() -> None:
    """`judgeloop diff`'s changed judgement: `itN` (left-to-right letters) stands between a
    right-to-left item id and the verdicts, so A's verdict stays left of B's with no isolate."""
    judgement = SimpleNamespace(item="מקרה", iteration=0, score=4.0, passed=None)
    after = SimpleNamespace(item="מקרה", iteration=0, score=5.0, passed=None)
    line = change_line(cast(Any, SimpleNamespace(a=judgement, b=after, cause=SimpleNamespace(text="סיבה"))))
    drawn = _drawn(line)
    assert drawn.index("4") < drawn.index("5"), drawn


_ANY_HIDDEN = re.compile(f"[{HIDDEN}]")
_EMOJI_PARTS = st.sampled_from(
    ["👨", "💻", "❤", "🏳", "🌈", "1", "#", "a", "\u200d", "\ufe0f", "\ufe0e", "\u0600", "\u034f", " "]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(_EMOJI_PARTS).map("".join)))
def test_what_shown_writes_holds_no_hidden_character_but_an_emojis_and_passes_guarded(text: str) -> None:
    out = shown(text)
    assert guarded(out) == out
    assert all(match[0] in "\u200d\ufe0f" for match in _ANY_HIDDEN.finditer(out)), ascii(out)


def test_a_right_to_left_run_name_is_not_offered_as_a_command() -> None:
    """`judgeloop diff 'אלף' 'בית'` would be drawn with its two runs swapped (one right-to-left
    run across both), and isolates in it would be pasted into the shell: said in words."""
    lines = compare_pointer(["אלף", "בית"], ["paper"])
    assert lines[-1] == "  judgeloop diff A B, A and B the two runs above"
    assert compare_pointer(["HEAD~1", "HEAD"], ["paper"])[-1] == "  judgeloop diff HEAD~1 HEAD --design paper"


def test_which_names_are_isolated_is_no_matter_of_the_running_pythons_unicodedata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """review26: `isolated` read unicodedata.bidirectional, so a right-to-left script a later Unicode
    adds (3.14's Garay) was isolated on one Python and not on another. Its blocks are frozen now."""
    monkeypatch.setattr(unicodedata, "bidirectional", lambda char: "L")
    assert isolated("אלף") == "\u2068אלף\u2069"
    assert isolated("\U00010d4a") == "\u2068\U00010d4a\u2069"  # Garay, unassigned in Unicode 14
    assert isolated("abc 1.5") == "abc 1.5"


def test_every_right_to_left_character_of_this_python_is_isolated() -> None:
    rtl = [chr(c) for c in range(0x110000) if unicodedata.bidirectional(chr(c)) in ("R", "AL", "AN")]
    assert len(rtl) > 3000
    assert [ascii(char) for char in rtl if isolated(char) == char] == []
