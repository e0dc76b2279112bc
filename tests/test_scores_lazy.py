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


def test_compile_all_compiles_each_pattern_once_and_its_uses_find_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the report compiles before its page writers fork (pipeline.experiments.paper.aggregate):
    every lazy pattern, each compiled once, none compiled again at its first use."""
    from pipeline.judges.scores import lazy

    pattern = lazy_compile(r"rating[ \t]*:[ \t]*([0-9]+)")
    compiled: list[tuple[str, int]] = []
    real = re.compile

    def counted(source: str, flags: int = 0) -> re.Pattern[str]:
        made = real(source, flags)  # (an earlier test's pattern that does not compile: not counted)
        compiled.append((source, flags))
        return made

    monkeypatch.setattr(re, "compile", counted)
    lazy.compile_all()
    assert compiled.count((r"rating[ \t]*:[ \t]*([0-9]+)", 0)) == 1
    assert compiled.count((PHRASE.pattern, PHRASE.flags)) <= 1  # (compiled already by an earlier test)
    before = len(compiled)
    found = pattern.search("rating: 5")
    assert found is not None and found.group(1) == "5"
    assert len(compiled) == before  # its first use found it compiled
    lazy.compile_all()
    assert len(compiled) == before  # and a second compile_all compiles nothing


def test_compile_all_leaves_a_pattern_that_does_not_compile_to_fail_at_its_first_use() -> None:
    from pipeline.judges.scores import lazy

    broken = lazy_compile("(")
    lazy.compile_all()
    with pytest.raises(re.error):
        broken.search("x")


def test_a_lazy_pattern_has_no_private_attribute_of_the_compiled_one() -> None:
    pattern = lazy_compile("x")
    with pytest.raises(AttributeError):
        pattern._not_there  # type: ignore[attr-defined]  # noqa: B018
