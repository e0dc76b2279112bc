"""Where a replayed call's CPU goes: the paper's three LLM stages replayed in this process under
cProfile, on bench/million.py's synthetic project (pipeline.testing.synthetic).

    nice -n 19 .venv/bin/python bench/replay_profile.py --calls 10000 --root /tmp/replay-10k
    nice -n 19 .venv/bin/python bench/replay_profile.py --root /tmp/replay-10k --no-profile   # CPU only
    nice -n 19 .venv/bin/python bench/replay_profile.py --root /tmp/replay-10k --warm-cache   # cache kept
    nice -n 19 .venv/bin/python bench/replay_profile.py --root /tmp/replay-10k --no-profile --cold-pages
    nice -n 19 .venv/bin/python bench/replay_profile.py --root /tmp/replay-10k --no-profile --read-delay 0.2

The project is built and recorded once under --root (kept, so that main and a branch can replay
the same recordings one after the other); each run deletes the local cache first (as million.py's
replay step does; --warm-cache keeps it, as a second replay in the same folder finds it), replays,
checks that the recordings came back byte-identical, and prints the CPU
time (user + system of this process), the wall time, the digest of every file under outputs/ and
recordings/ (the same for two runs that wrote the same bytes) and, with the profile, its top functions
by cumulative time. A slow disk, two ways: --cold-pages drops the project's files from the page cache
before the replay (the real disk's reads), --read-delay makes every os.read and os.pread wait
(the reads a replay makes one at a time, each a line or an interview).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import replay_project, synthetic_project
from pipeline.llm import scheduling


class ThreadProfiles:
    """cProfile sees one thread only: each thread started while this is on runs under a profiler of
    its own, and the stats are added together (the stages' items run on worker threads)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._run = threading.Thread.run

    def __enter__(self) -> ThreadProfiles:
        profiles, run = self.profiles, self._run

        def profiled_run(thread: threading.Thread) -> None:
            profile = cProfile.Profile(time.thread_time)  # CPU, not the wait for the GIL
            profiles.append(profile)
            profile.runcall(run, thread)

        threading.Thread.run = profiled_run  # type: ignore[method-assign,assignment]
        main = cProfile.Profile(time.thread_time)
        self.profiles.append(main)
        main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.profiles[0].disable()
        # The side-by-side pool's threads live on (pipeline.llm.scheduling): end them, so that
        # their profiles are complete.
        if scheduling._pool is not None:
            scheduling._pool[1].shutdown(wait=True)
            scheduling._pool = None
        threading.Thread.run = self._run  # type: ignore[method-assign]

    def stats(self) -> pstats.Stats:
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            stats.add(profile)
        return stats


# The parts of a replayed call, each by the function that holds it (file, name): cumulative time.
PARTS = (
    ("interviews parsed (index and each item)", "pipeline/data/transcript_files.py", "read_file"),
    ("interviews opened and read for the index", "pipeline/data/transcript_open.py", "read_listed"),
    ("interviews opened and read for each item", "pipeline/data/transcript_open.py", "read_again"),
    ("Transcript.text rendered", "pipeline/data/transcript_text.py", "render"),
    ("recordings verified (index_stage)", "pipeline/llm/recordings/stage_index.py", "index_stage"),
    ("a hit's line parsed (StageIndex.call)", "pipeline/llm/recordings/stage_index.py", "call"),
    ("local cache seeded (flush)", "pipeline/llm/cache/store.py", "flush"),
    ("  of which requests packed", "pipeline/llm/cache/blocks.py", "pack_request"),
    ("  of which packed from recording blocks", "pipeline/llm/cache/blocks.py", "pack_laid"),
    ("calls added to the recording", "pipeline/llm/recordings/stage_calls.py", "add"),
    ("recordings written", "pipeline/llm/recordings/stage_writer.py", "write"),
    ("the assessor's quote check", "pipeline/judges/rubric/assessor.py", "unverified_quotes"),
    ("the cache key", "pipeline/llm/keys.py", "request_key"),
)


def parts(stats: pstats.Stats) -> str:
    table = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in table.values())
    rows = [f"    {'part':<42} {'cumulative s':>12} {'share':>6}"]
    for label, path, name in PARTS:
        spent = sum(v[3] for (file, _, func), v in table.items() if func == name and file.endswith(path))
        rows.append(f"    {label:<42} {spent:12.1f} {spent / total:6.0%}")
    rows.append(f"    {'all profiled':<42} {total:12.1f}")
    return "\n".join(rows)


@click.command()
@click.option("--calls", type=int, default=10_000, show_default=True, help="Calls, when --root is new.")
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--profile/--no-profile", default=True, show_default=True)
@click.option(
    "--warm-cache/--cold-cache",
    default=False,
    show_default=True,
    help="Keep the local cache (.judgeloop) of the run before (a warm cache), or delete it first.",
)
@click.option(
    "--cold-pages/--warm-pages",
    default=False,
    show_default=True,
    help="Drop every file under --root from the page cache first (os.sync, then POSIX_FADV_DONTNEED), "
    "so that the replay reads the recordings and interviews from the disk.",
)
@click.option(
    "--read-delay",
    type=float,
    default=0.0,
    show_default=True,
    help="Milliseconds every os.read and os.pread waits first (a slow disk; bench/common.py, slow_reads).",
)
@click.option("--top", type=int, default=45, show_default=True, help="Functions shown, by cumulative time.")
def main(
    calls: int,
    chars: int,
    root: Path,
    profile: bool,
    warm_cache: bool,
    cold_pages: bool,
    read_delay: float,
    top: int,
) -> None:
    synthetic_project(root, calls, chars)
    profiler = ThreadProfiles() if profile else None
    replayed = replay_project(
        root, warm_cache=warm_cache, around=profiler, cold_pages=cold_pages, read_delay=read_delay / 1000
    )
    click.echo(replayed.line(" (under cProfile)" if profiler is not None else ""))
    if profiler is not None:
        stats = profiler.stats()
        click.echo(parts(stats))
        stats.sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    main()
