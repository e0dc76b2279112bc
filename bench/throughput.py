"""(b) Throughput against the fake Ollama server: 100 ms per reply, K parallel slots, K in flight.

Ideal is K calls per 100 ms; we report the fraction reached through the whole stack (Ollama
backend over loopback HTTP, retries, the cache writing every reply, the item runner).

    .venv/bin/python bench/throughput.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.runner import run_items
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import CallContext, ChatRequest, Message
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.sessions import folder_session

LATENCY = 0.1


def measure(k: int, calls: int) -> float:
    with FakeOllama(latency_s=LATENCY, parallel_slots=k) as server, tempfile.TemporaryDirectory() as tmp:
        backend = OllamaBackend(
            LLMSettings(backend="ollama", model="test-model", base_url=server.url, parallelism=k)
        )
        session = folder_session(Path(tmp), backend)
        session.identity  # noqa: B018 - resolve /api/tags before the clock starts
        items = [ChatRequest(messages=(Message(role="user", content=f"call {i}"),)) for i in range(calls)]
        start = time.perf_counter()
        run_items(session, items, lambda r: session.chat(r, CallContext(stage="judge")), f"K={k}")
        elapsed = time.perf_counter() - start
        backend.close()
        assert session.stats.model_calls == calls
    ideal = calls / k * LATENCY
    return ideal / elapsed


def main() -> None:
    print("K   calls  fraction of ideal (K calls per 100 ms)")
    for k in (1, 4, 16):
        calls = 20 * k
        print(f"{k:<3} {calls:<6} {measure(k, calls):.3f}")


if __name__ == "__main__":
    main()
