"""The prose-verdict grammar of the score extractor, the decimal policy, and why scanning stays linear.

The properties over generated replies (a verdict read whatever surrounds it, rubric echoes and numbers
in prose never changing it, out-of-range and wrong denominators refused) run for every grammar form in
tests/test_scores.py (FORMATS); here are the examples the grammar was built from and what it must
never read.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.judges import scores
from pipeline.judges.scores import (
    DECIMAL_POLICIES,
    READ_REASONS,
    Reason,
    Scale,
    closing_verdicts,
    extract_score,
    fraction_verdicts,
    metric_lines,
    number_words,
    prose_context,
    prose_verdicts,
)

ONE_TO_FIVE = Scale(1, 5)


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        # a verdict verb bound to the number
        ("I would score it a 4.", 4, "verdict_verb"),
        ("Honestly I score it 3 out of 5.", 3, "verdict_verb"),
        ("The summary scores a 2 overall.", 2, "verdict_verb"),
        ("Scoring 4 out of 5 for relevance, it is a solid summary.", 4, "verdict_verb"),
        ("I'd rate this summary 5.", 5, "verdict_verb"),
        ("I'd rate the candidate's summary **3**.", 3, "verdict_verb"),
        ("It deserves a 4 because the quotes are exact.", 4, "verdict_verb"),
        ("It earns a 2.", 2, "verdict_verb"),
        ("I graded it at 3.", 3, "verdict_verb"),
        ("No doubt about it: I'd rate this summary 4.", 4, "verdict_verb"),
        ("I would be inclined to score it a 3.", 3, "verdict_verb"),
        # a participial or result clause ending the sentence
        ("Several symptoms are missing, resulting in a score of 2.", 2, "verdict_clause"),
        ("The summary is accurate, earning a score of 5", 5, "verdict_clause"),
        ("The summary is accurate, which results in an overall rating of 4.", 4, "verdict_clause"),
        ("It warrants a coherence score of 3 out of 5.", 3, "verdict_clause"),
        ("Thus the summary scored a relevance rating of 2.", 2, "verdict_clause"),
        # a verdict named after the metric or a quality
        ("Every sentence reads well: a fluency score of 5.", 5, "verdict_named"),
        ("All things considered, a coherence rating of 4.", 4, "verdict_named"),
        ("In sum, my final grade of 3.", 3, "verdict_named"),
        # the phrases read before the grammar keep their reason
        ("I give it a score of 4.", 4, "phrase"),
        ("The summary is concise, giving it a score of 4 out of 5.", 4, "phrase"),
        # the last verdict wins
        ("At first I would score it a 2, but on reflection I'd rate this summary 4.", 4, "verdict_verb"),
        (
            "I'd rate it 2. Then again, the summary is complete, resulting in a score of 3.",
            3,
            "verdict_clause",
        ),
        # never a verdict: rubric echoes, numbers in prose, ranges, choices, templates, hypotheticals
        ("A score of 1 means the summary is wrong.", None, "no_score"),
        ("It covers 3 of the 5 sections.", None, "no_score"),
        ("The patient scored 14 on the PHQ-8 in 2019.", None, "no_score"),
        ("The patient scored 4 on the PHQ-8.", None, "no_score"),
        ("She rated her sleep 2 weeks ago.", None, "no_score"),
        ("It scored 4 essays.", None, "no_score"),
        ("The session got a 2-hour slot.", None, "no_score"),
        ("A perfect score of 5 needs every symptom.", None, "no_score"),
        ("The highest rating of 5 is for complete summaries.", None, "no_score"),
        ("It does not deserve a 5.", None, "no_score"),
        ("I wouldn't rate it 5.", None, "no_score"),
        ("There is no reason to rate it 5.", None, "no_score"),
        ("To earn a score of 5, it would need quotes.", None, "no_score"),
        ("In order to get a 4 it needs the duration.", None, "no_score"),
        ("If it quoted the patient, a fluency score of 5 would fit.", None, "no_score"),
        ("It meets the requirements of score 5.", None, "no_score"),
        ("It needs an overall score of 3 or higher to pass.", None, "no_score"),
        ("Summaries that score a 4+ quote the patient.", None, "no_score"),
        ("To score a 5 it would need quotes.", None, "no_score"),
        ("Scores range from 1 to 5.", None, "no_score"),
        ("I would rate it between 3 and 4.", None, "no_score"),
        ("Rate it 1-5.", None, "no_score"),
        ("Rate it [your score].", None, "no_score"),
        ("I'd rate it 3 or 4.", None, "ambiguous"),
        # the scale check as for every verdict
        ("I would score it a 7.", None, "out_of_range"),
        ("Scoring 4 out of 10 overall.", None, "scale_mismatch"),
    ],
)
def test_prose_verdicts(text: str, score: int | None, reason: Reason) -> None:
    reading = extract_score(text, ONE_TO_FIVE)
    assert (reading.score, reading.reason) == (score, reason), reading


def test_every_reason_that_reads_a_score_is_a_reason() -> None:
    assert set(Reason.__args__) >= READ_REASONS  # type: ignore[attr-defined]
    assert {
        "verdict_verb",
        "verdict_clause",
        "verdict_named",
        "decimal_rounded",
        "decimal_kept",
    } <= READ_REASONS


# ---------------------------------------------------------------------------------------------------
# Decimals on an integer scale


@pytest.mark.parametrize(
    ("text", "policy", "score", "reason"),
    [
        ("Score: 3.5/5", "unscored", None, "non_integer"),
        ("Score: 3.5/5", "round", 4, "decimal_rounded"),
        ("Score: 2.5/5", "round", 3, "decimal_rounded"),  # halves up, not to even
        ("Score: 2.4", "round", 2, "decimal_rounded"),
        ("Score: 3.5/5", "keep", 3.5, "decimal_kept"),
        ("I would score it a 4.5.", "keep", 4.5, "decimal_kept"),
        ("Score: 4.0", "round", 4, "labelled"),  # integral: not a decimal
        ("Score: 5.5", "round", None, "out_of_range"),  # the range is checked first, never clamped
        ("Score: 3.5/10", "round", None, "scale_mismatch"),
    ],
)
def test_decimal_policy(text: str, policy: scores.DecimalPolicy, score: float | None, reason: Reason) -> None:
    reading = extract_score(text, ONE_TO_FIVE, decimals=policy)
    assert (reading.score, reading.reason) == (score, reason), reading
    assert type(reading.score) is type(score)


def test_decimal_policy_leaves_non_integer_scales_alone() -> None:
    reading = extract_score("Rating: [[8.5]]", Scale(1, 10, integer=False), decimals="round")
    assert (reading.score, reading.reason) == (8.5, "labelled")


def test_unknown_decimal_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="decimals must be one of unscored, round, keep"):
        extract_score("Score: 3", decimals="truncate")  # type: ignore[arg-type]
    assert DECIMAL_POLICIES == ("unscored", "round", "keep")


@settings(max_examples=300, deadline=None)
@given(tenths=st.integers(10, 50), policy=st.sampled_from(DECIMAL_POLICIES))
def test_property_a_decimal_reading_is_flagged_and_on_the_scale(
    tenths: int, policy: scores.DecimalPolicy
) -> None:
    value = tenths / 10
    reading = extract_score(f"Score: {value}", ONE_TO_FIVE, decimals=policy)
    if value.is_integer():
        assert (reading.score, reading.reason) == (int(value), "labelled")
    elif policy == "unscored":
        assert (reading.score, reading.reason) == (None, "non_integer")
    else:
        assert reading.reason == ("decimal_rounded" if policy == "round" else "decimal_kept")
        assert reading.score is not None and 1 <= reading.score <= 5
        assert abs(reading.score - value) <= 0.5


# ---------------------------------------------------------------------------------------------------
# Linear time, shown by the regex design rather than by the clock: every pattern the prose grammar runs
# has a bounded width, so one match attempt reads a bounded number of characters, and finditer makes one
# attempt per position: the scan is linear in the reply's length whatever the reply.

GRAMMAR_PATTERNS = {
    "verdict_verb": prose_verdicts.VERDICT_VERB,
    "verdict_verb, longer object": prose_verdicts.VERDICT_VERB_LONG,
    "verdict_clause": prose_verdicts.VERDICT_CLAUSE,
    "verdict_clause, having": prose_verdicts.VERDICT_CLAUSE_HAVING,
    "verdict_named": prose_verdicts.VERDICT_NAMED,
    "verdict_clause, result": prose_verdicts.VERDICT_RESULT,
    "closing fraction after a comma": closing_verdicts.FRACTION_AFTER_PUNCT,
    "closing score-of after a comma": closing_verdicts.SCORE_OF_AFTER_PUNCT,
    "closing parenthesized fraction": closing_verdicts.PARENTHESIZED,
    "metric line": metric_lines.METRIC_LINE,
    "number word": number_words.NUMBER_WORD,
    "fraction_verb": fraction_verdicts.FRACTION_VERB,
    "fraction_verb, copula": fraction_verdicts.FRACTION_COPULA,
    "fraction_noun": fraction_verdicts.FRACTION_NOUN,
    "fraction_closing": fraction_verdicts.FRACTION_CLOSING,
    "generic opening": prose_context.GENERIC_OPENING,
    "condition after": prose_context.CONDITION_AFTER,
    "fraction phrase after": prose_context.FRACTION_PHRASE_AFTER,
    "not a verdict before": prose_context.NOT_A_VERDICT_BEFORE,
    "purpose before": prose_context.PURPOSE_BEFORE,
    "word after": prose_context.WORD_AFTER,
    "of after": prose_context.OF_AFTER,
    "receiving verb": prose_context.RECEIVING,
    "threshold after": prose_context.THRESHOLD_AFTER,
}
# A longer object ("the response provided by the AI assistant to the user question "Why is the sky
# blue?" a") is up to 24 words, quotations among them: the widest patterns read about 2,200 characters.
MAX_WIDTH = 2400


def _max_width(pattern: re.Pattern[str]) -> int:
    parsed = re._parser.parse(pattern.pattern, pattern.flags)  # type: ignore[attr-defined]
    return int(parsed.getwidth()[1])


@pytest.mark.parametrize("name", sorted(GRAMMAR_PATTERNS))
def test_grammar_patterns_have_bounded_width(name: str) -> None:
    assert _max_width(GRAMMAR_PATTERNS[name]) <= MAX_WIDTH


def test_the_width_check_catches_an_unbounded_repeat() -> None:
    assert _max_width(re.compile(r"\bscore[ \t]+of")) > MAX_WIDTH  # the check itself can fail


def test_the_grammar_is_the_whole_prose_grammar() -> None:
    assert {kind for kind, _ in prose_verdicts.GRAMMAR} == {"verdict_verb", "verdict_clause", "verdict_named"}
    assert {kind for kind, _ in fraction_verdicts.GRAMMAR} == {
        "fraction_verb",
        "fraction_noun",
        "fraction_closing",
    }
    assert {kind for kind, _ in closing_verdicts.GRAMMAR} == {"fraction_closing", "verdict_closing"}
    grammar = (*prose_verdicts.GRAMMAR, *fraction_verdicts.GRAMMAR, *closing_verdicts.GRAMMAR)
    assert all(pattern in GRAMMAR_PATTERNS.values() for _, pattern in grammar)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="scoreating ivdu5 4.,/\n-", max_size=2000),
)
def test_property_every_grammar_match_is_shorter_than_the_bound(text: str) -> None:
    for _, pattern in (*prose_verdicts.GRAMMAR, *fraction_verdicts.GRAMMAR, *closing_verdicts.GRAMMAR):
        for match in pattern.finditer(text):
            assert match.end() - match.start() <= MAX_WIDTH
    extract_score(text)  # and nothing raises
