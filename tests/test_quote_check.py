"""The assessor's quote check: its one-pass normalisation gives the text the two passes gave."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from pipeline.judges.rubric.assessor import _normalise, unverified_quotes


def two_passes(text: str) -> str:
    """The normalisation as it was written first: punctuation made spaces, then whitespace runs
    collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s']", " ", text.lower())).strip()


ODD = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000'_-.,!?\"“”’İßǅ٣"


@given(st.text(alphabet=st.sampled_from(ODD) | st.characters(), max_size=80))
def test_one_pass_is_the_two_passes(text: str) -> None:
    assert _normalise(text) == two_passes(text)


def test_quotes_checked_against_the_transcript() -> None:
    transcript = "Ellie : How have you been?\nParticipant : I can't sleep, really... not at ALL."
    sections = {
        "assessment": 'They said "i can\'t sleep really not at all" and "nothing like this at all".',
        "risk_factors": "none",
    }
    assert unverified_quotes(sections, transcript) == ("nothing like this at all",)
    assert unverified_quotes({"assessment": "no quotes here"}, transcript) == ()
    # The same transcript again (a re-ask): the same answer, from the remembered normalisation.
    assert unverified_quotes(sections, transcript) == ("nothing like this at all",)
