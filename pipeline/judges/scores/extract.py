"""The extractor itself: explicit verdicts, then prose verdicts, then a bare number, in that order."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Final

from pipeline.judges.scores.candidates import NUM, Candidate, judge, last
from pipeline.judges.scores.decimals import DecimalPolicy, apply_decimal_policy, check_policy
from pipeline.judges.scores.explicit import explicit_candidates, label_patterns
from pipeline.judges.scores.lazy import lazy_compile
from pipeline.judges.scores.metric_lines import metric_lines
from pipeline.judges.scores.phrases import prose_candidates
from pipeline.judges.scores.reading import DEFAULT_SCALE, Scale, ScoreReading
from pipeline.judges.unicode_age import all_as_unicode_14

_BARE: Final = lazy_compile(
    rf"\s*(?:[-*•>#]+[ \t]+)?[*_`\"']*(?P<core>(?:\[\[?|\()?(?P<num>{NUM})(?:\]\]?|\))?"
    rf"(?:[ \t]*(?:/|\bout[ \t]+of\b)[ \t]*(?P<den>{NUM}))?)[*_`\"']*"
    # a one-word gloss, as in "1 (dull)" or "0 (no)"
    r"(?:[ \t]*\([^()\n0-9]{1,30}\))?(?:\.[*_`\"']*)?\s*",
    re.IGNORECASE,
)


def read_verdict(
    text: str, scale: Scale = DEFAULT_SCALE, *, labels: Iterable[str] = (), metric: str | None = None
) -> ScoreReading:
    """What the reply says, before any decimal policy: "Score: 3.5/5" on a 1-5 integer scale is
    ``non_integer`` with ``stated=3.5``. See the package docstring for what is read and in which order;
    ``metric`` reads a multi-metric reply for that metric only (pipeline.judges.scores.metric_lines).
    Read as Unicode 14.0 reads it, on every Python (pipeline.judges.unicode_age)."""
    # The labels and the metric with the reply's stand-ins, so that one holding such a character is
    # found as 3.11 finds it.
    (readable, wanted, *looked_for), back = all_as_unicode_14((text, metric or "", *labels))
    reading = _read_verdict(readable, scale, looked_for, wanted if metric is not None else None)
    if back and reading.matched is not None:
        return dataclasses.replace(reading, matched=reading.matched.translate(back))
    return reading


def _read_verdict(text: str, scale: Scale, labels: Iterable[str], metric: str | None) -> ScoreReading:
    if not text.strip():
        return ScoreReading(None, "empty", None)
    lines = metric_lines(text, metric)
    if lines.verdict is not None:
        return judge(lines.verdict, scale)
    patterns = label_patterns(tuple(labels))
    explicit = last(found for found in explicit_candidates(text, patterns) if found and lines.keeps(found))
    if explicit is not None:
        return judge(explicit, scale)
    prose = last(found for found in prose_candidates(text) if not found.spans(scale) and lines.keeps(found))
    if prose is not None:
        return judge(prose, scale)
    bare = _BARE.fullmatch(text)
    if bare is not None:
        whole = Candidate(
            "bare_number", 0, 0, bare.group("num"), bare.group("den"), bare.group("core"), ambiguous=False
        )
        return judge(whole, scale)
    template = patterns.template.search(text)
    if template is not None:
        return ScoreReading(None, "template_echo", template.group(0))
    return ScoreReading(None, "no_score", None)


def extract_score(
    text: str,
    scale: Scale = DEFAULT_SCALE,
    *,
    labels: Iterable[str] = (),
    decimals: DecimalPolicy = "unscored",
    metric: str | None = None,
) -> ScoreReading:
    """Read the judge's verdict from ``text`` and apply the decimal policy to it.

    ``labels`` adds label words to score/rating/grade, for prompts that ask e.g. "Coherence: N".
    ``metric`` is the metric the call asked for: a reply that rates several metrics, one line each, is
    read for that one only ("Coherence: 4/5\nFluency: 3/5" read for coherence is 4).
    ``decimals`` says what a decimal on an integer scale becomes ("Score: 3.5/5"): by default no score
    (``non_integer``); "round" reads the nearest integer (``decimal_rounded``), "keep" the value as
    written (``decimal_kept``). ``stated`` holds the value as written in every case.
    """
    check_policy(decimals)
    return apply_decimal_policy(read_verdict(text, scale, labels=labels, metric=metric), decimals)
