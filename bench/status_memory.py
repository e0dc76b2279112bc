"""Where `judgeloop status --all --offline` spends its memory: the command run in this process on a
project of bench/million.py's generator, with the process's memory by kind (/proc/self/smaps_rollup:
anonymous, file-backed) and glibc's heap (mallinfo2) at each stage's dry-run end, and before and
after its output is compared with the stage's file; then its CPU time, peak and output.

    nice -n 19 .venv/bin/python bench/status_memory.py --calls 10000 --root /tmp/status-10k
    CODE=/path/to/other/checkout .venv/bin/python bench/status_memory.py --root /tmp/status-10k

The project is built and recorded once under --root (local cache warm, as after a run); `--out`
keeps status's text, to compare two code versions' byte for byte (CODE: the checkout whose
pipeline is imported, this one by default).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import click

CODE = Path(os.environ.get("CODE", Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(CODE))

from bench.replay_memory import malloc_split, rollup  # noqa: E402
from pipeline.testing.synthetic import items_for, make_project, run_stages  # noqa: E402


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


@click.command()
@click.option("--calls", type=int, default=10_000, show_default=True, help="Calls, when --root is new.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Where status's text goes.")
def main(calls: int, root: Path, out: Path | None) -> None:
    if not (root / "data").is_dir():
        root.mkdir(parents=True, exist_ok=True)
        make_project(root, items_for(calls), 20_000, CODE / "params.yaml")
        click.echo(f"recorded {run_stages(root, 'auto')} calls")
    from click.testing import CliRunner

    from pipeline.tools.cli import main as cli
    from pipeline.tools.status import planner

    err = open("/dev/stderr", "w", buffering=1)  # noqa: SIM115 (CliRunner takes sys.stderr over)
    probe_stage = getattr(planner, "probe_stage")  # noqa: B009 (patched below: not exported)

    def probed(stage: str, *args: Any, **options: Any) -> Any:
        probe = probe_stage(stage, *args, **options)
        print(f"  {stage}: {rollup()} MB; peak {peak_mb()} MB\n    {malloc_split()}", file=err)
        return probe

    setattr(planner, "probe_stage", probed)  # noqa: B010
    os.chdir(root)
    started, wall = os.times(), time.perf_counter()
    result = CliRunner().invoke(cli, ["status", "--all", "--offline"], catch_exceptions=False)
    ended = os.times()
    if out is not None:
        out.write_text(result.output, encoding="utf-8")
    cpu = ended.user + ended.system - started.user - started.system
    click.echo(
        f"status --all --offline: {cpu:.1f} s CPU, {time.perf_counter() - wall:.1f} s wall, "
        f"peak {peak_mb():,} MB (ru_maxrss); at the end {rollup()} MB; load {os.getloadavg()[0]:.1f}",
        file=err,
    )


if __name__ == "__main__":
    main()
