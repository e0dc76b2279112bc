"""`make replay` and `judgeloop check` in two checkouts, alternated, with CPU time beside wall time.

    python bench/replay_pairs.py BASE_CHECKOUT [THIS_CHECKOUT] [--runs 3] [--venv PATH]

On a shared machine the wall time says more about the other users than about the code, so each run
reports the CPU time (user + system) of its whole process tree (DVC, every stage process), read
from getrusage(RUSAGE_CHILDREN) around the run, and the 1-minute load average as it began. The two
checkouts are run one after the other, A B A B ..., so that both see the same minutes.

Each command is the one the Makefile runs (`python -m pipeline.tools.cli repro --replay`, then
`... check`) with the environment's bin first on the PATH, run in the checkout's folder, so the code
is the checkout's whatever checkout the environment was installed from. One warm-up run of each
first (the local cache, the verified memo). A replay must leave `git status` clean (its outputs
byte-identical): a run that changes a tracked file is reported.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {"make replay": ["repro", "--replay"], "judgeloop check": ["check"]}


def timed(checkout: Path, args: list[str], venv: Path) -> tuple[float, float, float]:
    """(wall s, CPU s of the process tree, load average when it began) of one run."""
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pipeline.tools.cli", *args],
        cwd=checkout,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, load


def changed(checkout: Path) -> str:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", type=Path)
    parser.add_argument("this", type=Path, nargs="?", default=Path.cwd())
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=Path(sys.prefix))
    opts = parser.parse_args()
    checkouts = {"base": opts.base.resolve(), "this": opts.this.resolve()}
    for checkout in checkouts.values():
        for args in COMMANDS.values():
            timed(checkout, args, opts.venv)  # warm-up: the local cache and the verified memo
    for what, args in COMMANDS.items():
        for run in range(opts.runs):
            for name, checkout in checkouts.items():
                before = changed(checkout)
                wall, cpu, load = timed(checkout, args, opts.venv)
                moved = changed(checkout) != before
                note = "  CHANGED A TRACKED FILE" if moved else ""
                figures = f"{wall:5.1f} s wall {cpu:5.1f} s CPU  load {load:4.1f}"
                print(f"{what:16} {name:5} run {run + 1}: {figures}{note}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
