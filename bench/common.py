"""Judge-like calls for the benchmarks: a 20 kB transcript inside every prompt."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.llm.types import ChatRequest, Message, Options


def transcript(chars: int = 20_000) -> str:
    lines: list[str] = []
    i = 0
    while sum(len(line) for line in lines) < chars:
        speaker = "Ellie" if i % 2 else "Participant"
        lines.append(f"{speaker} : line {i}, about sleep and work and the weekend ({i * 7919 % 997})\n")
        i += 1
    return "".join(lines)


def judge_request(i: int, text: str) -> ChatRequest:
    """The i-th of a run's judge calls: metric i % 4, iteration i // 4."""
    metrics = list(JUDGE_PROMPTS)
    template = JUDGE_PROMPTS[metrics[i % 4]]
    assessment = f"<assessment>Iteration {i // 4}: the participant reports poor sleep.</assessment>"
    prompt = template.replace("{transcript}", text).replace("{qualitative_output}", assessment)
    return ChatRequest(messages=(Message(role="user", content=prompt),), options=Options(num_predict=256))


def judge_requests(n: int, text: str) -> list[ChatRequest]:
    return [judge_request(i, text) for i in range(n)]


class ServerProcess:
    """A fake server in a process of its own, as Ollama is: its work does not take the client's
    GIL. `serve(*args, conn)` starts the server, sends its URL, then answers each message it gets
    (`ask`) until it gets None."""

    def __init__(self, serve: Callable[..., None], *args: Any) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(target=serve, args=(*args, child))

    def __enter__(self) -> ServerProcess:
        self._process.start()
        self.url: str = self._conn.recv()
        return self

    def ask(self, message: Any) -> Any:
        self._conn.send(message)
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self._conn.send(None)
        self._process.join(timeout=10)
