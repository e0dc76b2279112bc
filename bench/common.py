"""What the benchmarks share: judge-like calls (a 20 kB transcript inside every prompt), a fake server
in a process of its own, and the synthetic project replayed from its recordings (bench/replay_*.py)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
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
    tree: str  # sha256 of every file under outputs/ and recordings/ after the run (its first 16 digits)

    def line(self, note: str = "") -> str:
        return (
            f"replayed {self.calls} calls: {self.cpu:.2f} s of CPU ({self.calls / self.cpu:,.0f} calls per "
            f"CPU s), {self.wall:.2f} s of wall; load {self.load[0]:.1f} -> {self.load[1]:.1f}; "
            f"tree {self.tree}{note}"
        )


def tree(root: Path) -> str:
    """sha256 over every file under `root`'s outputs/ and recordings/, path and bytes: two runs that
    wrote the same files give the same digest."""
    digest = hashlib.sha256()
    for folder in ("outputs", "recordings"):
        for path in sorted(p for p in (root / folder).rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(root).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def drop_pages(root: Path) -> int:
    """Every file under `root` written out and its pages dropped from the page cache, so that the run
    after reads them from the disk (the recordings, the interviews, the outputs, the local cache);
    the files asked. Only clean pages can be dropped: hence the sync first."""
    os.sync()
    files = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            files += 1
    return files


@contextmanager
def slow_reads(delay: float) -> Iterator[list[int]]:
    """Every os.read and os.pread in this process waits `delay` s first (the GIL let go, as a read
    waiting on a disk lets it go): the interviews' reads, each recorded line read back when served,
    the blocks' and items' tables. A slow disk for the reads a replay makes one at a time, where
    items side by side could wait together. Buffered reads of a whole file (a recording read and
    verified at the stage's start) are not delayed: drop_pages makes those wait on the real disk.
    Yields a list holding the count of delayed reads."""
    count = [0]
    read, pread = os.read, os.pread

    def slow_read(fd: int, size: int, /) -> bytes:
        count[0] += 1
        time.sleep(delay)
        return read(fd, size)

    def slow_pread(fd: int, size: int, offset: int, /) -> bytes:
        count[0] += 1
        time.sleep(delay)
        return pread(fd, size, offset)

    os.read, os.pread = slow_read, slow_pread
    try:
        yield count
    finally:
        os.read, os.pread = read, pread


def replay_project(
    root: Path,
    *,
    warm_cache: bool = False,
    around: AbstractContextManager[object] | None = None,
    cold_pages: bool = False,
    read_delay: float = 0.0,
) -> Replayed:
    """The paper's three LLM stages replayed in this process from `root`'s recordings (inside
    `around`: a profiler, say), the local cache (.judgeloop, the verified memo with it) deleted first
    unless `warm_cache`, as million.py's replay step does; with `cold_pages` every file under `root`
    dropped from the page cache first (drop_pages), with `read_delay` every read waiting that long
    (slow_reads); ClickException unless the recordings come back byte-identical."""
    from pipeline.testing.synthetic import run_stages

    before = snapshot(root / "recordings")
    if not warm_cache:
        shutil.rmtree(root / ".judgeloop", ignore_errors=True)
    if cold_pages:
        drop_pages(root)
    load = os.getloadavg()[0]
    started, wall = cpu(), time.perf_counter()
    with around or nullcontext(), slow_reads(read_delay) if read_delay else nullcontext([0]) as delayed:
        replayed = run_stages(root, "replay")
    spent, wall = cpu() - started, time.perf_counter() - wall
    if snapshot(root / "recordings") != before:
        raise click.ClickException("the replay did not give the recorded calls back byte-identically")
    note = f" ({delayed[0]} reads delayed {read_delay * 1000:g} ms)" if read_delay else ""
    return Replayed(replayed, spent, wall, (load, os.getloadavg()[0]), tree(root) + note)
