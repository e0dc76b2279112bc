"""DVC's own CPU in a project whose dvc.lock is up to date (issue 31): what every iteration pays
however little it runs, and which follows the number of entries in dvc.yaml and dvc.lock.

    .venv/bin/python bench/dvc_steady.py --rounds 3          in a checkout (or a clone) to measure

Three commands, each `python -m dvc` in its own process, the stages' calls replayed
(JUDGELOOP_CACHE_MODE=replay), its CPU (user+sys, the process and the stage it waits for) and wall:
`dvc status`, a `dvc repro` that finds nothing to run, and `dvc repro --force --single-item
aggregate` (one small stage run, dvc.lock written once). Run it in two clones alternately (the old
layout and the new), each relocked (`./judgeloop repro --replay`), and compare CPU: wall follows the
machine's load. It leaves the outputs as they were (the forced stage writes the same bytes).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import click

COMMANDS = {
    "status": ["status", "-q"],
    "repro, nothing to run": ["repro"],
    "repro --force one stage": ["repro", "--force", "--single-item", "aggregate"],
}


def timed(args: list[str], root: Path) -> tuple[float, float]:
    """CPU (user+sys of the finished children) and wall of `python -m dvc ARGS` in `root`."""
    env = {**os.environ, "JUDGELOOP_CACHE_MODE": "replay"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, env=env, capture_output=True)
    wall = time.monotonic() - started
    if done.returncode != 0 and args[0] != "status":  # status -q: 1 where a stage is out of date
        raise click.ClickException(f"dvc {' '.join(args)} failed:\n{done.stderr.decode(errors='replace')}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


@click.command()
@click.option("--rounds", type=int, default=3, show_default=True)
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True
)
def main(rounds: int, root: Path) -> None:
    """DVC's CPU and wall for three commands in ROOT, ROUNDS times each."""
    lock = root / "dvc.lock"
    lines = len(lock.read_text(encoding="utf-8").splitlines()) if lock.is_file() else 0
    click.echo(f"{root.resolve()}: dvc.lock {lines} lines, load {os.getloadavg()[0]:.2f}")
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "-q"], cwd=root, capture_output=True)
    if status.returncode != 0:
        click.echo("  (dvc.lock is not up to date here: relock first, `./judgeloop repro --replay`)")
    for _ in range(rounds):
        for name, args in COMMANDS.items():
            cpu, wall = timed(args, root)
            click.echo(f"  {name:26s} CPU {cpu:5.2f} s  wall {wall:5.2f} s  load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
