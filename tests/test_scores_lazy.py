"""The score extractor's patterns compile on first use (issue 31) and match as re.compile's do."""

from __future__ import annotations

import re

import pytest

from pipeline.judges.scores import extract_score
from pipeline.judges.scores.lazy import LazyPattern, lazy_compile
from pipeline.judges.scores.phrases import PHRASE


def test_compiled_only_when_used() -> None:
    pattern = lazy_compile(r"score[ \t]*:[ \t]*([0-9]+)", re.IGNORECASE)
    assert isinstance(pattern, LazyPattern)
    assert "search" not in vars(pattern)
    found = pattern.search("SCORE: 4")
    assert found is not None and found.group(1) == "4"
    assert "search" in vars(pattern)  # kept: the next use reads it directly


@pytest.mark.parametrize("text", ["I would rate it a 4 out of 5.", "no verdict here", "my score is 3"])
def test_same_matches_as_the_eager_pattern(text: str) -> None:
    eager = re.compile(PHRASE.pattern, PHRASE.flags)
    assert [m.span() for m in PHRASE.finditer(text)] == [m.span() for m in eager.finditer(text)]


def test_an_invalid_pattern_fails_at_first_use() -> None:
    pattern = lazy_compile("(")
    with pytest.raises(re.error):
        pattern.search("x")


def test_extractor_unchanged() -> None:
    assert extract_score("I would rate it a 4 out of 5.").score == 4
