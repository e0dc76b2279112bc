"""What the file system's calls on one interview cost as its folder grows (issue 33: the real
export's CPU per 10x calls): the calls the interviews reader makes for each interview, each kind
timed over every interview of a folder, in the order a stage meets them.

    nice -n 19 .venv/bin/python bench/folder_lookups.py /tmp/p10k/data /tmp/p100k/data /tmp/p1m/data

Each argument is a folder in DAIC-WOZ's layout as the bench's synthetic projects make it
(pipeline.testing.synthetic: NNN_P/NNN_TRANSCRIPT.csv, every interview's folder in one folder). For
each: the folder listed (os.scandir), then, interview by interview, its own folder listed, its file
stat'ed, opened and read, and its path resolved (os.path.realpath, as the name shown in messages is
made); each kind a pass of its own over every interview, twice (the second with the first's caches),
its CPU (user + system, separately) per interview. The interviews are as the project holds them: no
file is written. If the system part grows with the folder's size, a stage's reading of it does too.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path


def _cpu() -> resource.struct_rusage:
    return resource.getrusage(resource.RUSAGE_SELF)  # microseconds, where os.times() counts ticks


def _read(path: str) -> None:
    with open(path, "rb") as handle:
        handle.read()


def _listed(path: str) -> None:
    with os.scandir(path) as entries:
        for entry in entries:
            entry.is_file()


KINDS: dict[str, Callable[[str, str], object]] = {
    "list its folder": lambda folder, _: _listed(folder),
    "stat": lambda _, file: os.stat(file),
    "open + read": lambda _, file: _read(file),
    "realpath": lambda _, file: os.path.realpath(file),
}


def timed(data: Path) -> None:
    started, times = time.perf_counter(), _cpu()
    with os.scandir(data) as entries:
        folders = sorted(entry.name for entry in entries if entry.is_dir())
    took = _cpu()
    n = len(folders)
    user, system = (took.ru_utime - times.ru_utime) / n * 1e6, (took.ru_stime - times.ru_stime) / n * 1e6
    print(
        f"{data}: {n} interviews, load {os.getloadavg()[0]:.1f}; the folder listed: {user:.2f} + "
        f"{system:.2f} us an entry (user + sys), wall {time.perf_counter() - started:.1f} s"
    )
    pairs = [(f"{data}/{f}", f"{data}/{f}/{f.removesuffix('_P')}_TRANSCRIPT.csv") for f in folders]
    for kind, call in KINDS.items():
        for round_ in (1, 2):
            started, times = time.perf_counter(), _cpu()
            for folder, file in pairs:
                call(folder, file)
            took = _cpu()
            user, system = (
                (took.ru_utime - times.ru_utime) / n * 1e6,
                (took.ru_stime - times.ru_stime) / n * 1e6,
            )
            wall = (time.perf_counter() - started) / n * 1e6
            print(f"  {kind:16} pass {round_}: {user:6.2f} + {system:6.2f} us CPU (wall {wall:7.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", type=Path, nargs="+", help="Folders of NNN_P/NNN_TRANSCRIPT.csv.")
    for data in parser.parse_args().folders:
        timed(data)


if __name__ == "__main__":
    main()
