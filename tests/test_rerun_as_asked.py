"""A recorded request is asked again as the pipeline asked it (pipeline.llm.rerun.as_asked): its
JSON Schema's properties in the order the reply model lists its fields, which llama.cpp's grammar
makes the reply follow, although the recording's canonical JSON holds them sorted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline.experiments.selection.judging import PairwiseReply, RatingReply
from pipeline.experiments.summeval.results import SummEvalReply
from pipeline.judges.quality.results import EvaluationReply
from pipeline.judges.rubric.assessor import sections_model
from pipeline.judges.rubric.judge import rubric_reply_model
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import stage_folders, stage_reader
from pipeline.llm.rerun import as_asked, schema_in_field_order
from pipeline.llm.structured import schema_for
from pipeline.llm.types import ChatRequest, Message, Options
from tests.conftest import ROOT

REPLY_MODELS: list[type[BaseModel]] = [
    sections_model(150),  # the paper's assessment: `assessment` first, `PHQ8_symptoms` second
    rubric_reply_model(200),
    EvaluationReply,
    SummEvalReply,
    RatingReply,
    PairwiseReply,
]


def _as_recorded(schema: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(canonical_json(schema))
    return loaded


def _property_orders(schema: Any, where: str = "") -> dict[str, list[str]]:
    """Each object's property names, in their order, by where the object is; what a grammar follows
    (the order of other keywords does not change the grammar)."""
    out: dict[str, list[str]] = {}
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            out |= _property_orders(item, f"{where}/{i}")
    elif isinstance(schema, dict):
        if isinstance(schema.get("properties"), dict):
            out[where] = list(schema["properties"])
        for key, value in schema.items():
            out |= _property_orders(value, f"{where}/{key}")
    return out


@pytest.mark.parametrize("model", REPLY_MODELS, ids=lambda model: model.__name__)
def test_the_recorded_schema_comes_back_in_the_order_the_pipeline_sent_it(model: type[BaseModel]) -> None:
    sent = schema_for(model)
    asked = schema_in_field_order(_as_recorded(sent))
    assert canonical_json(asked) == canonical_json(sent)
    assert _property_orders(asked) == _property_orders(sent)


def test_the_papers_assessment_schema_is_not_in_sorted_order_as_recorded() -> None:
    # What made the difference: sorted, PHQ8_symptoms came first and the grammar wrote it first.
    sent = schema_for(sections_model(150))
    assert next(iter(sent["properties"])) == "assessment"
    assert next(iter(_as_recorded(sent)["properties"])) == "PHQ8_symptoms"


def test_as_asked_keeps_the_key_and_leaves_other_requests_alone() -> None:
    schema = _as_recorded(schema_for(sections_model(150)))
    request = ChatRequest(messages=(Message(role="user", content="x"),), options=Options(), format=schema)
    asked = as_asked(request)
    assert canonical_json(asked.format) == canonical_json(request.format)
    assert list(asked.format["properties"]) == schema["required"]  # type: ignore[index]
    plain = request.model_copy(update={"format": "json"})
    assert as_asked(plain) is plain


def test_unnamed_properties_follow_the_required_ones_and_nothing_is_lost() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {"properties": {"y": {}, "x": {}}, "required": ["x"]}},
        "required": ["c", "zz"],
    }
    ordered = schema_in_field_order(schema)
    assert list(ordered["properties"]) == ["c", "a", "b"]
    assert list(ordered["properties"]["c"]["properties"]) == ["x", "y"]


def test_every_recorded_structured_reply_lists_its_fields_in_the_asked_order() -> None:
    """What the pipeline asked, seen in what the grammar made the model write: across every design."""
    checked = 0
    for directory in stage_folders.stage_dirs(ROOT / "recordings"):
        for loaded in stage_reader.read_stage(directory):
            record = loaded.call.record
            if not isinstance(record.request.format, dict) or record.model.backend != "embedded":
                continue
            try:
                written = json.loads(record.reply.text)
            except ValueError:
                continue  # cut short, or otherwise not JSON: no order to read
            fields = as_asked(record.request).format["properties"]  # type: ignore[index]
            if isinstance(written, dict) and set(written) == set(fields):
                assert list(written) == list(fields), f"{directory.name} {record.key}"
                checked += 1
    assert checked > 100
