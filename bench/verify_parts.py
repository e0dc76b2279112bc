"""`judgeloop cache verify` in process, its parts timed (issue 33: its growth from 10k to 100k).

Run in a kept project (bench/million.py --keep), with judgeloop's code on the path and not the
project's copy:

    cd K100/calls-100000 && PYTHONPATH=<repo> python -P <repo>/bench/verify_parts.py

Prints verify's own output, then one JSON line: the process's CPU and rusage (page faults), each
part's thread CPU (inclusive) and how often it ran, Python's GC time by generation. The parts'
timers read a thread clock, a system call each: they add about 20 % (most of it as sys), so compare
the parts with each other and the whole with the plain command's only as a ratio.

--verified-chars N sets the blocks' verified cache (pipeline.llm.cache.blocks.VERIFIED_CHARS) for
the run: the knee bench/README.md's "a cache's knee" section found. --gc-freeze freezes the heap
first (is it the GC?).
"""

from __future__ import annotations

import gc
import json
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import click

from pipeline.llm.cache import blocks, bulk, store
from pipeline.llm.recordings import line_checks, offsets
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.tools.cache import verified_stages
from pipeline.tools.cache import verify as verify_module

CPU: dict[str, float] = defaultdict(float)
RAN: dict[str, int] = defaultdict(int)
GC_CPU: dict[int, float] = defaultdict(float)
GC_RAN: dict[int, int] = defaultdict(int)
_GC_STARTED = [0.0]


def timed(owner: Any, name: str, part: str) -> None:
    """owner.name replaced by itself with its thread CPU added to CPU[part]."""
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            CPU[part] += time.thread_time() - started
            RAN[part] += 1

    setattr(owner, name, wrapper)


def timed_generator(owner: Any, name: str, part: str) -> None:
    """owner.name, a generator, replaced by itself with the CPU spent inside it (not its caller's)
    added to CPU[part]."""
    inner: Callable[..., Iterator[Any]] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        items = inner(*args, **kwargs)
        while True:
            started = time.thread_time()
            item = next(items, StopIteration)
            CPU[part] += time.thread_time() - started
            if item is StopIteration:
                return
            RAN[part] += 1
            yield item

    setattr(owner, name, wrapper)


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _GC_STARTED[0] = time.thread_time()
    else:
        GC_CPU[info["generation"]] += time.thread_time() - _GC_STARTED[0]
        GC_RAN[info["generation"]] += 1


def time_parts() -> None:
    # R: the recordings' part; L: the local store's.
    timed(verify_module, "recorded_checksums", "R recordings, whole")
    timed(verified_stages, "scan_folder", "R scan_folder (hashed, placed)")
    timed(verified_stages, "_entries", "R lines parsed and verified")
    timed(line_checks, "parse_call_line", "R parse_call_line")
    timed(offsets.LineTable, "text", "R LineTable.text (a line read back)")
    timed(offsets.LazyBlobs, "__missing__", "R LazyBlobs miss (a block line read back)")
    timed(RecordedCall, "current", "R current")
    timed(CallRecord, "problem", "R+L CallRecord.problem (key, checksum)")
    timed_generator(verify_module, "local_records", "L local records, whole (with problem)")
    timed(bulk, "rows_in_order", "L rows_in_order (a page of rows)")
    timed(store.CallStore, "_inspect_row", "L _inspect_row (decoded, blocks)")
    timed(store.CallStore, "_request", "L _request (rebuilt from blocks)")
    timed(blocks.BlockStore, "text", "L BlockStore.text (asked for)")
    timed(blocks.BlockStore, "_read", "L BlockStore._read (from SQLite)")
    timed(verify_module, "disagreement", "L disagreement")


def _io() -> dict[str, int]:
    with open("/proc/self/io") as stream:
        return {name: int(value) for name, value in (line.split(": ") for line in stream)}


@click.command()
@click.option("--verified-chars", type=int, help="The blocks' verified cache, characters, for this run.")
@click.option("--gc-freeze", is_flag=True, help="gc.freeze() before the run.")
@click.option("--no-timers", is_flag=True, help="Rusage and GC only (the parts untimed).")
def main(verified_chars: int | None, gc_freeze: bool, no_timers: bool) -> None:
    if not no_timers:
        time_parts()
    if verified_chars is not None:
        blocks.VERIFIED_CHARS = verified_chars
    if gc_freeze:
        gc.freeze()
    gc.callbacks.append(_on_gc)
    io_before, before = _io(), resource.getrusage(resource.RUSAGE_SELF)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    verify_module.verify.main([], standalone_mode=False)
    cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
    after, io_after = resource.getrusage(resource.RUSAGE_SELF), _io()
    row = {
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "user_s": round(after.ru_utime - before.ru_utime, 2),
        "sys_s": round(after.ru_stime - before.ru_stime, 2),
        "peak_mb": after.ru_maxrss // 1024,
        "minor_faults": after.ru_minflt - before.ru_minflt,
        "major_faults": after.ru_majflt - before.ru_majflt,
        "read_syscalls": io_after["syscr"] - io_before["syscr"],
        "gc_cpu_s": {generation: round(s, 3) for generation, s in GC_CPU.items()},
        "gc_ran": dict(GC_RAN),
        "parts_cpu_s": {part: round(s, 3) for part, s in CPU.items()},
        "parts_ran": dict(RAN),
    }
    click.echo(json.dumps(row))


if __name__ == "__main__":
    main()
