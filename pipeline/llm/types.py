"""The small typed interface every backend speaks: a ChatRequest in, a ChatReply out.

A backend is bound to one model; its `identity()` pins exactly which weights answer (a digest,
never a tag), and that identity is part of every cache key.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

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
    """Where in the experiment a call was made; recorded with it so it can be audited."""

    stage: str
    item: str = ""
    iteration: int | None = None
    metric: str | None = None
    role: str = ""  # "assess", "judge", "refine", ...
    attempt: int = 0  # re-asks after an unreadable reply

    def describe(self) -> str:
        parts = [f"stage={self.stage}"]
        if self.item:
            parts.append(f"item={self.item}")
        if self.iteration is not None:
            parts.append(f"iteration={self.iteration}")
        if self.metric:
            parts.append(f"metric={self.metric}")
        if self.role:
            parts.append(f"role={self.role}")
        if self.attempt:
            parts.append(f"attempt={self.attempt}")
        return " ".join(parts)

    def sort_key(self) -> tuple[str, str, int, str, str, int]:
        return (
            self.stage,
            self.item,
            -1 if self.iteration is None else self.iteration,
            self.role,
            self.metric or "",
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
