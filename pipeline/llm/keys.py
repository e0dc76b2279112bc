"""The cache key: what it hashes, and nothing else.

    key = "jl1:" + sha256( canonical_json({
        "recipe":   KEY_RECIPE,            # bumped whenever this list changes
        "backend":  identity.backend,      # ollama | openai | embedded | fake
        "model":    identity.digest,       # the exact weights, never the tag
        "messages": [{"role", "content_sha256"}, ...],   # sha256 of each message's UTF-8 text
        "options":  every Options field, defaults spelled out,
        "format":   null | "json" | the JSON Schema,
    }))

Deliberately left out, because they cannot change the reply: the server URL, the model's tag
(two tags may share a digest), timeouts, parallelism, timestamps, the call's context (stage,
item, iteration: the same prompt asked from two places is the same call).

Canonical JSON: keys sorted, no insignificant whitespace, UTF-8 kept as is, numbers as pydantic
typed them (so 0 and 0.0 for a float option are one spelling). A message's text enters as the
sha256 of its UTF-8 bytes: the key is exactly as sensitive, and hashing a 20 kB prompt directly
costs a fifth of JSON-escaping it first (a cache hit pays this on every call). Changing anything
above means bumping KEY_RECIPE, which makes every old key miss rather than collide.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pipeline.llm.types import ChatRequest, ModelIdentity

KEY_RECIPE = 1
KEY_PREFIX = f"jl{KEY_RECIPE}:"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def key_material(identity: ModelIdentity, request: ChatRequest) -> dict[str, Any]:
    return {
        "recipe": KEY_RECIPE,
        "backend": identity.backend,
        "model": identity.digest,
        "messages": [
            {"role": m.role, "content_sha256": hashlib.sha256(m.content.encode("utf-8")).hexdigest()}
            for m in request.messages
        ],
        "options": request.options.model_dump(mode="json"),
        "format": request.format,
    }


def request_key(identity: ModelIdentity, request: ChatRequest) -> str:
    material = canonical_json(key_material(identity, request)).encode("utf-8")
    return KEY_PREFIX + hashlib.sha256(material).hexdigest()
