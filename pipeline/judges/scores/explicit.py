"""Explicit verdicts: a label ("Score: 4"), a JSON key ({"score": 4}), a bracketed "[[4]]".

Labels are score, rating, grade, plus any the caller passes (a prompt asking "Coherence: N"). The
value may sit alone on one of the next two lines after its label ("Score:\\n\\n4"), and a label
followed by a placeholder ("Score: [your score, as a number between 1 and 5]") is the prompt's
template echoed, which the extractor reports when nothing else is readable.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from pipeline.judges.scores.candidates import NUM, VALUE, Candidate, candidate
from pipeline.judges.scores.lazy import lazy_compile

DEFAULT_LABELS: Final[tuple[str, ...]] = ("score", "rating", "grade")

_SEPARATOR: Final = r"[ \t*_]*(?:\([^()\n]{0,40}\)[ \t*_]*)?(?:[:=\-–—]|：)"
# The value may sit alone on one of the next two lines ("Score:\n\n4"); that is checked in code.
_GAP: Final = r"[ \t\r*_]*(?:\n[ \t\r*_]*){0,2}"
# Not after a name or a bracket: "dp[[0]]" is code indexing, not a verdict.
_BRACKETED: Final = lazy_compile(
    rf"(?<![\w\]])\[\[[ \t]*(?P<num>{NUM})(?:[ \t]*/[ \t]*(?P<den>{NUM}))?[ \t]*\]\]"
)
# At one number, the highest rank names the verdict ("Rating: [[4]]" is labelled, not bracketed).
_RANK: Final[dict[str, int]] = {"bracketed": 0, "labelled": 1, "json": 2}


@dataclass(frozen=True, slots=True)
class LabelPatterns:
    labelled: re.Pattern[str]
    template: re.Pattern[str]
    json_object: re.Pattern[str]


@lru_cache(maxsize=32)
def _patterns(labels: tuple[str, ...]) -> LabelPatterns:
    words = "|".join(re.escape(label) for label in sorted(set(labels), key=len, reverse=True))
    # "_" is markdown here ("__Score__: 4"), not a word character.
    label = rf"(?<![^\W_])(?<!-)(?:{words})(?![^\W_])"
    key = rf"[\"']?(?:(?:final|overall|total)_)?(?:{words})[\"']?"
    return LabelPatterns(
        labelled=re.compile(rf"{label}{_SEPARATOR}(?P<gap>{_GAP}){VALUE}", re.IGNORECASE),
        template=re.compile(rf"{label}{_SEPARATOR}[ \t*_]*[\[<{{(][ \t]*[a-z]", re.IGNORECASE),
        json_object=re.compile(
            rf"\{{[^{{}}]*?(?<![\w-]){key}\s*:\s*[\"']?(?P<num>{NUM})(?:[ \t]*/[ \t]*(?P<den>{NUM}))?",
            re.IGNORECASE,
        ),
    )


def label_patterns(labels: tuple[str, ...] = ()) -> LabelPatterns:
    """The patterns for score/rating/grade plus ``labels`` (lower-cased, blanks dropped)."""
    extra = tuple(label.strip().lower() for label in labels if label.strip())
    return _patterns(DEFAULT_LABELS + extra)


def explicit_candidates(text: str, patterns: LabelPatterns) -> Iterator[Candidate | None]:
    yield from (candidate("labelled", m, text, _RANK["labelled"]) for m in patterns.labelled.finditer(text))
    yield from (candidate("json", m, text, _RANK["json"]) for m in patterns.json_object.finditer(text))
    yield from (candidate("bracketed", m, text, _RANK["bracketed"]) for m in _BRACKETED.finditer(text))
