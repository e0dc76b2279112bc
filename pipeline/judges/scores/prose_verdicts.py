"""Prose verdicts: a small grammar of verdict phrases, not a list of sentences.

A verdict verb or noun phrase bound to a number in the same clause:

    verdict_verb    a verdict verb, then the number: "I would score it a 4", "it scores a 4", "scoring
                    4 out of 5 for relevance", "I'd rate this summary 4", "deserves a 4", and with a
                    longer object before a linking "as" or an article: "I would rate the response
                    provided by the AI assistant as a 2", "I'd give the candidate's summary a 4"
    verdict_clause  a verdict verb, then a score noun: "..., resulting in a score of 4", "earning a
                    score of 4", "it warrants a coherence rating of 3 out of 5"; or a verb of having:
                    "it has a score of 4 for accuracy", "..., with an overall rating of 3"; or a result
                    connective and a noun with up to three words before it: "resulting in a low
                    relevance score of 2", "leading to a score of 3", "thus scoring a perfect fluency
                    rating of 5", "making it a perfect relevance score of 5" (never with a hedge or a
                    negation in between: "resulting in nearly a perfect score of 5")
    verdict_named   a score noun named after the metric or a quality: "a fluency score of 4", "an
                    overall rating of 3", "my final grade of 2"

Verbs: score, rate, grade, give, assign, award, earn, deserve, merit, receive, get, warrant, result in,
in their inflections. Not a verdict (pipeline.judges.scores.prose_context): negated or hypothetical
("does not deserve a 5", "if it quoted the patient, a fluency score of 5"), a purpose ("to earn a score
of 5"), a count ("3 of the 5 sections", "scored 4 essays", "a 2-hour session"), the scale's ends ("a
perfect score of 5"), a range. The scale check is the extractor's, as for every verdict.

The fraction forms ("N out of M" bound to a verb or a noun further away) are the grammar of
pipeline.judges.scores.fraction_verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Literal

from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.prose_context import generic, hedged, hypothetical, not_a_verdict_after
from pipeline.judges.scores.prose_lexicon import (
    AWARD_VERB,
    HAVING,
    LONG_OBJECT,
    NOUN,
    OBJECT,
    QUALIFIER,
    RESULT_CONNECTIVE,
    RESULT_QUALIFIER,
    SCORE_VERB,
    SP,
    VALUE_B,
)

GrammarKind = Literal["verdict_verb", "verdict_clause", "verdict_named"]

# "I would score it a 4", "it scores a 4", "scoring 4 out of 5", "I'd rate this summary 4", "deserves a 4"
VERDICT_VERB: Final = lazy_compile(
    # After "of", "the" or "a", "score 5" is the noun naming a rubric level ("the requirements of score 5").
    r"(?<!\bof )(?<!\bthe )(?<!\ba )(?<!\ban )"
    rf"\b(?:{SCORE_VERB}(?:{SP}{OBJECT})?(?:{SP}(?:as|at|with))?(?:{SP}an?)?"
    rf"|{AWARD_VERB}(?:{SP}{OBJECT})?{SP}an?){SP}{VALUE_B}",
    re.IGNORECASE,
)
# A longer object, up to a linking "as" or an article: "rate the response provided by the assistant as
# a 2", "give the candidate's summary a 4". With a denominator it is a fraction verdict instead.
VERDICT_VERB_LONG: Final = lazy_compile(
    rf"\b(?:{SCORE_VERB}{SP}{LONG_OBJECT}{SP}(?:(?:as|at)(?:{SP}an?)?|an?)|{AWARD_VERB}{SP}{LONG_OBJECT}{SP}an?)"
    rf"{SP}{VALUE_B}",
    re.IGNORECASE,
)
# "..., resulting in a score of 4", "earning a score of 4", "giving it a coherence rating of 4 out of 5"
VERDICT_CLAUSE: Final = lazy_compile(
    rf"\b(?:{SCORE_VERB}|{AWARD_VERB})(?:{SP}{OBJECT})?{SP}(?:(?:an?|the|its|my){SP})?"
    rf"(?:{QUALIFIER}{SP})?{NOUN}(?:{SP}(?:of|at|as))?(?:{SP}an?)?{SP}{VALUE_B}",
    re.IGNORECASE,
)
# A result clause whose noun carries up to three words: "resulting in a low relevance score of 2", "leading
# to a score of 3", "thus scoring a perfect fluency rating of 5", "making it a perfect relevance score of
# 5". Not a hedge or a negation in between ("resulting in nearly a perfect score", "short of a score of 4").
VERDICT_RESULT: Final = lazy_compile(
    rf"\b{RESULT_CONNECTIVE}{SP}(?:(?:an?|the|its|my){SP})?(?:{RESULT_QUALIFIER}{SP}){{0,3}}{NOUN}"
    rf"(?:{SP}(?:of|at|as))?(?:{SP}an?)?{SP}{VALUE_B}",
    re.IGNORECASE,
)
# "It has a score of 4 for accuracy", "..., with an overall rating of 3". With a denominator it is a
# fraction verdict instead.
VERDICT_CLAUSE_HAVING: Final = lazy_compile(
    rf"\b{HAVING}(?:{SP}{OBJECT})?{SP}(?:an?|the|its|my|our){SP}"
    rf"(?:{QUALIFIER}{SP})?{NOUN}(?:{SP}(?:of|at|as))?(?:{SP}an?)?{SP}{VALUE_B}",
    re.IGNORECASE,
)
# "a fluency score of 4", "an overall rating of 3", "my final grade of 2"
VERDICT_NAMED: Final = lazy_compile(
    rf"\b(?:an?|my|our){SP}{QUALIFIER}{SP}{NOUN}{SP}of{SP}{VALUE_B}",
    re.IGNORECASE,
)
GRAMMAR: Final[tuple[tuple[GrammarKind, re.Pattern[str]], ...]] = (
    ("verdict_verb", VERDICT_VERB),
    ("verdict_verb", VERDICT_VERB_LONG),
    ("verdict_clause", VERDICT_CLAUSE),
    ("verdict_clause", VERDICT_CLAUSE_HAVING),
    ("verdict_clause", VERDICT_RESULT),
    ("verdict_named", VERDICT_NAMED),
)

# Forms this grammar reads only with an integer: with a denominator they are fraction verdicts.
_INTEGER_ONLY: Final = (VERDICT_VERB_LONG, VERDICT_CLAUSE_HAVING)


def verdict_matches(text: str) -> Iterator[tuple[GrammarKind, re.Match[str]]]:
    """Every verdict phrase in ``text`` with its kind; the caller checks what follows the number
    (rubric line, range) and the scale."""
    for kind, pattern in GRAMMAR:
        for match in pattern.finditer(text):
            if pattern in _INTEGER_ONLY and match.group("den") is not None:
                continue  # the fraction grammar's
            if (
                hypothetical(text, match.start())
                or generic(text, match.start())
                or hedged(text, match.start())
            ):
                continue
            if not_a_verdict_after(text, match.end(), fraction=match.group("den") is not None):
                continue
            yield kind, match
