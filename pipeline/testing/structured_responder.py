"""A deterministic model for schema-constrained requests: a reply that follows the request's JSON
schema, its values drawn from a digest of the conversation (same request, same reply), as a
grammar-constrained model would give. For tests and benchmarks of structured judges, in-process
(FakeBackend) or over HTTP (FakeOllama)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pipeline.llm.types import ChatRequest


def reply_for_schema(schema: dict[str, Any], seed_text: str) -> str:
    digest = hashlib.sha256(seed_text.encode()).digest()
    reply: dict[str, Any] = {}
    for index, (name, prop) in enumerate(schema.get("properties", {}).items()):
        if "enum" in prop:
            options = prop["enum"]
            reply[name] = options[digest[index % len(digest)] % len(options)]
        elif prop.get("type") == "integer":
            reply[name] = digest[index % len(digest)]
        else:
            reply[name] = f"{name} {digest.hex()[:8]}"
    return json.dumps(reply)


def _seed(messages: Sequence[Any]) -> str:
    return json.dumps([m if isinstance(m, dict) else m.model_dump() for m in messages], sort_keys=True)


def structured_responder(request: ChatRequest) -> str:
    """For FakeBackend: a schema-following reply; a request with no schema gets plain text."""
    if not isinstance(request.format, dict):
        return "no schema was asked for"
    return reply_for_schema(request.format, _seed(request.messages))


def structured_ollama_responder(request: dict[str, Any]) -> str:
    """For FakeOllama: the same, from the request as the server sees it."""
    schema = request.get("format")
    if not isinstance(schema, dict):
        return "no schema was asked for"
    return reply_for_schema(schema, _seed(request.get("messages", [])))
