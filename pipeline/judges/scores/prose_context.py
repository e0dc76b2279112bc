"""What around a prose verdict makes it none: the words before the verb and the words after the number.

Before: a negation or a hypothetical ("does not deserve a 5", "wouldn't rate it 4", "I would have given
it a 9"), a purpose ("to earn a score of 5, it would need ..."), a generic description opening its
sentence ("A response that has a score of 5 out of 5 ...", "Any summary with a rating of 4/5 ...").

After: a count or a measure (the number binds to a noun: "scored 4 essays", "2 out of 4 claims are
supported", "a 2-hour session"), a partitive ("3 of the 5 sections"), a threshold ("3 or higher",
"a 4+"), a condition ("4 out of 5 if it quoted the patient"). A word that carries the clause on is
fine: "4 because ...", "4 for relevance", "4 out of 5 in terms of accuracy", "8/10 overall".

Each check reads a bounded window around the match, so the cost per match is bounded.
"""

from __future__ import annotations

import re
from typing import Final

from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.prose_lexicon import METRIC_NOUN, SP, WORD

# Before the verdict: negated ("does not deserve a 5", "wouldn't rate it 4", "no reason to rate it 5"),
# a condition ("if it were clearer, a fluency score of 5") or a counterfactual ("I would have given it a
# 9, but"); "I would have to rate it 6" is a verdict.
NOT_A_VERDICT_BEFORE: Final = lazy_compile(
    r"(?:\bnot|n[’']t|\bnever|\bcannot|\bno(?![ \t]{1,3}doubt)|\bif|\bhardly|\bbarely|\bscarcely"
    r"|\bwould[ \t]have[ \t]been|\bcould|\bmight"
    r"|(?:\bwould|[’']d)[ \t]{1,3}have(?![ \t]{1,3}to\b))"
    r"(?:[ \t]{1,3}[a-z'’]{1,20}){0,2}[ \t]{1,3}$",
    re.IGNORECASE,
)
# A purpose: "to earn a score of 5, it would need ...", "in order to get a 4". ("I'd like to give it a 4"
# is a verdict: only the verbs of receiving make a purpose clause.)
PURPOSE_BEFORE: Final = lazy_compile(r"\bto[ \t]{1,3}$", re.IGNORECASE)
RECEIVING: Final = lazy_compile(
    # "to score a 5" receives; "to score it a 4" is the judge scoring.
    r"(?:earn|get|receiv|achiev|reach|deserv|merit|warrant|obtain|be[ \t]"
    r"|scor(?:e|es|ed|ing)[ \t]{1,3}(?:an?[ \t]|[0-9*\[]))",
    re.IGNORECASE,
)
# A sentence that opens with an indefinite noun phrase describes a kind of reply, not this one: "A
# response that has a score of 5 out of 5 is flawless", "Any summary with a rating of 4/5 ...".
GENERIC_OPENING: Final = lazy_compile(
    rf"[ \t*_>#-]{{0,6}}(?:an?|any|each|every|one){SP}{WORD}(?:{SP}{WORD}){{0,2}}"
    rf"(?:{SP}(?:that|which|who))?[ \t]{{0,3}}",
    re.IGNORECASE,
)
_SENTENCE_END: Final = ".!?;:\n"
_LOOK_BACK: Final = 80


# Every word NOT_A_VERDICT_BEFORE starts with: most windows hold none, and a substring test is cheaper
# than a regex search at each of the window's positions.
_TRIGGERS: Final = (
    *("no", "n't", "n’t", "never", "if", "would", "could", "might", "'d", "’d"),
    *("hardly", "barely", "scarcely"),
)


# Just before the verdict's article: a hedge or a comparison ("less than a relevance score of 3", "short
# of a score of 4", "nearly a perfect score of 5", "rather than a score of 2"): a bound, not the verdict.
HEDGE_BEFORE: Final = lazy_compile(
    r"(?:\b(?:less|more|fewer|higher|lower|better|worse|rather|other)[ \t]{1,3}than|\bshort[ \t]{1,3}of"
    r"|\binstead[ \t]{1,3}of|\bclose[ \t]{1,3}to|\bup[ \t]{1,3}to|\bat[ \t]{1,3}(?:least|most)"
    r"|\b(?:nearly|almost|not|never|above|below|under|over|beyond|approaching|near))[ \t]{1,3}$",
    re.IGNORECASE,
)


def hedged(text: str, start: int) -> bool:
    """The words just before ``start`` make what follows a bound or a comparison, not a verdict."""
    return HEDGE_BEFORE.search(text, max(0, start - 24), start) is not None


def hypothetical(text: str, start: int) -> bool:
    """The words before ``start`` make a verdict there negated, conditional or a purpose."""
    before = text[max(0, start - 40) : start]
    lowered = before.lower()
    if any(trigger in lowered for trigger in _TRIGGERS) and NOT_A_VERDICT_BEFORE.search(before):
        return True
    purpose = lowered.rstrip(" \t").endswith("to") and PURPOSE_BEFORE.search(before) is not None
    return purpose and RECEIVING.match(text, start) is not None


def generic(text: str, start: int) -> bool:
    """The sentence before ``start`` is only an indefinite noun phrase (and a relative pronoun)."""
    window = max(0, start - _LOOK_BACK)
    opening = max(text.rfind(mark, window, start) for mark in _SENTENCE_END)
    if opening < 0 and window > 0:
        return False  # the sentence began further back than the window: more than a noun phrase
    return GENERIC_OPENING.fullmatch(text, opening + 1, start) is not None


# After an integer verdict: a word that continues the clause is fine ("4 because ...", "4 for
# relevance", "4 overall"); another word makes it a count or a measure ("scored 4 essays", "a 2-hour").
CLAUSE_GOES_ON: Final = frozenset(
    # Not "on" or "in": "the patient scored 14 on the PHQ-8" is about someone else.
    {
        *("for", "at", "as", "and", "but", "because", "since", "given", "due", "based", "overall"),
        *("which", "that", "so", "with", "from", "by", "this", "here", "there", "is", "was"),
        *("considering", "reflecting", "indicating", "showing", "meaning", "or", "to"),
    }
)
# After a fraction, fewer: "5 out of 5 is reserved for ..." and "3 out of 5 to pass" describe the scale.
FRACTION_GOES_ON: Final = frozenset(
    {
        *("for", "as", "and", "but", "because", "since", "given", "due", "based", "overall", "which"),
        *("so", "with", "while", "although", "though", "considering", "reflecting", "indicating"),
        *("showing", "meaning", "thanks", "owing"),
    }
)
WORD_AFTER: Final = lazy_compile(r"[*_]{0,2}(?:[ \t]{1,3}|[-–])(?P<word>[A-Za-z]{1,30})")
OF_AFTER: Final = lazy_compile(r"[ \t]{1,3}of\b", re.IGNORECASE)
# "an overall score of 3 or higher", "a 4+": a threshold, not a verdict.
THRESHOLD_AFTER: Final = lazy_compile(
    r"\+|[ \t]{1,3}(?:or|and)[ \t]{1,3}"
    r"(?:higher|lower|more|less|above|below|better|worse|greater|over|under)\b",
    re.IGNORECASE,
)
# "4 out of 5 if it quoted the patient", "a 5 when it is flawless", "rating it 4 would be generous": the
# verdict it would get, or a rule, not the one it gets.
CONDITION_AFTER: Final = lazy_compile(
    r"[ \t]{1,3}(?:if|unless|once|provided|assuming|when|whenever|would|could|might)\b", re.IGNORECASE
)
# Nouns of the same shape that start a phrase of their own ("4 out of 5 in addition to ...").
_NOT_A_METRIC: Final = (
    r"(?:addition|comparison|conclusion|contrast|question|position|proportion|relation|reference"
    r"|connection|accordance|combination|correspondence|section|session|conversation|instance"
    r"|sentence|sequence|evidence|existence|presence|absence|experience|practice|difference)\b"
)
# After a fraction: the metric it is about, or whose view it is ("4 out of 5 in terms of relevance",
# "4 out of 5 in relevance", "8/10 in my view", "4/5 from me"); a rating unit, then the clause ends
# ("4 out of 5 stars.").
FRACTION_PHRASE_AFTER: Final = lazy_compile(
    r"[*_]{0,2}[ \t]{1,3}(?:in[ \t]{1,3}(?:terms[ \t]{1,3}of|my|our)|from[ \t]{1,3}(?:me|us)"
    # the metric named by its noun: "a 4 out of 5 in relevance", "in overall quality"
    rf"|in[ \t]{{1,3}}(?:overall[ \t]{{1,3}})?(?!{_NOT_A_METRIC}){METRIC_NOUN}"
    r"(?=[ \t]{0,3}(?:[.,;:!)\n]|$)|[ \t]{1,3}[a-z])"
    r"|(?:points?|stars?)(?=[ \t]{0,3}(?:[.,;:!)\n]|$|(?:for|overall|because|as|in[ \t]terms)\b)))\b",
    re.IGNORECASE,
)


# "are rated as 5, 1, and 3, respectively": a list of numbers, one per thing, not one verdict.
LIST_AFTER: Final = lazy_compile(r"[ \t]{0,3},[ \t]{0,3}(?:and[ \t]{1,3})?-?[0-9]")


def not_a_verdict_after(text: str, after: int, *, fraction: bool) -> bool:
    """What follows the number at ``after`` makes it a count, a measure, a threshold, a condition or
    one of a list."""
    if any(
        pattern.match(text, after) for pattern in (OF_AFTER, THRESHOLD_AFTER, CONDITION_AFTER, LIST_AFTER)
    ):
        return True
    word = WORD_AFTER.match(text, after)
    if word is None:
        return False
    if text[after] in "-–":
        return True
    if fraction:
        goes_on = word.group("word").lower() in FRACTION_GOES_ON
        return not goes_on and FRACTION_PHRASE_AFTER.match(text, after) is None
    return word.group("word").lower() not in CLAUSE_GOES_ON
