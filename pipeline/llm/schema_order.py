"""A JSON Schema as its cache key sees it, in the order a constrained decoder must follow.

The key hashes a request's `format` as canonical JSON, which sorts every object's keys; a JSON
Schema's `properties` are then in alphabetical order, and the order the caller wrote them in is not
in the key. Yet every schema-constrained decoder writes a reply's properties in the schema's order:
llama.cpp's grammar (the embedded backend, and Ollama, whose server hands the schema to llama.cpp
with its order kept), and OpenAI's structured outputs. A schema sent as the caller's dict would
make a reply depend on something the key does not hold: two requests with one key, two replies.

So a backend sends `schema_as_keyed(format)`: the key's own canonical form, with each object's
`properties` put back in the order of its `required` list (the rest after them, sorted, as the key
holds them). That is a function of the key alone, and for every schema the pipeline asks
(pipeline.llm.structured.schema_for makes every property required and writes `required` in the
properties' order) it is the order the pipeline wrote: no recorded reply changes.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.llm.keys import canonical_json

__all__ = ["schema_as_keyed", "schema_in_field_order"]


def schema_in_field_order(schema: Any) -> Any:
    """The JSON Schema with each object's `properties` in the order of its `required` list (those
    it does not name after them, as they were), at every depth: the order `schema_for` wrote."""
    if isinstance(schema, list):
        return [schema_in_field_order(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: schema_in_field_order(value) for key, value in schema.items()}
    properties, required = out.get("properties"), out.get("required")
    if isinstance(properties, dict) and isinstance(required, list):
        named = [name for name in required if isinstance(name, str) and name in properties]
        out["properties"] = {name: properties[name] for name in dict.fromkeys([*named, *properties])}
    return out


def schema_as_keyed(schema: dict[str, Any]) -> dict[str, Any]:
    """What a backend sends for a JSON Schema `format`: determined by the request's key alone (the
    canonical JSON's sorted keys, each object's properties in the order of `required`)."""
    keyed: dict[str, Any] = schema_in_field_order(json.loads(canonical_json(schema)))
    return keyed
