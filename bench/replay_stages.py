"""A replay as `dvc repro` runs it, without DVC: the paper's three LLM stages, each in a process of
its own (`python -m stages paper STAGE`, cache mode replay), on bench/million.py's synthetic project.

    nice -n 19 .venv/bin/python bench/replay_stages.py --root /tmp/replay-10k --calls 10000
    nice -n 19 .venv/bin/python bench/replay_stages.py --root /tmp/replay-10k --code /tmp/main --warm-cache

What bench/replay_profile.py leaves out is each stage process's own work around its calls: its start
and imports, the dry run that predicts its calls for the progress line, the dry run's results adopted
(each of its calls looked up again, then served and recorded), the other stages' recordings read for
the model's identity. Each run deletes the local cache and the verified memo first (--warm-cache
keeps them, as a second replay in the same folder finds them), runs the stages from `--code` (a
checkout: `python -P`, its folder on PYTHONPATH), checks that the recordings came back
byte-identical, and prints each stage's CPU (user + system of its process, from wait4) and wall, the
load, and the digest of every file under outputs/ and recordings/ (the same for two runs that wrote
the same bytes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import snapshot, synthetic_project, tree

STAGES = ("assess", "judge", "refine")


def run_stage(root: Path, code: Path, stage: str) -> tuple[float, float]:
    """One stage replayed in its own process: (CPU s, wall s); ClickException if it fails."""
    env = {**os.environ, "JUDGELOOP_CACHE_MODE": "replay", "PYTHONPATH": str(code)}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-P", "-m", "stages", "paper", stage],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise click.ClickException(f"stage {stage} failed:\n{errors.decode(errors='replace')[-3000:]}")
    return usage.ru_utime + usage.ru_stime, wall


@click.command()
@click.option("--calls", type=int, default=10_000, show_default=True, help="Calls, when --root is new.")
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option(
    "--code",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path(__file__).resolve().parents[1],
    show_default="this checkout",
    help="The checkout whose pipeline/ and stages/ run.",
)
@click.option("--warm-cache/--cold-cache", default=False, show_default=True)
def main(calls: int, chars: int, root: Path, code: Path, warm_cache: bool) -> None:
    synthetic_project(root, calls, chars)
    before = snapshot(root / "recordings")
    if not warm_cache:
        shutil.rmtree(root / ".judgeloop", ignore_errors=True)
    load = os.getloadavg()[0]
    spent: list[tuple[str, float, float]] = [(stage, *run_stage(root, code, stage)) for stage in STAGES]
    if snapshot(root / "recordings") != before:
        raise click.ClickException("the replay did not give the recorded calls back byte-identically")
    cpu, wall = sum(s[1] for s in spent), sum(s[2] for s in spent)
    stages = ", ".join(f"{name} {c:.2f}/{w:.1f}" for name, c, w in spent)
    click.echo(
        f"{code}: {cpu:.2f} s of CPU, {wall:.1f} s of wall ({stages}); "
        f"load {load:.1f} -> {os.getloadavg()[0]:.1f}; tree {tree(root)}"
    )


if __name__ == "__main__":
    main()
