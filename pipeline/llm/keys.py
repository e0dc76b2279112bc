"""The cache key: what it hashes, and nothing else.

    key = "jl2:" + xxh3_128( canonical_json({
        "recipe":   KEY_RECIPE,            # bumped whenever this list changes
        "backend":  identity.backend,      # ollama | openai | embedded | fake
        "model":    identity.digest,       # the exact weights, never the tag
        "messages": [{"role", "content_xxh3"}, ...],   # xxh3_128 of each message's UTF-16-LE text
        "options":  every Options field, defaults spelled out, -0.0 written 0.0,
        "format":   null | "json" | the JSON Schema,
        "logprobs": k,                     # only when the request asks for log-probabilities
    }))            # xxh3_128 as 32 lowercase hex digits

A field added to the request later enters the key only when set (as `logprobs` does), so every
request made before it existed keeps its key and the recipe stays the same.

Deliberately left out, because they cannot change the reply: the server URL, the model's tag
(two tags may share a digest), timeouts, parallelism, timestamps, the call's context (stage,
item, iteration: the same prompt asked from two places is the same call).

Canonical JSON (pipeline.llm.canonical): keys sorted, no insignificant whitespace, UTF-8 kept as
is, numbers as pydantic typed them (so 0 and 0.0 for a float option are one spelling). A message's
text enters as a hash of its own, so a 20 kB prompt is never JSON-escaped.

Why XXH3-128 of UTF-16-LE, not sha256 of UTF-8 (recipe 1): a cache hit hashes every prompt in
full, and for a 20 kB judge prompt that was most of a hit's cost. CPython turns text holding any
character past U+00FF (the judge prompts' en dash, a transcript's curly quote) into UTF-8 at about
1.8 GB/s but into UTF-16-LE about twice as fast, and XXH3 hashes at tens of GB/s where sha256 does
under 2. XXH3-128 is not a cryptographic hash: two different requests share a key with odds of
about n^2 / 2^129 by accident, but someone who wanted to could craft a pair. Integrity is not the
key's job: every record also carries a sha256 checksum over its whole content, request included,
and `judgeloop cache verify` checks it (see pipeline.llm.records).

Changing anything above means bumping KEY_RECIPE, which makes every old key miss rather than
collide. Each older recipe stays in RECIPES, so a record written under it still verifies, and is
re-keyed to the current recipe when read (CallRecord.current): old recordings keep replaying.

`key_material` is the recipe as data; `request_key` writes the same canonical JSON directly,
because a cache hit pays for it on every call (tests/test_keys.py checks that both agree).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from xxhash import xxh3_128_hexdigest

from pipeline.llm.canonical import canonical_json as canonical_json  # re-exported: every caller's name for it
from pipeline.llm.types import ChatRequest, Message, ModelIdentity, Options

KEY_RECIPE = 2
KEY_PREFIX = f"jl{KEY_RECIPE}:"


def content_digest(text: str) -> str:
    return xxh3_128_hexdigest(text.encode("utf-16-le"))


def key_material(identity: ModelIdentity, request: ChatRequest) -> dict[str, Any]:
    return {
        "recipe": KEY_RECIPE,
        "backend": identity.backend,
        "model": identity.digest,
        "messages": [{"role": m.role, "content_xxh3": content_digest(m.content)} for m in request.messages],
        "options": options_data(request.options),
        "format": request.format,
    } | ({} if request.logprobs is None else {"logprobs": request.logprobs})


def options_data(options: Options) -> dict[str, Any]:
    # -0.0 is 0.0 to every server (and equal to it in Python, which _options_json's lookup relies on).
    return {k: v + 0.0 if isinstance(v, float) else v for k, v in options.model_dump(mode="json").items()}


def request_key(identity: ModelIdentity, request: ChatRequest) -> str:
    backend, model = _identity_json(identity)
    fmt = "null" if request.format is None else canonical_json(request.format)
    if request.logprobs is not None:
        fmt += f',"logprobs":{request.logprobs}'  # the key that sorts between format and messages
    material = (
        f'{{"backend":{backend},"format":{fmt},"messages":[{",".join(map(_message_json, request.messages))}],'
        f'"model":{model},"options":{_options_json(request.options)},"recipe":{KEY_RECIPE}}}'
    )
    return KEY_PREFIX + xxh3_128_hexdigest(material.encode("utf-8"))


_ROLES = {role: canonical_json(role) for role in ("system", "user", "assistant")}


def _message_json(message: Message) -> str:
    return f'{{"content_xxh3":"{content_digest(message.content)}","role":{_ROLES[message.role]}}}'


@lru_cache(maxsize=64)
def _identity_json(identity: ModelIdentity) -> tuple[str, str]:
    return canonical_json(identity.backend), canonical_json(identity.digest)


_OPTIONS_JSON: dict[tuple[Any, ...], str] = {}


def _options_json(options: Options) -> str:
    # A stage sends a few distinct Options thousands of times: dump each once. Looked up by the
    # field values (pydantic has typed each field, so equal tuples dump alike), because comparing
    # two Options models costs a microsecond.
    values = tuple(options.__dict__.values())
    text = _OPTIONS_JSON.get(values)
    if text is None:
        if len(_OPTIONS_JSON) >= 256:
            _OPTIONS_JSON.clear()
        text = _OPTIONS_JSON[values] = canonical_json(options_data(options))
    return text


def recipe1_key(identity: ModelIdentity, request: ChatRequest) -> str:
    """Recipe 1 (judgeloop 0.1.0): sha256 throughout, each message's text as sha256 of its UTF-8."""
    material = {
        "recipe": 1,
        "backend": identity.backend,
        "model": identity.digest,
        "messages": [
            {"role": m.role, "content_sha256": hashlib.sha256(m.content.encode("utf-8")).hexdigest()}
            for m in request.messages
        ],
        "options": request.options.model_dump(mode="json"),
        "format": request.format,
    }
    return "jl1:" + hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()


# Every recipe this judgeloop can check a record against, by number.
RECIPES: dict[int, Callable[[ModelIdentity, ChatRequest], str]] = {1: recipe1_key, KEY_RECIPE: request_key}
