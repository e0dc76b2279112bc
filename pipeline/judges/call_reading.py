"""What a stage read from one recorded call's reply: the one shape in which every design says it
(Design.reads), so that `judgeloop audit` and a report show each judge call's reading without
knowing which design made it.

    CallReading(score, reason, ...)   one call's reading: the value the stage took from the reply
                                      (a score, a 0-1 value, the id of the candidate preferred), or
                                      None; how it was read ("labelled", "json", ...) or why not
                                      ("no_score", "invalid", "truncated", "too_long", ...).
    of_score(ScoreReading)            a free reply's reading, as the extractor made it.
    of_judgement(Judgement, ...)      a schema-constrained reply's reading, from the Judgement the
                                      stage's own code made of that one call (pipeline.llm.structured
                                      .read_attempt), with the fields its reply was read for and
                                      G-Eval's weighted score of each score field where it has one.

A call that is no judge call (an assessment, a generation) has no reading: its design's reader
returns None for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.judges.judgement import Judgement
from pipeline.llm.records import CallRecord
from pipeline.llm.types import CallContext

if TYPE_CHECKING:  # named only: a design that reads no free reply does not load the extractor
    from pipeline.judges.scores import ScoreReading

Value = int | float | str


@dataclass(frozen=True)
class CallReading:
    """One call's reply as its stage read it. ``score`` is None when nothing was read (``reason``
    says why, ``error`` what was wrong where known) or, for a reply read for several fields and no
    single number, when the stage derives none from them."""

    score: Value | None
    reason: str
    matched: str | None = None  # a free reply: the span the extractor read
    stated: int | float | None = None  # a free reply: the number its verdict states, kept or not
    # A structured reply: each field the stage read, as the model wrote it, in the schema's order.
    fields: Mapping[str, Value] = field(default_factory=dict)
    # A structured reply with log-probabilities: G-Eval's weighted score of each score field, as the
    # stage wrote it to its results.
    weighted: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """As `judgeloop audit --format jsonl` writes it: a free reply's four keys as before, the
        others only where set."""
        out: dict[str, Any] = {
            "score": self.score,
            "reason": self.reason,
            "matched": self.matched,
            "stated": self.stated,
        }
        if self.fields:
            out["fields"] = dict(self.fields)
        if self.weighted:
            out["weighted"] = dict(self.weighted)
        if self.error is not None:
            out["error"] = self.error
        return out


# (a recorded call's context, its record) -> the reading its stage made, or None for no judge call.
CallReader = Callable[[CallContext, CallRecord], CallReading | None]


def of_score(reading: ScoreReading) -> CallReading:
    return CallReading(reading.score, reading.reason, reading.matched, reading.stated)


def of_judgement(
    judgement: Judgement[Any],
    score: Value | None,
    fields: Mapping[str, Value] | None = None,
    weighted: Mapping[str, float] | None = None,
) -> CallReading:
    """A one-call Judgement's reading: validated, `score` (what the stage took for the value) with
    `fields` and `weighted`; not validated, no score with the failure's kind and error."""
    if judgement.value is None:
        return CallReading(None, judgement.reading, error=judgement.error)
    return CallReading(score, judgement.reading, fields=dict(fields or {}), weighted=dict(weighted or {}))
