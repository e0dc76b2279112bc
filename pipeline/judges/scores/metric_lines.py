"""Multi-metric replies: a judge asked for one metric that rates several, one line each.

A judge asked for coherence may answer "Coherence: 4/5\\nFluency: 3/5\\nRelevance: 2/5\\nOverall: 3/5".
The metric the call asked for is known to the stage, which passes it (``extract_score(metric=...)``),
and such a reply is read for that metric only:

* the reply rates the metric on a line of its own ("Coherence: 4", "**Coherence score**: 4/5",
  "2. Coherence (1-5): 4") and at least one other metric beside it: the metric's line is the verdict
  (its last one), whatever comes after it ("Overall: 3" is another metric's score, not this one's);
* the reply rates two or more other metrics and not this one: their lines, an overall or final line
  among them, are no verdict for this metric; whatever else the reply says is read as usual;
* otherwise (one metric, or none named) the reply is read exactly as without a metric.

A metric line is a name of one to three words at the start of a line (or after ",", ";" or "|"), a
separator, and a value; the name "Score", "Rating" or "Grade" alone names no metric. A name that ends
with the metric's name is the metric's ("In terms of coherence: 4", "Overall coherence: 4").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from pipeline.judges.scores.candidates import Candidate, candidate
from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.prose_lexicon import VALUE_B

METRIC_LINE: Final = lazy_compile(
    r"(?:^|(?<=[,;|]))[ \t>*#_-]{0,8}(?:[0-9]{1,2}[.)][ \t]{0,3})?[*_]{0,2}"
    r"(?P<name>[a-z][a-z-]{0,24}(?:[ \t][a-z][a-z-]{0,24}){0,3})"
    r"[*_]{0,2}[ \t]{0,3}(?:\([^()\n]{0,40}\)[ \t]{0,3})?[*_]{0,2}(?:[:=]|[ \t][-–—])[ \t*_]{0,6}"
    rf"{VALUE_B}",
    re.IGNORECASE | re.MULTILINE,
)
_SUFFIX: Final = lazy_compile(r"[ \t]+(?:score|rating|grade|mark)$")
# Names that score the whole reply, not one metric: other metrics' lines only in a multi-metric reply.
AGGREGATE: Final = frozenset({"overall", "final", "total", "average", "overall quality"})
GENERIC: Final = frozenset({"score", "rating", "grade", "mark", "verdict"})


def _name(raw: str) -> str:
    return _SUFFIX.sub("", " ".join(raw.lower().split()))


@dataclass(frozen=True, slots=True)
class MetricLines:
    """What a multi-metric reply holds for one metric: its verdict, or the spans that are not one."""

    verdict: Candidate | None
    excluded: tuple[tuple[int, int], ...]

    def keeps(self, found: Candidate) -> bool:
        return not any(start <= found.position < end for start, end in self.excluded)


NO_METRIC_LINES: Final = MetricLines(None, ())


def metric_lines(text: str, metric: str | None) -> MetricLines:
    """The metric's verdict in a multi-metric reply, or the other metrics' spans to leave out."""
    if not metric or not metric.strip():
        return NO_METRIC_LINES
    wanted = " ".join(metric.replace("_", " ").lower().split())
    ours: list[Candidate] = []
    others: list[tuple[str, Candidate]] = []
    for match in METRIC_LINE.finditer(text):
        name = _name(match.group("name"))
        found = candidate("labelled", match, text)
        if found is None or name in GENERIC:
            continue
        if name == wanted or name.endswith(" " + wanted):
            ours.append(found)
        else:
            others.append((name, found))
    named = {name for name, _ in others if name not in AGGREGATE}
    if ours and named:
        return MetricLines(ours[-1], ())
    if not ours and len(named) >= 2:
        return MetricLines(None, _spans(found for _, found in others))
    return NO_METRIC_LINES


def _spans(found: Iterable[Candidate]) -> tuple[tuple[int, int], ...]:
    return tuple((one.end - len(one.matched), one.end) for one in found)
