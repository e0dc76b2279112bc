"""The small typed interface every backend speaks: a ChatRequest in, a ChatReply out.

A backend is bound to one model; its `identity()` pins exactly which weights answer (a digest,
never a tag), and that identity is part of every cache key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal, NamedTuple, Protocol, overload, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema

Role = Literal["system", "user", "assistant"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(Frozen):
    role: Role
    content: str


class Options(Frozen):
    """Every sampling and runner option that can change a reply, spelled out.

    Defaults are explicit so that an option left out and the same option given with its default
    value produce the same request (and the same cache key).
    """

    # Ranges every backend accepts; NaN and infinity are refused (allow_inf_nan), so a typo in
    # params.yaml stops at load with its line rather than reaching a server as a 400 or a garbage run.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    temperature: float = Field(0.0, ge=0.0, le=100.0)
    # A negative seed asks llama.cpp and Ollama for a random one: replies that cannot repeat.
    seed: int = Field(42, ge=0, lt=2**32)
    num_ctx: int = Field(4096, ge=16)
    num_predict: int = Field(512, ge=-1)  # -1: no limit (Ollama's spelling; the OpenAI API's is none)
    top_k: int = Field(20, ge=0)
    top_p: float = Field(0.9, gt=0.0, le=1.0)
    repeat_penalty: float = Field(1.0, gt=0.0)
    stop: tuple[Annotated[str, Field(min_length=1)], ...] = ()


def _without_unset_additions(data: Any, added: tuple[str, ...]) -> Any:
    # Fields added after records were first written are left out while None, so an old record
    # dumps (and checksums, and keys) exactly as it did before they existed.
    if isinstance(data, dict):
        for name in added:
            if data.get(name, 0) is None:
                del data[name]
    return data


class ChatRequest(Frozen):
    messages: tuple[Message, ...]
    options: Options = Field(default_factory=Options)
    # None: free text; "json": any JSON object; a dict: a JSON Schema the reply must follow.
    format: Literal["json"] | dict[str, Any] | None = None
    # None: no log-probabilities; k >= 0: each generated token's log-probability and its k most
    # likely alternatives (0..20, the OpenAI API's range). Keyed only when set (pipeline.llm.keys).
    logprobs: int | None = Field(default=None, ge=0, le=20)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_unset_additions(handler(self), ("logprobs",))


class TopLogprob(NamedTuple):
    token: str
    logprob: float


class TokenLogprob(NamedTuple):
    """One generated token: its text, its log-probability, and the most likely alternatives at
    that position (the chosen token among them when it ranks), most likely first."""

    token: str
    logprob: float
    top: tuple[TopLogprob, ...] = ()


Row = tuple[str, float, Sequence[tuple[str, float]]]


class Logprobs(Sequence[TokenLogprob]):
    """A reply's per-token log-probabilities: a read-only sequence of TokenLogprob.

    Kept as five flat tuples of strings, floats and offsets, which the garbage collector stops
    tracking at its first pass, and handed out as TokenLogprob on access. A reply holds one entry
    per generated token with up to 20 alternatives each, and a stage keeps every reply it served:
    as models (an instance, its dict, its set of fields each) a thousand judged rows made a million
    objects for the collector to walk, and its full passes stopped every thread for up to half a
    second each (bench/rag_batch.py). Validated like a model (typed fields, unknown keys refused)
    and written as the same JSON objects, so recordings and checksums are unchanged.
    """

    __slots__ = ("_alt_ends", "_alt_logprobs", "_alt_tokens", "_logprobs", "_tokens")

    def __init__(self, tokens: Iterable[TokenLogprob | Row] = ()) -> None:
        texts: list[str] = []
        logprobs: list[float] = []
        alt_texts: list[str] = []
        alt_logprobs: list[float] = []
        ends: list[int] = []
        for text, logprob, top in tokens:
            texts.append(str(text))
            logprobs.append(float(logprob))
            for alt_text, alt_logprob in top:
                alt_texts.append(str(alt_text))
                alt_logprobs.append(float(alt_logprob))
            ends.append(len(alt_texts))
        self._tokens, self._logprobs = tuple(texts), tuple(logprobs)
        self._alt_tokens, self._alt_logprobs, self._alt_ends = (
            tuple(alt_texts),
            tuple(alt_logprobs),
            tuple(ends),
        )

    @overload
    def __getitem__(self, index: int) -> TokenLogprob: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[TokenLogprob, ...]: ...
    def __getitem__(self, index: int | slice) -> TokenLogprob | tuple[TokenLogprob, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        i = range(len(self._tokens))[index]  # negative indices, and IndexError past the end
        start = self._alt_ends[i - 1] if i else 0
        top = tuple(
            TopLogprob(self._alt_tokens[j], self._alt_logprobs[j]) for j in range(start, self._alt_ends[i])
        )
        return TokenLogprob(self._tokens[i], self._logprobs[i], top)

    def __len__(self) -> int:
        return len(self._tokens)

    def _state(self) -> tuple[tuple[Any, ...], ...]:
        return (self._tokens, self._logprobs, self._alt_tokens, self._alt_logprobs, self._alt_ends)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Logprobs):
            return self._state() == other._state()
        if isinstance(other, Sequence) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._state())

    def __repr__(self) -> str:
        return f"Logprobs({list(self)!r})"

    def as_objects(self) -> list[dict[str, Any]]:
        """The JSON shape: [{"token", "logprob", "top": [{"token", "logprob"}, ...]}, ...]."""
        objects: list[dict[str, Any]] = []
        start = 0
        alt_tokens, alt_logprobs = self._alt_tokens, self._alt_logprobs
        for text, logprob, end in zip(self._tokens, self._logprobs, self._alt_ends, strict=True):
            top = [{"token": alt_tokens[j], "logprob": alt_logprobs[j]} for j in range(start, end)]
            objects.append({"token": text, "logprob": logprob, "top": top})
            start = end
        return objects

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        entries = handler.generate_schema(tuple[TokenLogprob, ...])
        return core_schema.union_schema(
            [core_schema.is_instance_schema(cls), core_schema.no_info_after_validator_function(cls, entries)],
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda value: value.as_objects(), when_used="always"
            ),
        )


class ModelIdentity(Frozen):
    """Which model answers. `digest` pins the exact weights; `name` is only a label."""

    backend: str  # "ollama", "openai", "embedded", "fake"
    name: str
    digest: str


# done_reason of a call whose prompt did not fit the model's context window (llm.too_long: unscored):
# the backend refused it, the reply has no text, and meta["refused"] says what the backend said.
PROMPT_TOO_LONG = "prompt_too_long"


class ChatReply(Frozen):
    text: str
    done_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Everything else the backend said about the call (durations in ns, server version, ...).
    meta: dict[str, Any] = Field(default_factory=dict)
    # Per generated token, when the request asked for them and the backend gave them.
    logprobs: Logprobs | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_unset_additions(handler(self), ("logprobs",))

    @property
    def too_long(self) -> str | None:
        """Why the prompt was refused as too long for the context window; None for a reply."""
        if self.done_reason != PROMPT_TOO_LONG:
            return None
        return str(self.meta.get("refused") or "the prompt does not fit the context window")

    @classmethod
    def refused_as_too_long(cls, said: str) -> ChatReply:
        return cls(text="", done_reason=PROMPT_TOO_LONG, meta={"refused": said})


class CallContext(Frozen):
    """Where in an experiment a call was made; recorded with it, never keyed, so it can be audited.

    Every design has a stage and an item; `step` counts a loop's rounds (the paper's iteration, a
    regeneration's number); `attempt` counts re-asks of the same question after an unusable reply;
    `labels` hold the rest, named by the design: metric, role, candidate, order, dimension, ...
    """

    stage: str
    item: str = ""
    step: int | None = None
    attempt: int = 0
    labels: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_named_fields(cls, data: Any) -> Any:
        # Recordings made before contexts were generic name `iteration`, `metric` and `role` as fields.
        if isinstance(data, dict) and {"iteration", "metric", "role"} & data.keys():
            data = dict(data)
            if "iteration" in data:
                data.setdefault("step", data.pop("iteration"))
            labels = dict(data.get("labels") or {})
            for name in ("metric", "role"):
                value = data.pop(name, None)
                if value:
                    labels[name] = value
            data["labels"] = labels
        return data

    def label(self, name: str) -> str | None:
        return self.labels.get(name)

    def at(self, *, step: int | None = None, attempt: int | None = None, **labels: str) -> CallContext:
        """This context, one level deeper: a step, an attempt, or more labels."""
        update: dict[str, Any] = {"labels": {**self.labels, **labels}}
        if step is not None:
            update["step"] = step
        if attempt is not None:
            update["attempt"] = attempt
        return self.model_copy(update=update)

    def describe(self) -> str:
        parts = [f"stage={self.stage}"]
        if self.item:
            parts.append(f"item={self.item}")
        if self.step is not None:
            parts.append(f"step={self.step}")
        parts.extend(f"{name}={value}" for name, value in sorted(self.labels.items()))
        if self.attempt:
            parts.append(f"attempt={self.attempt}")
        return " ".join(parts)

    def sort_key(self) -> tuple[str, str, int, str, tuple[tuple[str, str], ...], int]:
        return (
            self.stage,
            self.item,
            -1 if self.step is None else self.step,
            self.labels.get("role", ""),
            tuple(sorted(self.labels.items())),
            self.attempt,
        )


@runtime_checkable
class Backend(Protocol):
    """A model behind one interface. Implementations: Ollama, OpenAI-compatible, embedded, fake."""

    kind: str
    # How many requests the server answers at once (its slots; see pipeline.llm.settings.in_flight).
    parallelism: int

    def identity(self) -> ModelIdentity: ...

    def chat(self, request: ChatRequest) -> ChatReply: ...

    def close(self) -> None: ...
