"""Prose verdicts as candidates: the verdict phrases read first, then both grammars.

    phrase      "I give it a score of 4", "I would rate it 4 out of 5", "my score is 4", "I'd give this
                a 4"; a bare "score of 4" is not one (the rubric says "score of 4 : 1-2 mistakes")

then the grammar of pipeline.judges.scores.prose_verdicts (verdict_verb, verdict_clause,
verdict_named), of pipeline.judges.scores.fraction_verdicts (fraction_verb, fraction_noun,
fraction_closing) and of pipeline.judges.scores.closing_verdicts (fraction_closing, verdict_closing:
the verdict that ends the reply after a semicolon or a comma, or in parentheses); each once with digits
and once with number words (pipeline.judges.scores.number_words). Where several read the same number,
the oldest reading names it, so that replies read before a grammar existed keep their reason and
recorded outputs stay byte-identical.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from pipeline.judges.scores.candidates import VALUE, Candidate, candidate
from pipeline.judges.scores.closing_verdicts import closing_matches
from pipeline.judges.scores.fraction_verdicts import fraction_matches
from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.number_words import word_candidates
from pipeline.judges.scores.prose_context import CONDITION_AFTER, LIST_AFTER, hypothetical
from pipeline.judges.scores.prose_verdicts import verdict_matches
from pipeline.judges.scores.reading import Reason

_VERDICT_NOUN: Final = r"(?:score|rating|grade)"
_GIVE: Final = r"(?:give|gives|gave|giving|assign|assigns|assigned|award|awards|awarded)"
_AFFIRMING: Final = (
    r"(?:deservedly|clearly|definitely|certainly|easily|solidly|firmly|rightly|justly|justifiably"
    r"|undoubtedly|unquestionably|therefore|thus|hence|then|still|now|also)"
)
PHRASE: Final = lazy_compile(
    r"(?:"
    # "I give it a score of 4", "it deserves a rating of 4": a verb, then "<noun> of"
    rf"\b(?:{_GIVE}|deserves?|deserving|earns?|earned|gets?|receives?|received|merits?)\b"
    rf"[^.\n0-9\[\]{{}}:]{{0,40}}?\b{_VERDICT_NOUN}[ \t]+of"
    # "I would rate it a 4", "I rate the assessment as 4/5"
    r"|\brat(?:e|ed|ing)[ \t]+(?:it|this|that|them|the[ \t]+[a-z]+(?:[ \t]+[a-z]+)?)(?:[ \t]+(?:as|at))?"
    r"(?:[ \t]+an?)?"
    # "this would be rated as a 3"
    r"|\b(?:be|is|was)[ \t]+rated[ \t]+(?:as[ \t]+)?(?:an?[ \t]+)?"
    # "my score is 4", "the final rating would be 4", "the score for this response is 0"
    rf"|\b{_VERDICT_NOUN}(?:[ \t]+(?:for|of)[ \t]+(?:this|the|that|its?)\b[^.\n0-9\[\]{{}}:]{{0,30}}?)?"
    r"[ \t]+(?:is|would[ \t]+be|will[ \t]+be|should[ \t]+be|remains(?:[ \t]+at)?|(?:stays|stands)[ \t]+at)"
    # "the rating is deservedly a 10": an adverb that affirms, never one that hedges ("is probably a 4")
    rf"(?:[ \t]+{_AFFIRMING})?(?:[ \t]+an?)?"
    # "I'd give this a 4", "give it 4/5"
    rf"|\b{_GIVE}[ \t]+(?:it|this|that|them|the[ \t]+[a-z]+)(?:[ \t]+an?)?"
    rf")[ \t*_]*{VALUE}",
    re.IGNORECASE,
)
# At one number the highest rank names the verdict: the oldest reading first.
RANK: Final[dict[Reason, int]] = {
    "verdict_closing": 0,
    "fraction_closing": 0,
    "fraction_noun": 1,
    "fraction_verb": 2,
    "verdict_named": 3,
    "verdict_clause": 4,
    "verdict_verb": 5,
    "phrase": 6,
}


def prose_candidates(text: str) -> Iterator[Candidate]:
    """Every prose verdict: with digits, then with number words in the same positions (number_words)."""
    yield from digit_candidates(text)
    yield from word_candidates(text, digit_candidates)


def digit_candidates(text: str) -> Iterator[Candidate]:
    for match in PHRASE.finditer(text):
        # "I would rate it 4 out of 5 if it quoted the patient": the score it would get, not its score.
        if hypothetical(text, match.start()) or CONDITION_AFTER.match(text, match.end()):
            continue
        if LIST_AFTER.match(text, match.end()):  # "rated as 5, 1, and 3, respectively"
            continue
        found = candidate("phrase", match, text, RANK["phrase"])
        if found is not None:
            yield found
    grammar = (*verdict_matches(text), *fraction_matches(text), *closing_matches(text))
    for kind, match in grammar:
        found = candidate(kind, match, text, RANK[kind])
        # A range after a verdict verb describes the scale ("it scores 1-5 on average"): no verdict.
        if found is not None and not found.ambiguous:
            yield found
