"""Prose verdicts: a small grammar of verdict phrases, not a list of sentences.

A verdict verb or noun phrase bound to a number in the same clause:

    verdict_verb    a verdict verb, then the number: "I would score it a 4", "it scores a 4", "scoring
                    4 out of 5 for relevance", "I'd rate this summary 4", "deserves a 4"
    verdict_clause  a verdict verb, then a score noun: "..., resulting in a score of 4", "earning a
                    score of 4", "it warrants a coherence rating of 3 out of 5"
    verdict_named   a score noun named after the metric or a quality: "a fluency score of 4", "an
                    overall rating of 3", "my final grade of 2"

Verbs: score, rate, grade, give, assign, award, earn, deserve, merit, receive, get, warrant, result in,
in their inflections. Not a verdict: negated or hypothetical ("does not deserve a 5", "if it quoted the
patient, a fluency score of 5"), a purpose ("to earn a score of 5"), a count ("3 of the 5 sections",
"scored 4 essays", "a 2-hour session"), the scale's ends ("a perfect score of 5"), a range. The scale
check is the extractor's, as for every verdict (pipeline.judges.scores).

Every repeat in these patterns is bounded, so one match attempt reads at most a few hundred characters
(tests check the widths) and scanning a reply is linear in its length, whatever the reply.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Literal

GrammarKind = Literal["verdict_verb", "verdict_clause", "verdict_named"]


_SP: Final = r"[ \t]{1,3}"
_NUM_B: Final = r"-?[0-9]{1,6}(?:\.[0-9]{1,6})?"
_VALUE_B: Final = (
    rf"[*_]{{0,2}}(?:(?P<open>\[\[?|\()[ \t]{{0,3}})?(?P<num>{_NUM_B})"
    rf"(?:[ \t]{{0,3}}(?:\]\]?|\)))?[*_]{{0,2}}"
    rf"(?:[ \t*_]{{0,6}}(?:/|\bout{_SP}of\b)[ \t*_]{{0,6}}(?P<den>{_NUM_B}))?"
)
# "it", "this summary", "the candidate's response": what is scored, two words at most after a determiner.
_OBJECT: Final = (
    r"(?:it|this|that|them|these|those"
    rf"|(?:the|this|that|its|their|your|my|our){_SP}[a-z][a-z'’-]{{0,24}}(?:{_SP}[a-z][a-z'’-]{{0,24}})?)"
)
_SCORE_VERB: Final = r"(?:scor(?:e|es|ed|ing)|rat(?:e|es|ed|ing)|grad(?:e|es|ed|ing))"
_AWARD_VERB: Final = (
    r"(?:give|gives|gave|giving|given|assign(?:s|ed|ing)?|award(?:s|ed|ing)?|earn(?:s|ed|ing)?"
    r"|deserv(?:e|es|ed|ing)|merit(?:s|ed|ing)?|receiv(?:e|es|ed|ing)|get|gets|got|getting"
    rf"|warrant(?:s|ed|ing)?|result(?:s|ed|ing)?{_SP}in)"
)
_NOUN: Final = r"(?:score|rating|grade|mark)"
# A word naming the metric or a quality ("fluency", "overall", "final"), not the scale's ends or a
# hypothetical: "a perfect score of 5" and "the highest rating of 5" describe the scale.
_QUALIFIER: Final = (
    r"(?!(?:perfect|maximum|max|minimum|min|highest|lowest|possible|full|top|higher|lower|better|worse|same"
    r"|similar|different|previous|expected|required|target|reference|ideal|potential|average|mean|median"
    r"|human|gold|original|initial)\b)[a-z][a-z-]{1,24}"
)
# "I would score it a 4", "it scores a 4", "scoring 4 out of 5", "I'd rate this summary 4", "deserves a 4"
VERDICT_VERB: Final = re.compile(
    # After "of", "the" or "a", "score 5" is the noun naming a rubric level ("the requirements of score 5").
    r"(?<!\bof )(?<!\bthe )(?<!\ba )(?<!\ban )"
    rf"\b(?:{_SCORE_VERB}(?:{_SP}{_OBJECT})?(?:{_SP}(?:as|at|with))?(?:{_SP}an?)?"
    rf"|{_AWARD_VERB}(?:{_SP}{_OBJECT})?{_SP}an?){_SP}{_VALUE_B}",
    re.IGNORECASE,
)
# "..., resulting in a score of 4", "earning a score of 4", "giving it a coherence rating of 4 out of 5"
VERDICT_CLAUSE: Final = re.compile(
    rf"\b(?:{_SCORE_VERB}|{_AWARD_VERB})(?:{_SP}{_OBJECT})?{_SP}(?:(?:an?|the|its|my){_SP})?"
    rf"(?:{_QUALIFIER}{_SP})?{_NOUN}(?:{_SP}(?:of|at|as))?(?:{_SP}an?)?{_SP}{_VALUE_B}",
    re.IGNORECASE,
)
# "a fluency score of 4", "an overall rating of 3", "my final grade of 2"
VERDICT_NAMED: Final = re.compile(
    rf"\b(?:an?|my|our){_SP}{_QUALIFIER}{_SP}{_NOUN}{_SP}of{_SP}{_VALUE_B}",
    re.IGNORECASE,
)
GRAMMAR: Final[tuple[tuple[GrammarKind, re.Pattern[str]], ...]] = (
    ("verdict_verb", VERDICT_VERB),
    ("verdict_clause", VERDICT_CLAUSE),
    ("verdict_named", VERDICT_NAMED),
)
# Before the verdict: negated ("does not deserve a 5", "wouldn't rate it 4", "no reason to rate it 5")
# or a condition ("if it were clearer, a fluency score of 5"): not the judge's verdict.
NOT_A_VERDICT_BEFORE: Final = re.compile(
    r"(?:\bnot|n[’']t|\bnever|\bcannot|\bno(?![ \t]{1,3}doubt)|\bif"
    r"|\bwould[ \t]have[ \t]been|\bcould|\bmight)"
    r"(?:[ \t]{1,3}[a-z'’]{1,20}){0,2}[ \t]{1,3}$",
    re.IGNORECASE,
)
# A purpose: "to earn a score of 5, it would need ...", "in order to get a 4". ("I'd like to give it a 4"
# is a verdict: only the verbs of receiving make a purpose clause.)
PURPOSE_BEFORE: Final = re.compile(r"\bto[ \t]{1,3}$", re.IGNORECASE)
RECEIVING: Final = re.compile(
    # "to score a 5" receives; "to score it a 4" is the judge scoring.
    r"(?:earn|get|receiv|achiev|reach|deserv|merit|warrant|obtain|be[ \t]"
    r"|scor(?:e|es|ed|ing)[ \t]{1,3}(?:an?[ \t]|[0-9*\[]))",
    re.IGNORECASE,
)


def hypothetical(text: str, start: int) -> bool:
    before = text[max(0, start - 40) : start]
    if NOT_A_VERDICT_BEFORE.search(before):
        return True
    return PURPOSE_BEFORE.search(before) is not None and RECEIVING.match(text, start) is not None


# After the verdict's number: a word that continues the clause is fine ("4 because ...", "4 for
# relevance", "4 overall"); another word makes it a count or a measure ("scored 4 essays", "a 2-hour").
CLAUSE_GOES_ON: Final = frozenset(
    # Not "on" or "in": "the patient scored 14 on the PHQ-8" is about someone else.
    {
        *("for", "at", "as", "and", "but", "because", "since", "given", "due", "based", "overall"),
        *("which", "that", "so", "with", "from", "by", "this", "here", "there", "is", "was"),
        *("considering", "reflecting", "indicating", "showing", "meaning", "or", "to"),
    }
)
WORD_AFTER: Final = re.compile(r"[*_]{0,2}(?:[ \t]{1,3}|[-–])(?P<word>[A-Za-z]{1,30})")
OF_AFTER: Final = re.compile(r"[ \t]{1,3}of\b", re.IGNORECASE)
# "an overall score of 3 or higher", "a 4+": a threshold, not a verdict.
THRESHOLD_AFTER: Final = re.compile(
    r"\+|[ \t]{1,3}(?:or|and)[ \t]{1,3}"
    r"(?:higher|lower|more|less|above|below|better|worse|greater|over|under)\b",
    re.IGNORECASE,
)


def verdict_matches(text: str) -> Iterator[tuple[GrammarKind, re.Match[str]]]:
    """Every verdict phrase in ``text`` with its kind; the caller checks what follows the number
    (rubric line, range) and the scale."""
    for kind, pattern in GRAMMAR:
        for match in pattern.finditer(text):
            if hypothetical(text, match.start()):
                continue
            after = match.end()
            # "3 of the 5 sections": a count, not a verdict.
            if OF_AFTER.match(text, after) or THRESHOLD_AFTER.match(text, after):
                continue
            word = WORD_AFTER.match(text, after)
            if word is not None and (text[after] in "-–" or word.group("word").lower() not in CLAUSE_GOES_ON):
                continue
            yield kind, match
