"""Fraction verdicts in prose: "N out of M" (or "N/M") bound to what makes it the judge's verdict.

Chat-tuned judges (Llama-2-chat style) write full sentences and rarely a ``Score:`` line. What binds
the fraction to a verdict is the structure around it, not a list of sentences:

    fraction_verb     a verdict verb and its object, however long, then the fraction: "I would grade
                      this reply as 4 out of 5", "I would rate the AI assistant's response as an 8
                      out of 10", "earns a solid 4 out of 5", "thus rating it 4 out of 5"; or a copula
                      with an article, the fraction used as a noun: "it is a 4 out of 5", "this would
                      be an 8/10"; or a copula and the metric after: "is 4 out of 5 in terms of
                      relevance"
    fraction_noun     a score noun bound to the reply by a verb of having or giving, or by "my":
                      "has a score of 4 out of 5 for accuracy", "with an overall rating of 8/10",
                      "my overall assessment is 4 out of 5", "final verdict: 8/10"
    fraction_closing  the fraction as a sentence of its own that closes the reply, or opened by a word
                      that concludes: "... (long justification)\n\n4 out of 5.", "Overall, 8/10."

What tells a count from a verdict is what the fraction binds to (pipeline.judges.scores.prose_context):
a counted noun after it ("2 out of 4 claims are supported", "covers 3 out of 5 symptoms"), a partitive
("3 out of the 5 sections" is no fraction at all), a verb that counts rather than judges ("covers",
"mentions": no verdict verb binds the number), a condition or a threshold after it, a negation, a
purpose or a generic subject before it. A metric or a unit may follow: "4 out of 5 for accuracy",
"4 out of 5 in terms of relevance", "4 out of 5 stars". The denominator is checked against the scale
by the extractor, as for every verdict ("4 out of 10" on 1-5 is ``scale_mismatch``).

Every repeat is bounded: one match attempt reads a bounded number of characters (tests check the
widths), so scanning a reply is linear in its length.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Literal

from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.prose_context import generic, hedged, hypothetical, not_a_verdict_after
from pipeline.judges.scores.prose_lexicon import (
    ADJECTIVE,
    AWARD_VERB,
    FRACTION_B,
    HAVING,
    LONG_OBJECT,
    METRIC_NOUN,
    NOUN,
    OBJECT,
    QUALIFIER,
    SCORE_VERB,
    SP,
    WORD,
)

FractionKind = Literal["fraction_verb", "fraction_noun", "fraction_closing"]

# "a", "an", "a solid", "a well-deserved"
_ARTICLE: Final = rf"an?(?:{SP}{ADJECTIVE})?"
_COPULA: Final = r"(?:is|was|be|remains|[’']s)"
_VERB: Final = rf"(?:{SCORE_VERB}|{AWARD_VERB})"
FRACTION_VERB: Final = lazy_compile(
    rf"\b(?:{_VERB}(?:{SP}{OBJECT})?(?:{SP}(?:as|at|with))?(?:{SP}{_ARTICLE})?"
    # a longer object needs a linking word or an article to end it
    rf"|{_VERB}{SP}{LONG_OBJECT}{SP}(?:(?:as|at)(?:{SP}{_ARTICLE})?|{_ARTICLE})"
    rf"|{_COPULA}{SP}{_ARTICLE}"
    # "making it a 4 out of 5 in terms of fluency": the result, as a noun
    rf"|mak(?:e|es|ing){SP}(?:it|this|that){SP}{_ARTICLE}){SP}{FRACTION_B}",
    re.IGNORECASE,
)
# "The summary is 4 out of 5 in terms of relevance": a copula without an article needs the metric after.
FRACTION_COPULA: Final = lazy_compile(
    rf"\b{_COPULA}{SP}{FRACTION_B}(?={SP}in{SP}terms{SP}of\b)",
    re.IGNORECASE,
)
_JUDGEMENT: Final = r"(?:score|rating|grade|mark|verdict|assessment|evaluation|judg(?:e)?ment)"
# Nouns of a metric's shape that quantify rather than judge ("scored a proportion of 3 out of 5").
_NOT_A_SCORE: Final = (
    r"(?:probability|proportion|portion|fraction|majority|minority|quantity|frequency|selection"
    r"|collection|combination|mention|section|position|population|average|total|number)\b"
)
_LINK: Final = rf"(?:[ \t]{{0,3}}[:–—-]|{SP}(?:is|would{SP}be|will{SP}be|of|stands{SP}at|comes{SP}to))"
FRACTION_NOUN: Final = lazy_compile(
    rf"\b(?:(?:{HAVING}|{SCORE_VERB}|{AWARD_VERB})(?:{SP}{OBJECT})?{SP}(?:an?|the|its|my|our){SP}"
    rf"(?:{QUALIFIER}{SP})?{NOUN}(?:{SP}(?:of|at|as))?"
    # "scores a relevance of 4 out of 5": the metric's noun stands for the score noun
    rf"|{SCORE_VERB}(?:{SP}{OBJECT})?{SP}(?:an?|the|its){SP}(?:overall{SP})?(?!{_NOT_A_SCORE}){METRIC_NOUN}{SP}of"
    rf"|(?:my|our)(?:{SP}{WORD})?{SP}{_JUDGEMENT}{_LINK}"
    rf"|(?:final|overall){SP}(?:verdict|assessment|evaluation|judg(?:e)?ment){_LINK}"
    rf")(?:{SP}{_ARTICLE})?[ \t]{{1,3}}{FRACTION_B}",
    re.IGNORECASE,
)
_CONCLUDING: Final = (
    r"(?:overall|in[ \t]conclusion|in[ \t]summary|in[ \t]sum|in[ \t]short|all[ \t]in[ \t]all"
    r"|all[ \t]things[ \t]considered|all[ \t]told|to[ \t]sum[ \t]up|to[ \t]conclude|on[ \t]balance"
    r"|taken[ \t]together|altogether|ultimately|finally|thus|therefore|hence|so|verdict)"
)
# At the start of a line or a sentence: an optional concluding word, an optional article, the fraction,
# and after it only "overall" and the end of the sentence or of the line.
FRACTION_CLOSING: Final = lazy_compile(
    rf"(?:^|(?<=[.!?][ \t]))[ \t*_>#-]{{0,6}}(?P<marker>{_CONCLUDING}[ \t]{{0,3}}[,:–—-]?[ \t]{{1,3}})?"
    rf"(?:{_ARTICLE}{SP})?{FRACTION_B}"
    r"(?=[ \t*_]{0,4}(?:overall[ \t*_]{0,4})?(?:[.!](?:[ \t*_]|$)|\n|$))",
    re.IGNORECASE | re.MULTILINE,
)
# After "of", "the" or "a", "score 5 out of 5" is the noun naming a rubric level ("the requirements of
# score 5"), checked in code rather than by lookbehinds at every position of the scan.
_NOUN_BEFORE: Final = lazy_compile(r"\b(?:of|the|an?)[ \t]$", re.IGNORECASE)
_CLOSING_TAIL: Final = lazy_compile(r"[ \t*_]{0,4}(?:overall[ \t*_]{0,4})?[.!]?[ \t*_]{0,4}", re.IGNORECASE)

GRAMMAR: Final[tuple[tuple[FractionKind, re.Pattern[str]], ...]] = (
    ("fraction_verb", FRACTION_VERB),
    ("fraction_verb", FRACTION_COPULA),
    ("fraction_noun", FRACTION_NOUN),
    ("fraction_closing", FRACTION_CLOSING),
)


def _closes_the_reply(text: str, match: re.Match[str], content_end: int) -> bool:
    """A fraction alone on its line counts when a concluding word opens it, or when it ends a reply
    that says something before it (``content_end``: where the reply's last non-blank character ends);
    a reply that is only "4/5" is a bare number."""
    if match.group("marker"):
        return True
    tail = _CLOSING_TAIL.match(text, match.end())
    return tail is not None and tail.end() >= content_end and bool(text[: match.start()].strip())


def fraction_matches(text: str) -> Iterator[tuple[FractionKind, re.Match[str]]]:
    """Every fraction verdict in ``text`` with its kind; the caller checks the scale."""
    content_end = len(text.rstrip())
    for kind, pattern in GRAMMAR:
        for match in pattern.finditer(text):
            start = match.start()
            if kind == "fraction_verb" and _NOUN_BEFORE.search(text, max(0, start - 4), start):
                continue
            if hypothetical(text, start) or generic(text, start) or hedged(text, start):
                continue
            if kind == "fraction_closing" and not _closes_the_reply(text, match, content_end):
                continue
            if not_a_verdict_after(text, match.end(), fraction=True):
                continue
            yield kind, match
