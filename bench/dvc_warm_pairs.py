"""Alternated pairs of plain `dvc repro` (bench/scale.py's 133-item project, one 4-slot server,
log-normal 80 ms) with the warm stage process (stages/dvc_warm.py, the default) and without it
(JUDGELOOP_WARM=0), issue 31.

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/dvc_warm_pairs.py --pairs 4 [-- SCALE ARGS]

Each run is `bench/scale.py --no-replay` in a process of its own. The warm process is detached from
DVC (its parent, the first stage, has ended long before), and its forks are its children: so that
their CPU counts, this process is their subreaper (prctl PR_SET_CHILD_SUBREAPER), reaps them after
each run, and a run's CPU is every process it started (the servers, DVC, the stages, the warm
process and its forks). Per run: % of the ideal (whole run, and through refine), CPU, wall, the load
average before it, and the stages the warm log counts warm; the pair's order alternates.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
PR_SET_CHILD_SUBREAPER = 36
RESULT = re.compile(r"run ([\d.]+) s, ideal ([\d.]+) s: ([\d.]+)% of ideal")
REFINE = re.compile(r"through refine .*?([\d.]+)% of ideal")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap(deadline_s: float = 10.0) -> int:
    """Every orphan handed to this process reaped (the warm process ends with DVC); how many."""
    reaped, deadline = 0, time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            time.sleep(0.02)
        else:
            reaped += 1
    raise SystemExit("a process of the run outlived it by 10 s")


def run(warm: bool, scale_args: tuple[str, ...], keep: Path | None = None) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory(prefix="dvc-warm-bench-") as folder:
        log = Path(folder) / "warm.log"
        env = {**os.environ, "JUDGELOOP_WARM": "1" if warm else "0", "JUDGELOOP_WARM_LOG": str(log)}
        load, before, started = os.getloadavg()[0], _cpu(), time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "scale.py"), "--no-replay", *scale_args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        reaped = _reap()
        wall, cpu = time.perf_counter() - started, _cpu() - before
        lines = log.read_text().splitlines() if log.exists() else []
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    if keep is not None:  # scale.py's own report of the run: each stage's share, its head and tail
        keep.write_text(done.stdout + "\n".join(lines) + "\n")
    whole, refine = RESULT.search(done.stdout), REFINE.search(done.stdout)
    assert whole is not None and refine is not None, done.stdout
    return {
        "kind": "warm" if warm else "cold",
        "pct": float(whole[3]),
        "refine": float(refine[1]),
        "run_s": float(whole[1]),
        "cpu": cpu,
        "wall": wall,
        "load": load,
        "warm_stages": str(
            sum(line.startswith("warm ") and not line.startswith("warm process ") for line in lines)
        ),
        "reaped": str(reaped),
    }


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--pairs", type=int, default=4, show_default=True)
@click.option("--logs", type=click.Path(path_type=Path), help="Keep each run's report in this folder.")
@click.argument("scale_args", nargs=-1, type=click.UNPROCESSED)
def main(pairs: int, logs: Path | None, scale_args: tuple[str, ...]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed: the warm process's CPU would not count")
    click.echo("pair kind  % ideal  through refine  run s   CPU s  bench wall s  load  warm stages")
    for pair in range(1, pairs + 1):
        order = (True, False) if pair % 2 else (False, True)
        for warm in order:
            keep = None
            if logs is not None:
                logs.mkdir(parents=True, exist_ok=True)
                keep = logs / f"pair{pair}-{'warm' if warm else 'cold'}.txt"
            r = run(warm, scale_args, keep)
            click.echo(
                f"{pair:4d} {r['kind']:5s} {r['pct']:7.1f} {r['refine']:15.1f} {r['run_s']:6.2f} "
                f"{r['cpu']:7.2f} {r['wall']:13.1f} {r['load']:5.1f}  {r['warm_stages']}"
            )


if __name__ == "__main__":
    main()
