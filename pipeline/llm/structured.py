"""Structured replies: ask for a pydantic model under schema-constrained decoding, get it validated.

    result = ask_structured(session, messages, Verdict, options, context)
    if isinstance(result, Structured):
        result.value.score           # a validated Verdict
    else:
        result.kind, result.text     # a typed failure with the reply's text, never a default

The request carries `schema_for(Verdict)` as its `format`, which every backend enforces (Ollama
`format`, OpenAI-compatible `response_format: json_schema`, llama.cpp's grammar, the fakes) and the
cache key includes. A reply is checked before it is parsed, against the known failures of
constrained decoding: one cut by num_predict (done_reason "length") is "truncated"; one that loops
on whitespace (a grammar allows whitespace between tokens, and a small model can emit newlines
until num_predict) is "runaway_whitespace". Neither is parsed. A reply that is not valid for the
model is "invalid". Each failed attempt is re-asked (up to `max_attempts` calls in all) in the
same conversation: the reply, then a user message naming the problem; the re-ask is the call
context with `attempt` = n. A prompt refused as too long for the context window (the session's
`prompt_too_long` reply) is "too_long" and is not re-asked: the re-ask would be longer still.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, Options

T = TypeVar("T", bound=BaseModel)
FailureKind = Literal["invalid", "truncated", "runaway_whitespace", "too_long"]

# Pretty-printed JSON indents by a few dozen characters at most; a longer run of whitespace is the
# decoder looping (llama.cpp's own JSON grammar caps a run at 20 for the same reason).
RUNAWAY_WHITESPACE = 32
_RUNAWAY = re.compile(rf"\s{{{RUNAWAY_WHITESPACE},}}")
_SCHEMA_WORDS = ("title", "default")  # neither constrains a reply; a class's title is its name


class ChatSession(Protocol):
    """What ask_structured needs of a session (pipeline.llm.session.LLMSession is one)."""

    def chat(self, request: ChatRequest, context: CallContext) -> RecordedCall: ...


def schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema a backend enforces for `model`: pydantic's validation schema, strict in the
    way OpenAI's `strict: true` asks (every property required, no others allowed), without titles
    and defaults. The same class gives the same schema, so the same cache key.

    Properties keep the class's field order: a grammar writes them in that order (reasoning before
    the score, if the class says so). The cache key's canonical JSON sorts object keys, so it sees
    that order through `required`, a list written in the same order.
    """
    schema: dict[str, Any] = json.loads(_schema_json(model))  # a copy: the cached text stays intact
    return schema


@cache
def _schema_json(model: type[BaseModel]) -> str:
    return json.dumps(_strict(model.model_json_schema(mode="validation")), ensure_ascii=False)


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_WORDS and not isinstance(value, dict):
            continue
        if key in ("properties", "$defs"):  # maps of names to schemas: a name is not a keyword
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        else:
            out[key] = _strict(value)
    if "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


@dataclass(frozen=True)
class Problem:
    """Why one attempt's reply was not taken."""

    kind: FailureKind
    error: str
    key: str  # the call that gave it


@dataclass(frozen=True)
class Structured(Generic[T]):
    value: T
    text: str
    reply: ChatReply  # the last call's reply: its log-probabilities, token counts
    keys: tuple[str, ...]  # every call made for it, first ask first
    problems: tuple[Problem, ...] = ()  # the attempts before the one that validated

    @property
    def attempts(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class StructuredFailure:
    kind: FailureKind  # the last attempt's problem
    text: str  # the last reply, as the model wrote it
    error: str
    keys: tuple[str, ...]
    problems: tuple[Problem, ...]  # every attempt's, the last included

    @property
    def attempts(self) -> int:
        return len(self.keys)


StructuredResult = Structured[T] | StructuredFailure


def check_reply(reply: ChatReply, model: type[T], key: str = "") -> T | Problem:
    """The reply as a validated `model`, or why not; a cut or runaway reply is not parsed, nor is a
    prompt refused as too long for the context window (pipeline.llm.asking)."""
    if (refused := reply.too_long) is not None:
        return Problem("too_long", refused, key)
    if _RUNAWAY.search(reply.text):
        return Problem("runaway_whitespace", f"a run of {RUNAWAY_WHITESPACE}+ whitespace characters", key)
    if reply.done_reason == "length":
        tokens = f"{reply.completion_tokens} tokens" if reply.completion_tokens else "the token limit"
        return Problem("truncated", f"the reply was cut at {tokens} before it was complete", key)
    try:
        return model.model_validate_json(reply.text)
    except ValidationError as exc:
        return Problem("invalid", _describe(exc), key)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        where = ".".join(str(part) for part in error["loc"]) or "the reply"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def reask_message(problem: Problem) -> str:
    if problem.kind == "invalid":
        return (
            f"Your reply did not match the required JSON format ({problem.error}). "
            "Reply again with only the JSON object, every field filled in."
        )
    return (
        f"Your reply was not a complete JSON object ({problem.error}). "
        "Reply again with only the JSON object, shorter, with no extra blank space."
    )


def ask_structured(
    session: ChatSession,
    messages: Sequence[Message],
    model: type[T],
    options: Options,
    context: CallContext,
    *,
    max_attempts: int = 2,
    logprobs: int | None = None,
) -> Structured[T] | StructuredFailure:
    """Ask for `model` under its schema; re-ask with the problem named, up to `max_attempts` calls."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    conversation = list(messages)
    keys: list[str] = []
    problems: list[Problem] = []
    schema = schema_for(model)
    for attempt in range(max_attempts):
        request = ChatRequest(messages=tuple(conversation), options=options, format=schema, logprobs=logprobs)
        call = session.chat(request, context.at(attempt=attempt))
        reply = call.record.reply
        keys.append(call.record.key)
        checked = check_reply(reply, model, call.record.key)
        if not isinstance(checked, Problem):
            return Structured(checked, reply.text, reply, tuple(keys), tuple(problems))
        problems.append(checked)
        if checked.kind == "too_long":
            break  # a re-ask carries the whole prompt and more: it cannot fit either
        # A whitespace tail is the failure itself: the conversation carries the reply without it.
        conversation += [
            Message(role="assistant", content=reply.text.rstrip()),
            Message(role="user", content=reask_message(checked)),
        ]
    last = problems[-1]
    return StructuredFailure(last.kind, reply.text, last.error, tuple(keys), tuple(problems))


def read_attempt(record: CallRecord, model: type[T]) -> Structured[T] | StructuredFailure:
    """One recorded call's reply as ask_structured read it when it came (check_reply): validated, or
    the failure of that attempt, as if it were the only one. What `judgeloop audit` and a report show
    for each attempt of a structured judgement, read by the same code the stage read it with."""
    reply = record.reply
    checked = check_reply(reply, model, record.key)
    if isinstance(checked, Problem):
        return StructuredFailure(checked.kind, reply.text, checked.error, (record.key,), (checked,))
    return Structured(checked, reply.text, reply, (record.key,))


def tally(results: Iterable[Structured[Any] | StructuredFailure]) -> Counter[str]:
    """How many results validated ("ok") or failed ("failed"), and how many attempts met each
    problem kind, re-asks that then validated included."""
    counts: Counter[str] = Counter()
    for result in results:
        counts["ok" if isinstance(result, Structured) else "failed"] += 1
        counts.update(problem.kind for problem in result.problems)
    return counts
