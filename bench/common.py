"""What the benchmarks share: judge-like calls (a 20 kB transcript inside every prompt), a fake server
in a process of its own, and the synthetic project replayed from its recordings (bench/replay_*.py)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

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


def cpu() -> float:
    """This process's CPU time so far, user and system (every thread's)."""
    usage = os.times()
    return usage.user + usage.system


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every recording file under `folder`, by its path there, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def synthetic_project(root: Path, calls: int, chars: int) -> None:
    """bench/million.py's synthetic project (pipeline.testing.synthetic) under `root`, recorded live on
    the fake backend, unless `root` holds one already (kept, so that main and a branch replay the
    same recordings one after the other)."""
    from pipeline.testing.synthetic import items_for, make_project, run_stages

    if (root / "recordings").is_dir():
        return
    root.mkdir(parents=True, exist_ok=True)
    make_project(root, items_for(calls), chars, Path(__file__).resolve().parents[1] / "params.yaml")
    started = cpu()
    recorded = run_stages(root, "auto")
    click.echo(f"recorded {recorded} calls in {cpu() - started:.1f} s of CPU")


@dataclass(frozen=True)
class Replayed:
    calls: int
    cpu: float  # s, user + system of this process
    wall: float  # s
    load: tuple[float, float]  # the 1-minute load average before and after

    def line(self, note: str = "") -> str:
        return (
            f"replayed {self.calls} calls: {self.cpu:.2f} s of CPU ({self.calls / self.cpu:,.0f} calls per "
            f"CPU s), {self.wall:.2f} s of wall; load {self.load[0]:.1f} -> {self.load[1]:.1f}{note}"
        )


def replay_project(
    root: Path, *, warm_cache: bool = False, around: AbstractContextManager[object] | None = None
) -> Replayed:
    """The paper's three LLM stages replayed in this process from `root`'s recordings (inside
    `around`: a profiler, say), the local cache (.judgeloop, the verified memo with it) deleted first
    unless `warm_cache`, as million.py's replay step does; ClickException unless the recordings come
    back byte-identical."""
    from pipeline.testing.synthetic import run_stages

    before = snapshot(root / "recordings")
    if not warm_cache:
        shutil.rmtree(root / ".judgeloop", ignore_errors=True)
    load = os.getloadavg()[0]
    started, wall = cpu(), time.perf_counter()
    with around or nullcontext():
        replayed = run_stages(root, "replay")
    spent, wall = cpu() - started, time.perf_counter() - wall
    if snapshot(root / "recordings") != before:
        raise click.ClickException("the replay did not give the recorded calls back byte-identically")
    return Replayed(replayed, spent, wall, (load, os.getloadavg()[0]))
