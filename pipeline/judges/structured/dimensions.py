"""The dimensions a structured judge scores, and the reply model the backend must follow.

The model writes its reasoning first, then an integer 1-5 per dimension, then its confidence 1-5:
a small model reasons before it commits to numbers, and picks among five labelled integers far
more reliably than it writes a calibrated float. We map 1-5 to 0-1 ourselves, and the overall score
is our weighted mean, never a number the model wrote.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model, field_validator

from pipeline.judges.likert import LikertScore
from pipeline.llm.settings import Section
from pipeline.numbers import fsum

REASONING_FIELD = "reasoning"
CONFIDENCE_FIELD = "confidence"
_RESERVED = {REASONING_FIELD, CONFIDENCE_FIELD}


class Dimension(Section):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)
    weight: float = Field(1.0, ge=0.0)


class Dimensions(RootModel[tuple[Dimension, ...]]):
    """An ordered, named set of dimensions with weights (params.yaml: a list of {name, description,
    weight}); at least one weight must be positive."""

    @field_validator("root")
    @classmethod
    def _valid(cls, items: tuple[Dimension, ...]) -> tuple[Dimension, ...]:
        names = [d.name for d in items]
        if not items:
            raise ValueError("give at least one dimension")
        if len(set(names)) != len(names):
            raise ValueError(f"dimension names repeat: {names}")
        if _RESERVED & set(names):
            raise ValueError(f"{sorted(_RESERVED)} are reserved for the reply's own fields")
        if fsum(d.weight for d in items) <= 0:
            raise ValueError("at least one dimension needs a positive weight")
        return items

    @property
    def items(self) -> tuple[Dimension, ...]:
        return self.root

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.items)

    # fsum, not sum(): Python 3.12's sum() of floats rounds otherwise than 3.11's (pipeline.numbers).
    def weighted_mean(self, values: dict[str, float]) -> float:
        total = fsum(d.weight for d in self.items)
        return fsum(d.weight * values[d.name] for d in self.items) / total

    def simple_mean(self, values: dict[str, float]) -> float:
        return fsum(values[d.name] for d in self.items) / len(self.items)


class DimensionsReply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_models: dict[tuple[tuple[str, str], ...], type[DimensionsReply]] = {}


def reply_model(dimensions: Dimensions) -> type[DimensionsReply]:
    """The pydantic model of the reply: reasoning, one LikertScore per dimension (in params order, each
    described), confidence. The same dimensions give the same class, hence the same schema and the
    same cache keys."""
    key = tuple((d.name, d.description) for d in dimensions.items)
    if key not in _models:
        fields: dict[str, Any] = {
            REASONING_FIELD: (str, Field(description="Brief reasons for the scores, written first.")),
        }
        for dim in dimensions.items:
            fields[dim.name] = (LikertScore, Field(description=dim.description))
        fields[CONFIDENCE_FIELD] = (
            LikertScore,
            Field(description="How sure you are of these scores: 1 unsure, 5 certain."),
        )
        _models[key] = create_model("JudgeReply", __base__=DimensionsReply, **fields)
    return _models[key]


_scores: dict[tuple[str, ...], type[DimensionsReply]] = {}


def judge_score_model(dimensions: Dimensions) -> type[DimensionsReply]:
    """What we report (the seed's JudgeScore): overall_score, each dimension and the confidence on
    0-1, and the reasoning. Every number in it is ours: mapped from the model's 1-5, or weighted."""
    key = dimensions.names
    if key not in _scores:
        unit = (float, Field(ge=0.0, le=1.0))
        fields: dict[str, Any] = {"overall_score": unit}
        fields.update({name: unit for name in dimensions.names})
        fields[REASONING_FIELD] = (str, ...)
        fields[CONFIDENCE_FIELD] = unit
        _scores[key] = create_model("JudgeScore", __base__=DimensionsReply, **fields)
    return _scores[key]
