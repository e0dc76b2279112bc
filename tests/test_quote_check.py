"""The assessor's quote check: the quotes it finds unverified are those the first implementation
found (both texts normalised, the quote looked up in the transcript), however it finds them."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.judges.rubric.assessor import _normalise, unverified_quotes


def two_passes(text: str) -> str:
    """The normalisation as it was written first: punctuation made spaces, then whitespace runs
    collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s']", " ", text.lower())).strip()


def first_check(sections: dict[str, str], transcript: str) -> tuple[str, ...]:
    """unverified_quotes as it was written first: the whole transcript normalised."""
    haystack = two_passes(transcript)
    quotes = [q for body in sections.values() for q in re.findall(r"[\"“]([^\"”\n]{8,})[\"”]", body)]
    return tuple(q for q in quotes if two_passes(q) not in haystack)


# Whitespace of every kind, punctuation, apostrophes and underscores, and letters whose lower case
# is longer (İ) or that have none (ß): where a normalisation could go wrong.
ODD = " \t\n\r\x0b\x0c\x1c\x1d\x85\xa0\u2003\u2028\u3000'_-.,!?’İßǅ٣"
TEXT = st.text(alphabet=st.sampled_from(ODD + "abcAB"), max_size=60)


@given(st.text(alphabet=st.sampled_from(ODD) | st.characters(), max_size=80))
def test_one_pass_is_the_two_passes(text: str) -> None:
    assert _normalise(text) == two_passes(text)


@settings(max_examples=500)
@given(TEXT, st.lists(TEXT, max_size=4), st.lists(st.integers(0, 59), max_size=4))
def test_the_same_quotes_unverified(transcript: str, quotes: list[str], starts: list[int]) -> None:
    # Some quotes cut from the transcript itself (found), some made up (mostly not).
    cut = [transcript[s : s + 12] for s in starts]
    body = " ".join(f'"{q}"' for q in quotes + cut if "\n" not in q and '"' not in q)
    sections = {"assessment": body}
    assert unverified_quotes(sections, transcript) == first_check(sections, transcript)


def test_quotes_checked_against_the_transcript() -> None:
    transcript = "Ellie : How have you been?\nParticipant : I can't sleep, really... not at ALL."
    sections = {
        "assessment": 'They said "i can\'t sleep really not at all" and "nothing like this at all".',
        "risk_factors": "none",
    }
    assert unverified_quotes(sections, transcript) == ("nothing like this at all",)
    assert unverified_quotes({"assessment": "no quotes here"}, transcript) == ()
    assert unverified_quotes({"assessment": '"eep, really not"'}, transcript) == ()  # mid-word, as before
