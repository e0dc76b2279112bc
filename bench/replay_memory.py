"""Where a replay's memory goes: the paper's three LLM stages replayed in this process (as
bench/million.py's `stages` step runs them), with, at each stage's close, the process's memory by
kind (/proc/self/smaps_rollup: anonymous, file-backed) and, with --trace, the Python heap's top
allocations by line (tracemalloc), so that two sizes can be compared: what grows with the calls.

    nice -n 19 .venv/bin/python bench/replay_memory.py --calls 3000 --root /tmp/mem-3k --trace
    nice -n 19 .venv/bin/python bench/replay_memory.py --calls 10000 --root /tmp/mem-10k
    nice -n 19 .venv/bin/python bench/replay_memory.py --calls 10000 --root /tmp/mem-10k --record

With --record it measures the recording run instead (live on the fake backend, the stages'
recordings, outputs and local cache deleted first), the `stages ROOT auto` step of bench/million.py.

The project is built and recorded once under --root (as bench/replay_profile.py does); each run
deletes the local cache first. tracemalloc slows the replay about threefold.
"""

from __future__ import annotations

import ctypes
import gc
import os
import resource
import shutil
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.llm import session as llm_session
from pipeline.llm.recordings.stage_writer import StageRecording
from pipeline.testing.synthetic import items_for, make_project, run_stages

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("Rss", "Anonymous", "Private_Clean", "Shared_Clean", "Private_Dirty")


def rollup() -> str:
    """The process's resident memory by kind, MB (Linux; empty elsewhere)."""
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return ""
    rows = [parts for parts in map(str.split, lines) if len(parts) == 3]
    sizes = {parts[0].rstrip(":"): int(parts[1]) // 1024 for parts in rows}
    return ", ".join(f"{kind} {sizes[kind]}" for kind in KINDS if kind in sizes)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_split() -> str:
    """glibc's heap, MB (all arenas, threads' included): in use, free but kept, mapped apart (big
    blocks); and Python's small-object allocator (its blocks, outside glibc's count); empty where
    mallinfo2 is missing (glibc before 2.33, musl, macOS)."""
    try:
        call = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return ""
    call.restype = _MallInfo2
    info = call()
    mb = 2**20
    return (
        f"malloc in use {(info.uordblks + info.hblkhd) / mb:.0f}, free kept {info.fordblks / mb:.0f}, "
        f"mapped apart {info.hblkhd / mb:.0f}; Python objects {sys.getallocatedblocks():,}; "
        f"threads {threading.active_count()}"
    )


def types(limit: int) -> str:
    """The kinds of object the collector tracks, most numerous first, with their own sizes (not what
    they hold): cheap, unlike tracemalloc, so it can be taken at 100k calls."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    return "\n".join(f"      {sizes[n] / 2**20:8.2f} MB {c:9,d}  {n}" for n, c in counts.most_common(limit))


def top(limit: int) -> str:
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = snapshot.statistics("lineno")[:limit]
    return "\n".join(f"      {s.size / 2**20:8.2f} MB {s.count:8d}  {s.traceback[0]}" for s in stats)


@click.command()
@click.option("--calls", type=int, default=10_000, show_default=True, help="Calls, when --root is new.")
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--trace/--no-trace", default=False, show_default=True, help="tracemalloc's top lines.")
@click.option("--types/--no-types", "kinds", default=False, show_default=True, help="Objects by type.")
@click.option("--top", "limit", type=int, default=15, show_default=True)
@click.option(
    "--record/--replay",
    default=False,
    show_default=True,
    help="Measure the recording run itself (live on the fake backend, recordings and cache deleted "
    "first) instead of a replay of it.",
)
def main(calls: int, chars: int, root: Path, trace: bool, kinds: bool, limit: int, record: bool) -> None:
    if not (root / "data").is_dir():
        root.mkdir(parents=True, exist_ok=True)
        make_project(root, items_for(calls), chars, ROOT / "params.yaml")
    if not record and not (root / "recordings").is_dir():
        click.echo(f"recorded {run_stages(root, 'auto')} calls")
    shutil.rmtree(root / ".judgeloop", ignore_errors=True)
    if record:
        shutil.rmtree(root / "recordings", ignore_errors=True)
        shutil.rmtree(root / "outputs", ignore_errors=True)
    close = llm_session.LLMSession.close

    def closing(session: llm_session.LLMSession, **options: Any) -> None:
        close(session, **options)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        click.echo(f"  {session.stage}: {rollup()} MB; peak {peak} MB; served {len(session.served)}")
        click.echo(f"    {malloc_split()}")
        if kinds:
            click.echo(f"    objects by type:\n{types(limit)}")
        if trace:
            now, most = (size / 2**20 for size in tracemalloc.get_traced_memory())
            click.echo(f"    Python heap {now:.1f} MB (peak {most:.1f} MB); top lines:\n{top(limit)}")

    llm_session.LLMSession.close = closing  # type: ignore[method-assign,assignment]
    write = StageRecording.write

    def writing(recording: StageRecording, *args: Any, **options: Any) -> int:
        # The recording's own holdings are let go of at the stage's close: seen here, before its write.
        click.echo(f"  writing {len(recording)} calls: {rollup()} MB")
        if kinds:
            click.echo(f"    objects by type:\n{types(limit)}")
        return write(recording, *args, **options)

    StageRecording.write = writing  # type: ignore[method-assign,assignment]
    if trace:
        tracemalloc.start()
    started, wall = os.times(), time.perf_counter()
    replayed = run_stages(root, "auto" if record else "replay")
    ended = os.times()
    spent = ended.user + ended.system - started.user - started.system
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    click.echo(
        f"{'recorded' if record else 'replayed'} {replayed} calls: {spent:.1f} s CPU, "
        f"{time.perf_counter() - wall:.1f} s wall, "
        f"peak {peak:,.0f} MB (ru_maxrss); load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
