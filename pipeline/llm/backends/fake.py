"""An in-process backend for unit tests: replies come from a function of the request.

Under a `format` the responder's text goes through the fake constrained decoder
(pipeline.llm.backends.fake_decoding) and is then cut at num_predict (4 characters a token) with
done_reason "length", as a real constrained reply is; free text is returned as the responder wrote
it. A request that asks for log-probabilities gets deterministic fake ones. A responder that
returns a ChatReply is taken as is.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

from pipeline.llm.backends.fake_decoding import constrain, fake_logprobs, request_seed
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatReply, ChatRequest, ModelIdentity

Responder = Callable[[ChatRequest], "str | ChatReply"]


def echo_responder(request: ChatRequest) -> str:
    """Deterministic and request-sensitive: a digest of the last message."""
    last = request.messages[-1].content
    return "echo " + hashlib.sha256(last.encode()).hexdigest()[:16]


class FakeBackend:
    kind = "fake"

    def __init__(
        self,
        responder: Responder = echo_responder,
        *,
        name: str = "fake-model",
        digest: str = "sha256:fake0000",
        parallelism: int = 4,
        keep_requests: bool = True,
    ) -> None:
        self.responder = responder
        self.name, self.digest, self.parallelism = name, digest, parallelism
        # Every request asked, for a test to read; off for a run of a million (bench/million.py).
        self.calls: list[ChatRequest] = []
        self._keep_requests = keep_requests
        self._lock = threading.Lock()

    def identity(self) -> ModelIdentity:
        return ModelIdentity(backend=self.kind, name=self.name, digest=self.digest)

    def chat(self, request: ChatRequest) -> ChatReply:
        if self._keep_requests:
            with self._lock:
                self.calls.append(request)
        answer = self.responder(request)
        if isinstance(answer, ChatReply):
            return answer
        done_reason = "stop"
        if request.format is not None:
            answer = constrain(answer, request.format)
            limit = request.options.num_predict
            if 0 <= limit < len(answer) // 4:
                answer, done_reason = answer[: limit * 4], "length"
        logprobs = None
        if request.logprobs is not None:
            seed = request_seed([m.model_dump() for m in request.messages])
            logprobs = fake_logprobs(answer, request.logprobs, seed)
        return ChatReply(
            text=answer,
            done_reason=done_reason,
            prompt_tokens=sum(len(m.content) for m in request.messages) // 4,
            completion_tokens=len(answer) // 4,
            logprobs=logprobs,
        )

    def close(self) -> None:
        pass


def build(settings: LLMSettings, cache_dir: Path) -> FakeBackend:
    return FakeBackend(name=settings.model, parallelism=settings.parallelism)
