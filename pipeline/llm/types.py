"""The small typed interface every backend speaks: a ChatRequest in, a ChatReply out.

A backend is bound to one model; its `identity()` pins exactly which weights answer (a digest,
never a tag), and that identity is part of every cache key.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

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

    temperature: float = 0.0
    seed: int = 42
    num_ctx: int = 4096
    num_predict: int = 512
    top_k: int = 20
    top_p: float = 0.9
    repeat_penalty: float = 1.0
    stop: tuple[str, ...] = ()


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


class TopLogprob(Frozen):
    token: str
    logprob: float


class TokenLogprob(Frozen):
    """One generated token: its text, its log-probability, and the most likely alternatives at
    that position (the chosen token among them when it ranks), most likely first."""

    token: str
    logprob: float
    top: tuple[TopLogprob, ...] = ()


class ModelIdentity(Frozen):
    """Which model answers. `digest` pins the exact weights; `name` is only a label."""

    backend: str  # "ollama", "openai", "embedded", "fake"
    name: str
    digest: str


class ChatReply(Frozen):
    text: str
    done_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Everything else the backend said about the call (durations in ns, server version, ...).
    meta: dict[str, Any] = Field(default_factory=dict)
    # Per generated token, when the request asked for them and the backend gave them.
    logprobs: tuple[TokenLogprob, ...] | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_unset_additions(handler(self), ("logprobs",))


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
    # How many requests the server answers at once; callers bound their in-flight calls to it.
    parallelism: int

    def identity(self) -> ModelIdentity: ...

    def chat(self, request: ChatRequest) -> ChatReply: ...

    def close(self) -> None: ...
