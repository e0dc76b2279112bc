"""A verdict candidate: a number some pattern bound to a verdict, what follows it, and the scale check.

Every reading kind (explicit, prose, bare) finds candidates; this module decides which candidates
are no verdict after all (a rubric line, a count, a number glued to letters), which are ranges or
choices, which one is the last verdict, and what the scale makes of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.reading import Reason, Scale, ScoreReading, as_number

NUM: Final = r"-?[0-9]+(?:\.[0-9]+)?"
# Each whitespace run below is a character class that cannot overlap its neighbour, so a long run of
# blanks costs linear time, not polynomial backtracking.
VALUE: Final = (
    rf"(?:(?P<open>\[\[?|\()[ \t]*)?(?P<num>{NUM})(?:[ \t]*(?:\]\]?|\)))?"
    rf"(?:[ \t*_]*(?:/|\bout[ \t]+of\b)[ \t*_]*(?P<den>{NUM}))?"
)

# Checked right after a value (same line only: a list on the next line is not a range).
_RANGE_AFTER: Final = lazy_compile(
    # "3 or 4", "3-4", "a 4 or a 5"
    rf"[ \t]*(?P<sep>[-–—~]|\bto\b|\bor\b)[ \t]*(?:\[\[?|\(|an?[ \t]+)?(?P<hi>{NUM})"
    r"(?P<more>[ \t]*[-–—][ \t]*[0-9]|[ \t]+or[ \t]+more\b)?",
    re.IGNORECASE,
)
# A rubric line, not a verdict: "score of 5 : 0 mistakes", "Score 5 = ...", "score of 5 for 0 mistakes".
_KEY_AFTER: Final = lazy_compile(
    r"[ \t]*(?:[:=]|(?:for|if|when|means?|indicates?)[ \t]+(?:only[ \t]+|just[ \t]+)?[0-9])", re.IGNORECASE
)
_COUNT_AFTER: Final = lazy_compile(
    r"[ \t]*(?:%|(?:mistake|error|issue|problem|symptom|item|question|sentence|word|point|time|minute"
    r"|hour|day|week|month|year)s?\b)",
    re.IGNORECASE,
)
_REST_OF_LINE_EMPTY: Final = lazy_compile(r"[ \t\r*_.]*(?:\n|$)")


@dataclass(frozen=True, slots=True)
class Candidate:
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


def candidate(kind: Reason, match: re.Match[str], text: str, rank: int = 0) -> Candidate | None:
    """The verdict ``match`` found, or None when what follows the number makes it no verdict."""
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
    return Candidate(
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


def last(candidates: Iterable[Candidate | None]) -> Candidate | None:
    """The last verdict in the text; at one position, the highest rank."""
    found = sorted((c for c in candidates if c is not None), key=lambda c: (c.position, c.rank))
    kept: list[Candidate] = []
    reach = pending = position = -1
    for found_one in found:
        if found_one.position != position:
            reach, position = max(reach, pending), found_one.position
        # The "[[4]]" of "Rating: [[3]] or [[4]]" is the second half of one ambiguous verdict, not a new one.
        if found_one.position < reach:
            continue
        kept.append(found_one)
        if found_one.ambiguous:
            pending = max(pending, found_one.end)
    return kept[-1] if kept else None


def judge(verdict: Candidate, scale: Scale) -> ScoreReading:
    """What the scale makes of the verdict, in this order: a range or choice, a denominator other than
    the scale's max, a value off the scale (never clamped), a decimal on an integer scale."""
    if verdict.ambiguous:
        return ScoreReading(None, "ambiguous", verdict.matched)
    value = float(verdict.num)
    stated = as_number(value)
    if verdict.den is not None and float(verdict.den) != scale.max:
        return ScoreReading(None, "scale_mismatch", verdict.matched, stated)
    if not scale.min <= value <= scale.max:
        return ScoreReading(None, "out_of_range", verdict.matched, stated)
    if value.is_integer() or not scale.integer:
        return ScoreReading(stated, verdict.kind, verdict.matched, stated)
    return ScoreReading(None, "non_integer", verdict.matched, stated)
