"""Read a judge's score out of its free-text reply: scale-aware, and conservative.

A judge is asked to end with ``Score: N``; real judges (a 135M model especially) echo the rubric,
mention other numbers, pad with markdown or answer in JSON. The extractor returns *no* score
rather than a guess: a wrong score silently corrupts every downstream statistic, while a missing
one is visible, re-asked, and counted.

What is read (``ScoreReading.reason`` on success):

    labelled     ``Score: 4``, ``**Score:** 4/5``, ``Rating: [[4]]``, ``SCORE - 2``, ``Final score: 4.``,
                 ``Score (1-5): 4``, ``Score:`` with the number alone on one of the next two lines.
                 Labels: score, rating, grade, plus any ``labels=`` passed (e.g. "coherence").
    json         an object with a score/rating/grade key anywhere, fenced or not: ``{"score": 4}``
    bracketed    ``[[4]]`` without a label (MT-Bench: "I would rate it a [[9]]")
    phrase       a verdict sentence: "I give it a score of 4", "I would rate it 4 out of 5",
                 "my score is 4", "I'd give this a 4"; a bare "score of 4" is not one (the rubric
                 says "score of 4 : 1-2 mistakes")
    verdict_verb, verdict_clause, verdict_named
                 prose verdicts read by the grammar of pipeline.judges.prose_verdicts: "I'd rate this
                 summary 4", "..., resulting in a score of 4", "a fluency score of 4"; where a phrase
                 above reads the same number, its reason stays "phrase"
    bare_number  the whole reply is a number: "4", "4.", "**4**", "- 4", "4/5", "1 (poor)"
    decimal_rounded, decimal_kept
                 a decimal on an integer scale ("Score: 3.5/5"), only when the caller asks for it with
                 ``decimals="round"`` (3.5 -> 4, halves up) or ``decimals="keep"`` (3.5); by default
                 it is ``non_integer``, no score

Precedence:

1. Explicit verdicts (labelled, json, bracketed) beat prose verdicts (phrase and the grammar's), which
   beat a bare number.
2. Among explicit verdicts the one whose number comes LAST in the text wins (Inspect AI's "last
   GRADE wins"): judges reason first and conclude last, and an earlier verdict is more likely
   quoted, revised or part of an example. Same for phrases. A later verdict wins even over an
   earlier valid one when it is itself unusable: the judge's last word is its verdict, and falling
   back to an earlier one would be a guess.
3. The winning verdict is then checked against the scale, in this order; failing gives no score:
   a denominator (``4/10``, ``4 out of 10``) must equal ``scale.max`` (else ``scale_mismatch``);
   the value must lie in [min, max], never clamped (else ``out_of_range``); on an integer scale it
   must be integral, ``4.0`` is read as 4 but ``4.5`` is not rounded (else ``non_integer``, unless
   ``decimals`` says otherwise).

Never a verdict (the candidate is dropped, as if absent):

* a number followed by ``:``, ``=``, or "for/if/when/means <number>": a rubric line ("score of 5 :
  0 mistakes", "Score: 5 : 0 mistakes", "score of 5 for 0 mistakes"), whatever precedes it;
* a number followed by a count noun or ``%`` ("Score: 2 mistakes", "gets 2 weeks", "80%");
* a number glued to letters ("4th"); ``[[0]]`` right after a name or a bracket (code: ``dp[[0]]``);
* with the value on a later line than its label, anything else on that line ("Score:" and then
  "1. First, ..." on the next line: a numbered list).

A verdict that is a range or a choice ("Score: 3-4", "Score: 1-5", "3 or 4", "3 to 4") is
``ambiguous``; a dash followed by a rubric description is not a range ("Score: 4 - 1-2 mistakes",
"Score: 5 - 0 mistakes": the number after the dash starts a range of its own, or is smaller), and the
second half of a range is no later verdict ("Rating: [[3]] or [[4]]" is ambiguous, not 4). In prose,
a range that is the whole scale or leaves it ("rate it 1-5") is the scale echoed and no verdict at all,
as is any range after a grammar verdict ("it scores 1-5 on average"); a negated or purpose phrase
("does not deserve a score of 5", "to earn a score of 5") is no verdict either. A label
followed by a placeholder ("Score: [your score, as a number between 1 and 5]") is the prompt's
template echoed: ``template_echo`` when nothing else is readable. Empty or whitespace-only text is
``empty``; anything else unreadable is ``no_score``. Numbers are ASCII digits; words ("four") are
not read.

Integral values come back as ``int``, others as ``float``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal, get_args

from pipeline.judges.prose_verdicts import hypothetical, verdict_matches

ReadReason = Literal[
    "labelled",
    "json",
    "bracketed",
    "phrase",
    "verdict_verb",
    "verdict_clause",
    "verdict_named",
    "bare_number",
    # a decimal on an integer scale, read only when the caller opts in (``decimals=``)
    "decimal_rounded",
    "decimal_kept",
]
UnreadReason = Literal[
    "empty",
    "no_score",
    "template_echo",
    "ambiguous",
    "out_of_range",
    "scale_mismatch",
    "non_integer",
]
Reason = Literal[ReadReason, UnreadReason]  # one flat Literal: get_args lists every reason
READ_REASONS: Final[frozenset[str]] = frozenset(get_args(ReadReason))
# What a decimal on an integer scale ("Score: 3.5/5") becomes: no score (the default), the nearest
# integer (halves up), or the value as written. Either way the reason says so, and it is counted.
DecimalPolicy = Literal["unscored", "round", "keep"]
DECIMAL_POLICIES: Final[tuple[str, ...]] = get_args(DecimalPolicy)


@dataclass(frozen=True, slots=True)
class Scale:
    """The score range a judge was asked for; ``integer=False`` allows e.g. MT-Bench's 8.5."""

    min: float
    max: float
    integer: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min) and math.isfinite(self.max) and self.min < self.max):
            raise ValueError(f"a scale needs finite min < max, got {self.min}..{self.max}")
        if self.integer and not (float(self.min).is_integer() and float(self.max).is_integer()):
            raise ValueError(f"an integer scale needs integral bounds, got {self.min}..{self.max}")


@dataclass(frozen=True, slots=True)
class ScoreReading:
    """``score`` is None unless ``reason`` is one of READ_REASONS; ``matched`` is the span read."""

    score: int | float | None
    reason: Reason
    matched: str | None


DEFAULT_SCALE: Final = Scale(1, 5)
DEFAULT_LABELS: Final[tuple[str, ...]] = ("score", "rating", "grade")

_NUM: Final = r"-?[0-9]+(?:\.[0-9]+)?"
# Each whitespace run below is a character class that cannot overlap its neighbour, so a long run of
# blanks costs linear time, not polynomial backtracking.
_VALUE: Final = (
    rf"(?:(?P<open>\[\[?|\()[ \t]*)?(?P<num>{_NUM})(?:[ \t]*(?:\]\]?|\)))?"
    rf"(?:[ \t*_]*(?:/|\bout[ \t]+of\b)[ \t*_]*(?P<den>{_NUM}))?"
)
_SEPARATOR: Final = r"[ \t*_]*(?:\([^()\n]{0,40}\)[ \t*_]*)?(?:[:=\-–—]|：)"
# The value may sit alone on one of the next two lines ("Score:\n\n4"); that is checked in code.
_GAP: Final = r"[ \t\r*_]*(?:\n[ \t\r*_]*){0,2}"

# Not after a name or a bracket: "dp[[0]]" is code indexing, not a verdict.
_BRACKETED: Final = re.compile(
    rf"(?<![\w\]])\[\[[ \t]*(?P<num>{_NUM})(?:[ \t]*/[ \t]*(?P<den>{_NUM}))?[ \t]*\]\]"
)
_VERDICT_NOUN: Final = r"(?:score|rating|grade)"
_GIVE: Final = r"(?:give|gives|gave|giving|assign|assigns|assigned|award|awards|awarded)"
_PHRASE: Final = re.compile(
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
    r"[ \t]+(?:is|would[ \t]+be|will[ \t]+be|should[ \t]+be)(?:[ \t]+an?)?"
    # "I'd give this a 4", "give it 4/5"
    rf"|\b{_GIVE}[ \t]+(?:it|this|that|them|the[ \t]+[a-z]+)(?:[ \t]+an?)?"
    rf")[ \t*_]*{_VALUE}",
    re.IGNORECASE,
)


def _grammar_candidates(text: str) -> Iterator[_Candidate]:
    for kind, match in verdict_matches(text):
        candidate = _candidate(kind, match, text, _PHRASE_RANK[kind])
        # A range after a verdict verb describes the scale ("it scores 1-5 on average"): no verdict.
        if candidate is not None and not candidate.ambiguous:
            yield candidate


_BARE: Final = re.compile(
    rf"\s*(?:[-*•>#]+[ \t]+)?[*_`\"']*(?P<core>(?:\[\[?|\()?(?P<num>{_NUM})(?:\]\]?|\))?"
    rf"(?:[ \t]*(?:/|\bout[ \t]+of\b)[ \t]*(?P<den>{_NUM}))?)[*_`\"']*"
    # a one-word gloss, as in "1 (dull)" or "0 (no)"
    r"(?:[ \t]*\([^()\n0-9]{1,30}\))?(?:\.[*_`\"']*)?\s*",
    re.IGNORECASE,
)

# Checked right after a value (same line only: a list on the next line is not a range).
_RANGE_AFTER: Final = re.compile(
    rf"[ \t]*(?P<sep>[-–—~]|\bto\b|\bor\b)[ \t]*(?:\[\[?|\()?(?P<hi>{_NUM})"
    r"(?P<more>[ \t]*[-–—][ \t]*[0-9]|[ \t]+or[ \t]+more\b)?",
    re.IGNORECASE,
)
# A rubric line, not a verdict: "score of 5 : 0 mistakes", "Score 5 = ...", "score of 5 for 0 mistakes".
_KEY_AFTER: Final = re.compile(
    r"[ \t]*(?:[:=]|(?:for|if|when|means?|indicates?)[ \t]+(?:only[ \t]+|just[ \t]+)?[0-9])", re.IGNORECASE
)
_COUNT_AFTER: Final = re.compile(
    r"[ \t]*(?:%|(?:mistake|error|issue|problem|symptom|item|question|sentence|word|point|time|minute"
    r"|hour|day|week|month|year)s?\b)",
    re.IGNORECASE,
)
_REST_OF_LINE_EMPTY: Final = re.compile(r"[ \t\r*_.]*(?:\n|$)")

_KIND_RANK: Final[dict[str, int]] = {"bracketed": 0, "labelled": 1, "json": 2}
# Among prose verdicts at the same number the oldest reading wins the tie, so replies read before the
# grammar keep their reason ("phrase") and recorded outputs stay byte-identical.
_PHRASE_RANK: Final[dict[str, int]] = {
    "verdict_named": 0,
    "verdict_clause": 1,
    "verdict_verb": 2,
    "phrase": 3,
}


@lru_cache(maxsize=32)
def _label_patterns(labels: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    words = "|".join(re.escape(label) for label in sorted(set(labels), key=len, reverse=True))
    # "_" is markdown here ("__Score__: 4"), not a word character.
    label = rf"(?<![^\W_])(?<!-)(?:{words})(?![^\W_])"
    labelled = re.compile(rf"{label}{_SEPARATOR}(?P<gap>{_GAP}){_VALUE}", re.IGNORECASE)
    template = re.compile(rf"{label}{_SEPARATOR}[ \t*_]*[\[<{{(][ \t]*[a-z]", re.IGNORECASE)
    key = rf"[\"']?(?:(?:final|overall|total)_)?(?:{words})[\"']?"
    json_object = re.compile(
        rf"\{{[^{{}}]*?(?<![\w-]){key}\s*:\s*[\"']?(?P<num>{_NUM})(?:[ \t]*/[ \t]*(?P<den>{_NUM}))?",
        re.IGNORECASE,
    )
    return labelled, template, json_object


_DEFAULT_PATTERNS: Final = _label_patterns(DEFAULT_LABELS)


@dataclass(frozen=True, slots=True)
class _Candidate:
    kind: Reason
    position: int  # where the number starts; the last verdict wins
    rank: int
    num: str
    den: str | None
    matched: str
    ambiguous: bool
    end: int = 0  # where the verdict, range included, ends
    high: str | None = None  # the range's other end ("3-4": 4)

    def spans(self, scale: Scale) -> bool:
        """The range is the whole scale or leaves it ("rate it 1-5" on 1-5 or on 1-3): the prompt's
        scale echoed, not a choice between two scores."""
        if self.high is None:
            return False
        low, high = float(self.num), float(self.high)
        whole = (low, high) == (scale.min, scale.max)
        return whole or not (scale.min <= low <= scale.max and scale.min <= high <= scale.max)


def _candidate(kind: Reason, match: re.Match[str], text: str, rank: int = 0) -> _Candidate | None:
    end = match.end()
    # A JSON value is checked right after its number; the closing brace may be far away.
    value_end = match.end("den") if match.group("den") is not None else match.end("num")
    after = end if kind != "json" else value_end
    if _KEY_AFTER.match(text, after) or _COUNT_AFTER.match(text, after):
        return None
    if after < len(text) and (text[after].isalnum() or text[after] == "_"):
        return None
    if "gap" in match.groupdict() and "\n" in match.group("gap") and not _REST_OF_LINE_EMPTY.match(text, end):
        return None
    range_after = _RANGE_AFTER.match(text, after)
    # "Score: 4 - 1-2 mistakes" and "Score: 5 - 0 mistakes" are a verdict and its rubric line, not a range.
    if (
        range_after is not None
        and range_after.group("sep") in "-–—"
        and (
            range_after.group("more") is not None
            or float(range_after.group("hi")) < float(match.group("num"))
        )
    ):
        range_after = None
    return _Candidate(
        kind=kind,
        position=match.start("num"),
        rank=rank,
        num=match.group("num"),
        den=match.group("den"),
        matched=text[match.start() : range_after.end() if range_after else after],
        ambiguous=range_after is not None,
        end=range_after.end() if range_after else after,
        high=range_after.group("hi") if range_after else None,
    )


def _last(candidates: Iterable[_Candidate | None]) -> _Candidate | None:
    found = sorted((c for c in candidates if c is not None), key=lambda c: (c.position, c.rank))
    kept: list[_Candidate] = []
    reach = pending = position = -1
    for candidate in found:
        if candidate.position != position:
            reach, position = max(reach, pending), candidate.position
        # The "[[4]]" of "Rating: [[3]] or [[4]]" is the second half of one ambiguous verdict, not a new one.
        if candidate.position < reach:
            continue
        kept.append(candidate)
        if candidate.ambiguous:
            pending = max(pending, candidate.end)
    return kept[-1] if kept else None


def _judge(candidate: _Candidate, scale: Scale, decimals: DecimalPolicy = "unscored") -> ScoreReading:
    if candidate.ambiguous:
        return ScoreReading(None, "ambiguous", candidate.matched)
    if candidate.den is not None and float(candidate.den) != scale.max:
        return ScoreReading(None, "scale_mismatch", candidate.matched)
    value = float(candidate.num)
    if not scale.min <= value <= scale.max:
        return ScoreReading(None, "out_of_range", candidate.matched)
    if value.is_integer():
        return ScoreReading(int(value), candidate.kind, candidate.matched)
    if not scale.integer:
        return ScoreReading(value, candidate.kind, candidate.matched)
    if decimals == "round":
        # Halves up (3.5 -> 4), not Python's round-half-even; integral bounds keep it on the scale.
        return ScoreReading(math.floor(value + 0.5), "decimal_rounded", candidate.matched)
    if decimals == "keep":
        return ScoreReading(value, "decimal_kept", candidate.matched)
    return ScoreReading(None, "non_integer", candidate.matched)


def extract_score(
    text: str,
    scale: Scale = DEFAULT_SCALE,
    *,
    labels: Iterable[str] = (),
    decimals: DecimalPolicy = "unscored",
) -> ScoreReading:
    """Read the judge's verdict from ``text``; see the module docstring for what and in which order.

    ``labels`` adds label words to score/rating/grade, for prompts that ask e.g. "Coherence: N".
    ``decimals`` says what a decimal on an integer scale becomes ("Score: 3.5/5"): by default no score
    (``non_integer``); "round" reads the nearest integer (``decimal_rounded``), "keep" the value as
    written (``decimal_kept``).
    """
    if decimals not in DECIMAL_POLICIES:
        raise ValueError(f"decimals must be one of {', '.join(DECIMAL_POLICIES)}, got {decimals!r}")
    if not text.strip():
        return ScoreReading(None, "empty", None)
    extra = tuple(label.strip().lower() for label in labels if label.strip())
    labelled, template, json_object = _label_patterns(DEFAULT_LABELS + extra) if extra else _DEFAULT_PATTERNS

    explicit = _last(
        [
            *(_candidate("labelled", m, text, _KIND_RANK["labelled"]) for m in labelled.finditer(text)),
            *(_candidate("json", m, text, _KIND_RANK["json"]) for m in json_object.finditer(text)),
            *(_candidate("bracketed", m, text, _KIND_RANK["bracketed"]) for m in _BRACKETED.finditer(text)),
        ]
    )
    if explicit is not None:
        return _judge(explicit, scale, decimals)
    phrase = _last(
        candidate
        for candidate in (
            *(
                _candidate("phrase", m, text, _PHRASE_RANK["phrase"])
                for m in _PHRASE.finditer(text)
                if not hypothetical(text, m.start())
            ),
            *_grammar_candidates(text),
        )
        if candidate is not None and not candidate.spans(scale)
    )
    if phrase is not None:
        return _judge(phrase, scale, decimals)
    bare = _BARE.fullmatch(text)
    if bare is not None:
        den = bare.group("den")
        return _judge(
            _Candidate("bare_number", 0, 0, bare.group("num"), den, bare.group("core"), False),
            scale,
            decimals,
        )
    template_match = template.search(text)
    if template_match is not None:
        return ScoreReading(None, "template_echo", template_match.group(0))
    return ScoreReading(None, "no_score", None)
