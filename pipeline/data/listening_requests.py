"""The listening requests file (YAML): a default evaluation framework, and the requests themselves.

    framework:                    # the default: criteria with weights, and diversity targets
      criteria:
        relevance: {description: ..., weight: 0.6}                       # scored by the judge
        novelty:   {description: ..., weight: 0.2, source: attribute,
                    attribute: track_popularity, invert: true}           # 1 - popularity / 100
      diversity_targets: {genre: 2, era: 2}                              # distinct values among the k picks
    requests:
      - id: deep-focus
        text: music to concentrate on, instrumental, not mainstream
        retrieve: {features: {instrumentalness: [0.3, 1]}, prefer: {energy: 0.4}}
        weights: {relevance: 0.5, novelty: 0.5}     # optional: this request's own weights
        diversity_targets: {genre: 2}               # optional: this request's own targets

A criterion is either judged (`source: judge`, the default: the LLM scores each candidate against
the request) or derived from a numeric column (`source: attribute`): score = value / scale, or
1 - value / scale with `invert: true`, where the scale is 100 for track_popularity and 1 for the 0-1
audio features (pipeline.data.catalog.ATTRIBUTE_SCALES). Weights are the criteria's shares of the
weighted score, so they must sum to 1; a criterion a request weights 0 is not scored for it.

A bad file raises InputError naming the line of the offending entry (the YAML nodes keep their
positions) and what to change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.data.catalog import ATTRIBUTE_SCALES, DIVERSITY_DIMENSIONS, FLOAT_RANGES, UNIT_COLUMNS
from pipeline.data.input_files import read_text
from pipeline.errors import InputError
from pipeline.llm.bounds import check_yaml
from pipeline.llm.params_errors import duplicate_keys
from pipeline.llm.project_files import inside_project, quoted, validation_problem, yaml_problem

WEIGHT_SUM_TOLERANCE = 1e-9
_FIX = "correct it; the comment at the top of data/selection/requests.yaml describes every field"


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Criterion(_Entry):
    description: str = Field(min_length=1)
    weight: float = Field(ge=0.0, le=1.0)
    source: Literal["judge", "attribute"] = "judge"
    attribute: str | None = None
    invert: bool = False

    @model_validator(mode="after")
    def _attribute_matches_source(self) -> Criterion:
        if self.source == "attribute" and self.attribute not in ATTRIBUTE_SCALES:
            raise ValueError(f"an attribute criterion needs `attribute:` one of {sorted(ATTRIBUTE_SCALES)}")
        if self.source == "judge" and (self.attribute is not None or self.invert):
            raise ValueError("`attribute` and `invert` apply only to `source: attribute`")
        return self

    def from_attribute(self, value: float) -> float:
        """The 0-1 score of an attribute criterion for the attribute's value."""
        assert self.attribute is not None
        share = value / ATTRIBUTE_SCALES[self.attribute]
        return 1.0 - share if self.invert else share


def _check_weights(weights: dict[str, float]) -> dict[str, float]:
    total = math.fsum(weights.values())
    if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE or any(w < 0 for w in weights.values()):
        raise ValueError(f"the weights sum to {total:g}; make them non-negative and sum to 1")
    return weights


def _check_targets(targets: dict[str, int]) -> dict[str, int]:
    for dimension, count in targets.items():
        if dimension not in DIVERSITY_DIMENSIONS:
            raise ValueError(
                f"unknown diversity dimension {dimension!r}; known: {list(DIVERSITY_DIMENSIONS)}"
            )
        if count < 1:
            raise ValueError(f"diversity target {dimension}: {count} must be at least 1")
    return targets


class Framework(_Entry):
    criteria: dict[str, Criterion] = Field(min_length=1)
    diversity_targets: dict[str, int] = Field(default_factory=dict)

    _targets = field_validator("diversity_targets")(_check_targets)

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> Framework:
        _check_weights({name: c.weight for name, c in self.criteria.items()})
        return self

    @property
    def weights(self) -> dict[str, float]:
        return {name: criterion.weight for name, criterion in self.criteria.items()}


class RetrievalSpec(_Entry):
    """What the advocates may propose (pipeline.experiments.selection.retrieve says how)."""

    tags: tuple[str, ...] = ()  # a track qualifies when any of these is among its genre/subgenre tags
    years: tuple[int, int] | None = None  # release_year, inclusive
    popularity: tuple[int, int] | None = None  # track_popularity, inclusive
    features: dict[str, tuple[float, float]] = Field(default_factory=dict)  # inclusive ranges
    prefer: dict[str, float] = Field(default_factory=dict)  # the mood the genre-mood advocate ranks by

    @model_validator(mode="after")
    def _known_features(self) -> RetrievalSpec:
        for name in self.features:
            if name not in FLOAT_RANGES:
                raise ValueError(f"unknown audio feature {name!r}; known: {sorted(FLOAT_RANGES)}")
        for name in self.prefer:
            if name not in UNIT_COLUMNS:
                raise ValueError(f"`prefer` takes 0-1 audio features; {name!r} is not one of {UNIT_COLUMNS}")
        return self


class ListeningRequest(_Entry):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    text: str = Field(min_length=1)
    retrieve: RetrievalSpec = Field(default_factory=RetrievalSpec)
    weights: dict[str, float] | None = None
    diversity_targets: dict[str, int] | None = None

    @field_validator("weights")
    @classmethod
    def _weights_sum_to_one(cls, weights: dict[str, float] | None) -> dict[str, float] | None:
        return weights if weights is None else _check_weights(weights)

    @field_validator("diversity_targets")
    @classmethod
    def _known_targets(cls, targets: dict[str, int] | None) -> dict[str, int] | None:
        return targets if targets is None else _check_targets(targets)


class RequestsFile(_Entry):
    framework: Framework
    requests: list[ListeningRequest] = Field(min_length=1)


def framework_for(request: ListeningRequest, default: Framework) -> Framework:
    """The framework a request is judged under: its own weights and targets where it gives them.

    Only criteria with a positive weight are kept, so a criterion weighted 0 costs no judge call.
    """
    weights = request.weights if request.weights is not None else default.weights
    unknown = sorted(set(weights) - set(default.criteria))
    if unknown:
        raise ValueError(f"weights name criteria the framework lacks: {', '.join(unknown)}")
    criteria = {
        name: criterion.model_copy(update={"weight": weights[name]})
        for name, criterion in default.criteria.items()
        if weights.get(name, 0.0) > 0.0
    }
    targets = (
        request.diversity_targets if request.diversity_targets is not None else default.diversity_targets
    )
    return Framework(criteria=criteria, diversity_targets=targets)


def load_requests(path: Path, shown: str | None = None) -> RequestsFile:
    """The requests file, validated; every request's framework is resolved once to catch bad weights."""
    shown = shown or str(path)
    if not path.is_file():
        raise InputError(shown, None, "no such file", "point selection.requests at a requests YAML file")
    text = read_text(path, shown)
    if not text.strip():
        raise InputError(shown, 1, "the file is empty", "restore it, or point selection.requests elsewhere")
    try:
        check_yaml(text)  # bounded before composing: an alias bomb or deep nesting (pipeline.llm.bounds)
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        said = getattr(exc, "problem", exc) if inside_project(shown) else yaml_problem(shown, exc)
        raise InputError(shown, line, f"not valid YAML ({said})", "fix the syntax") from None
    for line, key, first in duplicate_keys(root)[:1]:
        problem = f"'{key}' is given twice in one mapping (first on line {first}); YAML would keep the last"
        raise InputError(shown, line, problem, "keep one of them")
    try:
        parsed = RequestsFile.model_validate(data if data is not None else {})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        line = _line_of(root, error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        raise InputError(shown, line, f"{where}: {message}", _FIX) from None
    seen: dict[str, int] = {}
    for index, request in enumerate(parsed.requests):
        line = _line_of(root, ("requests", index))
        if request.id in seen:
            named = quoted(shown, repr(request.id))
            problem = f"request id {named} is already used by request {seen[request.id] + 1}"
            raise InputError(shown, line, problem, "give every request its own id")
        seen[request.id] = index
        try:
            framework_for(request, parsed.framework)
        except (ValueError, ValidationError) as exc:
            weights_line = _line_of(root, ("requests", index, "weights"))
            said = (
                validation_problem(shown, exc)
                if isinstance(exc, ValidationError)
                else quoted(shown, str(exc))
            )
            problem = f"request {quoted(shown, repr(request.id))}: {said}"
            raise InputError(shown, weights_line, problem, _FIX) from None
    return parsed


def _line_of(node: yaml.Node | None, loc: Sequence[Any]) -> int | None:
    """The 1-based line of the deepest YAML node along a pydantic error location."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next((value for key, value in node.value if key.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line
