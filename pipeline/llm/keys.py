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

`key_material` is the recipe as data; `request_key` writes the same canonical JSON directly,
because a cache hit pays for it on every call (tests/test_keys.py checks that both agree).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from pipeline.llm.types import ChatRequest, Message, ModelIdentity, Options

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
    backend, model = _identity_json(identity)
    fmt = "null" if request.format is None else canonical_json(request.format)
    material = (
        f'{{"backend":{backend},"format":{fmt},"messages":[{",".join(map(_message_json, request.messages))}],'
        f'"model":{model},"options":{_options_json(request.options)},"recipe":{KEY_RECIPE}}}'
    )
    return KEY_PREFIX + hashlib.sha256(material.encode("utf-8")).hexdigest()


_ROLES = {role: canonical_json(role) for role in ("system", "user", "assistant")}


def _message_json(message: Message) -> str:
    digest = hashlib.sha256(message.content.encode("utf-8")).hexdigest()
    return f'{{"content_sha256":"{digest}","role":{_ROLES[message.role]}}}'


@lru_cache(maxsize=64)
def _identity_json(identity: ModelIdentity) -> tuple[str, str]:
    return canonical_json(identity.backend), canonical_json(identity.digest)


@lru_cache(maxsize=256)
def _options_json(options: Options) -> str:
    # A stage sends a few distinct Options thousands of times: dump each once.
    return canonical_json(options.model_dump(mode="json"))
