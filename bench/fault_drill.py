"""The fault drill's wall times: `judgeloop judge-evaluate --batch` (12 rows, 4 slots: 8 calls in flight)
against a fake Ollama server on loopback that misbehaves, with the default retry budget
(llm.max_retries 5, llm.max_server_errors 2, jittered exponential backoff) unless the scenario says.

    .venv/bin/python bench/fault_drill.py [SCENARIO ...]

For each fault: the wall time to a clear failure (and its first line) or to the correct result (the
same scores as a run without the fault). tests/test_fault_drill.py asserts the behaviour; this only
times it. Scenarios:

    clean          no fault (the baseline)
    refused        nothing listens at llm.base_url
    never-answers  every request hangs; llm.read_timeout_s 2 (the issue's measurement)
    dies           the server dies after 5 replies and stays down
    dies-returns   the server dies after 5 replies and is back 3 s later
    no-content     the first 3 chat replies have no message content, then normal replies
    429-after      the first chat call gets 429 with Retry-After: 2
    429-bare       the first chat call gets 429 with no Retry-After

Measured on the 2-core development machine shared with other work (load average 3-3.5), two runs
each (issue 25):

    clean            0.5-0.7 s   correct result
    refused          5.8-11.6 s  failed: the server ... is down (one retry budget; jittered backoff)
    never-answers    6.3-7.0 s   failed: the server ... is stuck (3 attempts of 2 s: max_server_errors)
    dies             5.0-7.4 s   failed: the server ... is down
    dies-returns     3.9-6.6 s   correct result (down 3 s, within one budget)
    no-content       0.4-0.6 s   correct result
    429-after        2.1-2.2 s   correct result (waited the 2 s the server asked)
    429-bare         0.4 s       correct result

Before the circuit breaker (main at 3bae538, the same script): refused 66.2 s, never-answers 183.2 s
(each worker spent its own budget, and each row behind them another). With the default read
timeout of 300 s, a server that never answers now fails after 3 x 300 s plus the backoff, about
15 minutes (computed, not measured), where the issue extrapolated four and a half hours.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from click.testing import CliRunner

from pipeline.testing.fake_ollama import FakeOllama, Fault
from pipeline.testing.structured_responder import structured_ollama_responder
from pipeline.tools.cli import main

ROWS, SLOTS = 12, 4


def rows() -> str:
    return "".join(
        json.dumps({"id": f"r{i:02d}", "question": f"Q{i}?", "answer": f"A{i}.", "contexts": [f"F{i}."]})
        + "\n"
        for i in range(ROWS)
    )


def run_batch(root: Path, base_url: str, **llm: Any) -> tuple[float, int, str]:
    settings = {"backend": "ollama", "model": "test-model", "base_url": base_url, "parallelism": SLOTS, **llm}
    (root / "params.yaml").write_text(
        yaml.safe_dump({"llm": settings, "cache": {"dir": "cache"}, "rag": {"logprobs": None}})
    )
    (root / "rows.jsonl").write_text(rows())
    started = time.perf_counter()
    import os

    here = Path.cwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(
            main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"]
        )
    finally:
        os.chdir(here)
    return time.perf_counter() - started, result.exit_code, result.output


def kill_after(server: FakeOllama, replies: int, back_after: float | None) -> None:
    def run() -> None:
        while server.requests_to("/api/chat") < replies:
            time.sleep(0.005)
        port = server.port
        server.close()
        if back_after is not None:
            time.sleep(back_after)
            server.start(port)

    threading.Thread(target=run, daemon=True).start()


def scenario(name: str, clean_scores: str | None) -> tuple[str, str]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOllama(responder=structured_ollama_responder, parallel_slots=SLOTS, latency_s=0.1) as server,
    ):
        root, url, llm = Path(tmp), server.url, {}
        setups: dict[str, Callable[[], None]] = {
            "clean": lambda: None,
            "never-answers": lambda: server.inject(*[Fault.hang(3600)] * 1000),
            "dies": lambda: kill_after(server, 5, None),
            "dies-returns": lambda: kill_after(server, 5, 3.0),
            "no-content": lambda: server.inject(*[Fault.no_content.on("/api/chat")] * 3),
            "429-after": lambda: server.inject(
                Fault.status(429, "slow down", retry_after="2").on("/api/chat")
            ),
            "429-bare": lambda: server.inject(Fault.status(429, "slow down").on("/api/chat")),
        }
        if name == "refused":
            server.close()
        elif name in setups:
            setups[name]()
        else:
            raise SystemExit(f"unknown scenario {name!r}; see the docstring")
        if name == "never-answers":
            llm["read_timeout_s"] = 2.0
        seconds, code, output = run_batch(root, url, **llm)
        scores = (root / "scores.jsonl").read_text() if (root / "scores.jsonl").exists() else None
        if code == 0:
            same = clean_scores is None or scores == clean_scores
            outcome = "correct result" if same else "WRONG RESULT (differs from the clean run)"
        else:
            first = next((line for line in output.splitlines() if line.startswith("Error")), output[:200])
            outcome = f"failed: {first[:230]}"
        return f"{name:<14} {seconds:7.1f} s  {outcome}", scores or ""


def main_() -> None:
    names = sys.argv[1:] or [
        "clean",
        "refused",
        "never-answers",
        "dies",
        "dies-returns",
        "no-content",
        "429-after",
        "429-bare",
    ]
    line, clean = scenario("clean", None)
    print(f"{ROWS} rows, {SLOTS} slots, fake Ollama 100 ms a reply; defaults but where the docstring says")
    for name in names:
        print(line if name == "clean" else scenario(name, clean)[0], flush=True)


if __name__ == "__main__":
    main_()
