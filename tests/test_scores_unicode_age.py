"""A judge's reply is read alike on every supported Python. Python 3.11 knows Unicode 14.0, 3.12 15.0,
3.13 15.1: a character added since (a Kawi letter, U+11F04; a CJK ideograph of Extension I, U+2EBF0)
is no letter to 3.11 and a letter (`\\w`, `\\b`, isalnum) to 3.12 or 3.13. So a recorded reply
`Score: 4` followed by one was read as 4 on 3.11 and as no score on 3.12 or 3.13: the replay of the
same recording wrote other outputs on another Python. The readers now read every such character as
3.11 does (pipeline.judges.unicode_age), and the text a reading quotes is the reply's own."""

from __future__ import annotations

import hashlib
import platform
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.judges.scores import extract_score
from pipeline.judges.unicode_age import ADDED_AFTER_14 as ADDED

KAWI_A = "\U00011f04"  # Unicode 15.0 (Python 3.12)
CJK_I = "\U0002ebf0"  # Unicode 15.1 (Python 3.13)
CHECKED_UNICODE = ("14.0.0", "15.0.0", "15.1.0")  # Python 3.11, 3.12, 3.13

# (reply, how Python 3.11 reads it: score, reason, the text matched)
READ_AS_ON_3_11 = [
    (f"Score: 4{KAWI_A}", 4, "labelled", "Score: 4"),
    (f"{KAWI_A}Score: 4", 4, "labelled", "Score: 4"),
    (f"The answer is good.{KAWI_A}[[4]]", 4, "bracketed", "[[4]]"),
    (f"Score: 4{CJK_I}", 4, "labelled", "Score: 4"),
    (f"The answer is good.{CJK_I}[[4]]", 4, "bracketed", "[[4]]"),
]


def test_a_reply_holding_a_character_newer_than_python_3_11_is_read_as_3_11_reads_it() -> None:
    for reply, score, reason, matched in READ_AS_ON_3_11:
        reading = extract_score(reply)
        assert (reading.score, reading.reason, reading.matched) == (score, reason, matched), ascii(reply)


@given(st.text(alphabet=st.sampled_from(f"Score: 4/5[]{KAWI_A}{CJK_I}\U0010fffd\U00100000x \n"), max_size=30))
@example(f"Score: [[4]] {KAWI_A}\U00100000{CJK_I}")
def test_the_text_a_reading_quotes_is_the_reply_s_own(reply: str) -> None:
    matched = extract_score(reply).matched
    assert matched is None or matched in reply


def test_every_other_character_is_read_alike_on_every_supported_python() -> None:
    """The characters' properties the readers' patterns rest on (category, letter or digit, space,
    case), for every code point but those the readers map, are the same on this Python as on 3.11:
    the digest below was taken on 3.11.7 and checked equal on 3.12.1 and 3.13.0. A Python of a newer
    Unicode fails here: add its new characters' ranges to unicode_age.ADDED_AFTER_14."""
    from pipeline.judges.unicode_age import ADDED_AFTER_14  # (new with the mend)

    skip = {cp for low, high in ADDED_AFTER_14 for cp in range(low, high + 1)}
    digest = hashlib.sha256()
    for cp in range(0x110000):
        if cp in skip or 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        digest.update(
            f"{unicodedata.category(c)}{c.isalnum():d}{c.isdecimal():d}{c.isdigit():d}{c.isspace():d}"
            f"{c.lower()}{c.upper()}{c.casefold()}|".encode()
        )
    here = f"Python {platform.python_version()} (Unicode {unicodedata.unidata_version})"
    assert unicodedata.unidata_version in CHECKED_UNICODE, (
        f"{here} is of a Unicode newer than judgeloop's readers were checked against. Fix: add the code "
        "points it assigned (its DerivedAge.txt) to pipeline.judges.unicode_age.ADDED_AFTER_14 and its "
        "version to CHECKED_UNICODE; if the digest then still differs, a character 3.11 knows changed "
        "a property the readers rest on, which no range can mend."
    )
    assert digest.hexdigest() == "a025a5e423e7068ccbb36618b834167c514d6248d40b837509ca9c86d5c66b7d", (
        f"{here}: a character 3.11 knows reads otherwise here (category, letter, digit, space or case), "
        "or ADDED_AFTER_14 changed: the readers would read one reply otherwise on this Python."
    )


def test_the_assessor_s_checks_read_a_newer_character_as_3_11_does() -> None:
    from pipeline.judges.rubric.assessor import _WORD, unverified_quotes
    from pipeline.judges.unicode_age import checked_as_unicode_14

    # A section of Kawi letters holds no word to 3.11 (so the assessment is re-asked), on every Python.
    assert _WORD.search(checked_as_unicode_14(KAWI_A * 5)) is None
    # To 3.11 a newer character is no letter, so the quote check passes over it as over punctuation.
    quote = f'"the patient slept {KAWI_A}badly at night"'
    assert unverified_quotes({"assessment": quote}, "The patient slept, badly at night.") == ()


_NEAR_THE_RANGES = st.one_of(
    st.sampled_from([chr(cp) for low, high in ADDED for cp in {low - 1, low, high, high + 1}]),
    st.characters(min_codepoint=0x0C00, max_codepoint=0x3200),  # the BMP's ranges, and CJK's punctuation
    st.characters(min_codepoint=0x10E00, codec="utf-8"),  # every astral plane
    st.sampled_from("aé’—“好👍"),
)


@given(st.text(alphabet=_NEAR_THE_RANGES, max_size=40))
def test_the_characters_found_are_exactly_those_added_since_unicode_14(text: str) -> None:
    from pipeline.judges.unicode_age import _added, as_unicode_14

    expected = sorted({c for c in text if any(low <= ord(c) <= high for low, high in ADDED)})
    assert _added(text) == expected
    readable, back = as_unicode_14(text)
    assert readable.translate(back) == text
    assert not set(expected) & set(readable)


def test_a_label_or_a_metric_holding_a_newer_character_is_found_as_3_11_finds_it() -> None:
    """The reply is read with each newer character swapped for a stand-in: a label or a metric that
    holds one must be looked for with the same stand-in, or it is found on no Python (3.11 found it)."""
    for reply in (f"Clarity{KAWI_A}: 4\nDepth: 2", f"Depth: 2\nClarity{KAWI_A}: 4"):
        reading = extract_score(reply, labels=(f"clarity{KAWI_A}",), metric=f"clarity{KAWI_A}")
        assert (reading.score, reading.reason, reading.matched) == (4, "labelled", f"Clarity{KAWI_A}: 4")
    # a private-use character of a label is itself, never the stand-in of a newer character
    assert extract_score(f"Note{KAWI_A}: 4", labels=("note\U00100000",)).score is None
