"""What the fake backends do in place of a model's decoder: constrained output and log-probabilities.

Shared by FakeBackend (in-process) and the fake Ollama and OpenAI-compatible servers
(pipeline.testing), so every fake honours a schema the same way.

Constrained output. A responder writes what the "model" wants to say; under a JSON Schema the fake
returns what a constrained decoder would let through:
- a reply that is already JSON valid for the schema is returned unchanged;
- otherwise the decoder follows the responder as far as the schema allows (its properties in the
  order a real backend sends them, pipeline.llm.schema_order): a JSON object's
  properties that are valid are kept, every other value is the schema's first allowed one
  (`const`, the first `enum` member, the first `anyOf` branch, `minimum` or 0 for numbers, false,
  `minItems` items), and a reply that is not JSON at all lands, as free text, in the first string
  field (the others are empty strings);
- under "json" (any object), a reply that is not a JSON object becomes {"text": reply}.
The result is always validated with jsonschema; a schema the fake cannot satisfy (a `pattern`) is
a ValueError naming it, never a silently invalid reply. num_predict is applied afterwards by each
fake, so a long reply is cut into truncated JSON with done_reason "length", as a real one is.

Log-probabilities. The reply is split into fake tokens (each digit alone, runs of letters, runs
of whitespace, any other character alone; back to back they spell the reply) and each gets a
deterministic log-probability derived from the request and its position: the chosen token is the
most likely (greedy), with p in [0.40, 0.98]; its alternatives share the rest, halving each time.
A digit's alternatives are the nearest other digits, so a score has a distribution to weigh.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import jsonschema

from pipeline.llm.schema_order import schema_as_keyed
from pipeline.llm.types import TokenLogprob, TopLogprob

_MISSING = object()
_FAKE_TOKEN = re.compile(r"\d|[A-Za-z]+|\s+|[^\sA-Za-z\d]")


def constrain(text: str, fmt: str | dict[str, Any] | None) -> str:
    """The reply a constrained decoder would give where the responder wrote `text` (see above)."""
    if fmt is None:
        return text
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = _MISSING
    if fmt == "json" or not isinstance(fmt, dict):
        return text if isinstance(parsed, dict) else json.dumps({"text": text}, ensure_ascii=False)
    fmt = schema_as_keyed(fmt)  # the properties in the order a real decoder is sent them
    validator = jsonschema.Draft202012Validator(fmt)
    if parsed is not _MISSING and validator.is_valid(parsed):
        return text
    builder = _Instance(fmt, text.strip() if parsed is _MISSING else "")
    instance = builder.build(fmt, parsed)
    problems = sorted(validator.iter_errors(instance), key=str)
    if problems:
        raise ValueError(f"the fake decoder cannot satisfy this schema: {problems[0].message}")
    return json.dumps(instance, ensure_ascii=False)


class _Instance:
    def __init__(self, root: dict[str, Any], free_text: str) -> None:
        self.root, self.free_text = root, free_text

    def build(self, schema: Any, wanted: Any) -> Any:
        if not isinstance(schema, dict):
            return None
        schema = self._resolve(schema)
        if wanted is not _MISSING and jsonschema.Draft202012Validator(schema).is_valid(wanted):
            return wanted
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][0]
        for combinator in ("anyOf", "oneOf", "allOf"):
            if schema.get(combinator):
                return self.build(schema[combinator][0], wanted)
        kind = schema.get("type", "object")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            given = wanted if isinstance(wanted, dict) else {}
            properties = schema.get("properties") or {}
            return {name: self.build(sub, given.get(name, _MISSING)) for name, sub in properties.items()}
        if kind == "array":
            return [self.build(schema.get("items", {}), _MISSING) for _ in range(schema.get("minItems", 0))]
        if kind == "string":
            text, self.free_text = self.free_text, ""
            return text[: schema.get("maxLength", len(text))].ljust(schema.get("minLength", 0), " ")
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer")
        if kind == "boolean":
            return False
        return None

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: Any = self.root
        for part in ref[2:].split("/"):
            target = target[part]
        return self._resolve(target)

    @staticmethod
    def _number(schema: dict[str, Any], *, integer: bool) -> int | float:
        if "minimum" in schema:
            low = schema["minimum"]
        elif "exclusiveMinimum" in schema:
            low = math.floor(schema["exclusiveMinimum"]) + 1 if integer else schema["exclusiveMinimum"] + 0.5
        else:
            low = 0
        if "maximum" in schema:
            low = min(low, schema["maximum"])
        return math.ceil(low) if integer else float(low)


def fake_tokens(text: str) -> list[str]:
    return _FAKE_TOKEN.findall(text)


def fake_logprobs(text: str, top: int, seed: str) -> tuple[TokenLogprob, ...]:
    """Deterministic log-probabilities for `text`, `top` alternatives per token (see above)."""
    tokens = []
    for index, token in enumerate(fake_tokens(text)):
        digest = hashlib.sha256(f"{seed}|{index}|{token}".encode()).digest()
        chosen = 0.40 + 0.58 * int.from_bytes(digest[:4], "big") / 2**32
        rest = 1.0 - chosen
        others = [
            (alt, math.log(rest * 0.5 ** (rank + 1))) for rank, alt in enumerate(_alternatives(token, top))
        ]
        alternatives = [TopLogprob(token=token, logprob=math.log(chosen))] if top else []
        alternatives += [TopLogprob(token=alt, logprob=lp) for alt, lp in others[: max(0, top - 1)]]
        tokens.append(TokenLogprob(token=token, logprob=math.log(chosen), top=tuple(alternatives)))
    return tuple(tokens)


def _alternatives(token: str, top: int) -> list[str]:
    if token.isdigit() and len(token) == 1:
        chosen = int(token)
        return [str(d) for d in sorted(range(10), key=lambda d: (abs(d - chosen), d)) if d != chosen]
    return [f"{token}~{rank}" for rank in range(1, top)]


def wire_logprobs(logprobs: tuple[TokenLogprob, ...]) -> list[dict[str, Any]]:
    """The OpenAI-shaped entries servers send (Ollama's `logprobs`, OpenAI's `logprobs.content`)."""
    return [
        {
            "token": t.token,
            "logprob": t.logprob,
            "bytes": list(t.token.encode()),
            "top_logprobs": [
                {"token": a.token, "logprob": a.logprob, "bytes": list(a.token.encode())} for a in t.top
            ],
        }
        for t in logprobs
    ]


def request_seed(messages: Any) -> str:
    """Same messages, same log-probabilities."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()[:16]
