"""`judgeloop judge-evaluate --batch` against the fake Ollama server: N rows, K slots, 100 ms a reply.

The whole command runs in-process as a user runs it: rows read and validated, one schema-constrained
call per row through the cache (Ollama backend over loopback HTTP, the reply validated against the
reply model), the recordings and the scores file written. Ideal is K rows per 100 ms; we report the
fraction reached, then the time of the same batch again (every call a cache hit).

    .venv/bin/python bench/rag_batch.py [ROWS] [SLOTS] [LOGPROBS]

LOGPROBS is rag.logprobs (default 5, as params.yaml; "null" for none): with them every reply carries
each token's log-probability and 5 alternatives, which the fake server generates and the client
parses, stores and records.

The fake server runs in a process of its own, as Ollama does: in ours, its work (building and
encoding each reply's log-probabilities) would take the client's GIL and be counted as the
client's. judgeloop keeps twice the server's slots in flight (pipeline.llm.settings.in_flight).

Measured on a quiet 2-core machine (2026-11-23), 1,000 rows, 4 slots x 100 ms: with logprobs 5,
0.92-0.95 of ideal (cold), the same batch again in 3-5 s; without, 0.97. Before this session's
changes: 0.62-0.69 with logprobs (server in our process), 0.91 without.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from click.testing import CliRunner

from bench.common import ServerProcess
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.structured_responder import structured_ollama_responder
from pipeline.tools.cli import main as cli

LATENCY = 0.1


def write_rows(path: Path, n: int) -> None:
    context = "tidepool serve starts the local server on port 7070; --port N picks another. " * 8
    with path.open("w") as handle:
        for i in range(n):
            row = {
                "id": f"r{i:05d}",
                "question": f"How do I run server number {i} on another port?",
                "answer": f"Run `tidepool serve --port {8000 + i}`.",
                "contexts": [context],
                "source_ids": ["docs/serve.md"],
                "labels": {"answer_relevance": i % 2},
            }
            handle.write(json.dumps(row) + "\n")


def run_batch(root: Path) -> tuple[float, str]:
    start = time.perf_counter()
    result = CliRunner().invoke(cli, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])
    elapsed = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return elapsed, result.output.strip().splitlines()[-2]


def serve(slots: int, conn: Connection) -> None:
    """The fake server in a process of its own, as Ollama is: its work does not take our GIL."""
    with FakeOllama(responder=structured_ollama_responder, latency_s=LATENCY, parallel_slots=slots) as server:
        conn.send(server.url)
        while (asked := conn.recv()) is not None:
            conn.send(server.requests_to(asked))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    logprobs = yaml.safe_load(sys.argv[3]) if len(sys.argv) > 3 else 5
    with ServerProcess(serve, k) as server, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.chdir(root)
        write_rows(root / "rows.jsonl", n)
        llm = {"backend": "ollama", "model": "test-model", "base_url": server.url, "parallelism": k}
        params = {"llm": llm, "cache": {"dir": "cache"}, "rag": {"logprobs": logprobs}}
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        cold, said = run_batch(root)
        calls = int(server.ask("/api/chat"))
        warm, _ = run_batch(root)
        assert int(server.ask("/api/chat")) == calls, "the second run called the model"
        scored = sum(1 for _ in (root / "scores.jsonl").open())
    ideal = n / k * LATENCY
    print(f"rows {n}, slots {k}, {LATENCY * 1000:.0f} ms per reply, logprobs {logprobs}; {calls} model calls")
    print(said)
    print(f"cold: {cold:.2f} s, ideal {ideal:.2f} s -> {ideal / cold:.3f} of ideal")
    print(f"again (all cache hits): {warm:.2f} s; {scored} rows in the scores file")


if __name__ == "__main__":
    main()
