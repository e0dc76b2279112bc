"""A criterion score with what it rests on: the judge calls behind it, or the catalog attribute.

Judged criteria are rated 1-5 by the LLM and mapped to 0-1 (pipeline.judges.likert.to_unit), so 1 -> 0.0,
3 -> 0.5, 5 -> 1.0 (exact in binary floating point). Attribute criteria are computed from the
track's own column (pipeline.data.listening_requests.Criterion.from_attribute). Either way the
record keeps the inputs, so an explanation can show where every number came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pipeline.data.catalog import Track
from pipeline.data.listening_requests import Criterion
from pipeline.judges.likert import LIKERT_MAX, LIKERT_MIN, to_unit


@dataclass(frozen=True)
class CriterionScore:
    criterion: str
    score: float  # 0-1
    source: Literal["judge", "attribute"]
    call_keys: tuple[str, ...] = ()  # judge: the cached calls the rating rests on, the one read last
    rating: int | float | None = None  # judge: the 1-5 rating read from the reply (samples' mean: a float)
    attribute: str | None = None  # attribute: the catalog column
    attribute_value: float | None = None  # attribute: its value for this track
    samples: tuple[int | None, ...] = ()  # selection.samples > 1: each sample's rating, the rating combined

    def record(self) -> dict[str, Any]:
        """As written to outputs (canonical JSON): only the fields its source sets."""
        out: dict[str, Any] = {"criterion": self.criterion, "score": self.score, "source": self.source}
        if self.source == "judge":
            out.update(rating=self.rating, call_keys=list(self.call_keys))
            if self.samples:  # absent with one sample: a run without samples writes what it wrote before
                out["samples"] = list(self.samples)
        else:
            out.update(attribute=self.attribute, attribute_value=self.attribute_value)
        return out

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CriterionScore:
        """The inverse of `record`, for a step that reads the scores back from outputs."""
        return cls(
            criterion=record["criterion"],
            score=record["score"],
            source=record["source"],
            call_keys=tuple(record.get("call_keys", ())),
            rating=record.get("rating"),
            attribute=record.get("attribute"),
            attribute_value=record.get("attribute_value"),
            samples=tuple(record.get("samples", ())),
        )


def judged_score(
    criterion: str, rating: int | float, call_keys: tuple[str, ...], samples: tuple[int | None, ...] = ()
) -> CriterionScore:
    """The 0-1 score of a 1-5 judge rating; `call_keys` must name the calls it was read from
    (with samples, every sample's, sample 0's first)."""
    if not LIKERT_MIN <= rating <= LIKERT_MAX:
        raise ValueError(f"a rating must lie in {LIKERT_MIN}-{LIKERT_MAX}, not {rating}")
    if not call_keys:
        raise ValueError(f"the {criterion} rating must name the call(s) it was read from")
    return CriterionScore(
        criterion, to_unit(rating), "judge", call_keys=call_keys, rating=rating, samples=samples
    )


def attribute_score(name: str, criterion: Criterion, track: Track) -> CriterionScore:
    """The score of an attribute criterion for a track, e.g. novelty = 1 - popularity / 100."""
    if criterion.source != "attribute" or criterion.attribute is None:
        raise ValueError(f"criterion {name} is not derived from an attribute")
    value = track.attribute(criterion.attribute)
    return CriterionScore(
        name,
        criterion.from_attribute(value),
        "attribute",
        attribute=criterion.attribute,
        attribute_value=value,
    )
