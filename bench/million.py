"""The paper's design at 10k, 100k and 1M calls on the fake backend: what each part costs as a run grows.

    nice -n 10 .venv/bin/python bench/million.py --calls 10000 --calls 100000
    nice -n 10 .venv/bin/python bench/million.py --calls 1000000 --keep /tmp/million   # once, ~GBs of disk

A synthetic experiment of realistic shape: N interviews of about 20 kB each (every one of an item's
calls carries its transcript: the assessment, four judge metrics, each refinement round and its
re-judging), the paper's text protocol, replies of a few hundred tokens, and the experiment responder
(pipeline.testing.judge_responder: first assessments score low on some metrics, so refinement runs;
every seventh judge reply forgets its score, so re-asks run). The number of interviews is chosen for
the number of calls asked (about 11 calls an interview).

Each step runs in a process of its own, so its peak memory (ru_maxrss, from wait4) is its own:

    record   the three LLM stages in process (no DVC), live on the fake backend: calls/s
    replay   the same stages with an empty local cache, cache.mode replay: every call read from the
             recordings (and seeded into the local cache), each recording written again: calls/s;
             the recordings must come back byte-identical
    status   `judgeloop status --all --offline`: every stage dry-run against cache and recordings
    audit    `judgeloop audit` of one call (item, iteration, metric), of the same call by its key
             (--key: the one shard of calls that holds it) and of one item (all its calls)
    verify   `judgeloop cache verify`: every key re-derived, local cache and recordings
    gc       `judgeloop cache gc`: nothing to collect, every recording read for the keys it keeps
    report   the paper's aggregate stage: metrics, report.md and the HTML report with a page per item

and the bytes on disk per call: the recordings (git's or DVC's share), the local cache, and the
interviews themselves (the unique text every prompt repeats). The table gives each size and the
growth factor per 10x calls (1.0: constant per call... 10.0: linear in the run for a time).
Results measured on the 2-core shared machine are in bench/README.md.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.testing.synthetic import audit_one_judgement, items_for, make_project, run_stages

ROOT = Path(__file__).resolve().parents[1]


def measured(args: list[str], cwd: Path, code: Path = ROOT) -> tuple[float, int, str, float]:
    """Run a command (judgeloop's code from `code`); its wall time (s), peak memory (bytes), stdout's
    last line and CPU time (s, user and system: on a shared, loaded machine the figure to compare)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise click.ClickException(f"{' '.join(args)} failed:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    lines = stdout.strip().splitlines()
    return elapsed, usage.ru_maxrss * 1024, lines[-1] if lines else "", usage.ru_utime + usage.ru_stime


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def bench_size(root: Path, calls_wanted: int, chars: int) -> dict[str, Any]:
    items = items_for(calls_wanted)
    make_project(root, items, chars, ROOT / "params.yaml")
    me = [sys.executable, str(Path(__file__).resolve())]
    cli = [sys.executable, "-m", "pipeline.tools.cli"]
    row: dict[str, Any] = {"items": items}
    wall, peak, last, cpu = measured([*me, "stages", str(root), "auto"], root)
    calls = int(last)
    row.update(calls=calls, record_s=wall, record_rss=peak, record_cpu=cpu)
    recorded = snapshot(root / "recordings")
    row["recordings_bytes"] = folder_bytes(root / "recordings")
    row["data_bytes"] = folder_bytes(root / "data")
    shutil.rmtree(root / ".judgeloop")
    wall, peak, last, cpu = measured([*me, "stages", str(root), "replay"], root)
    if int(last) != calls or snapshot(root / "recordings") != recorded:
        raise click.ClickException("the replay did not give the recorded calls back byte-identically")
    del recorded
    row.update(replay_s=wall, replay_rss=peak, replay_cpu=cpu)
    row["cache_bytes"] = folder_bytes(root / ".judgeloop" / "cache")
    steps = {
        "status": [*cli, "status", "--all", "--offline"],
        **audit_steps(root, items),
        "verify": [*cli, "cache", "verify"],
        "gc": [*cli, "cache", "gc"],
        "report": [sys.executable, "-m", "stages", "paper", "aggregate"],
    }
    for name, args in steps.items():
        wall, peak, _, cpu = measured(args, root)
        row.update({f"{name}_s": wall, f"{name}_rss": peak, f"{name}_cpu": cpu})
    return row


def audit_steps(root: Path, items: int, *, by_key: bool = True) -> dict[str, list[str]]:
    """The audit steps: one judgement by its item, iteration and metric, the same by its key, and
    every call of its item."""
    cli = [sys.executable, "-m", "pipeline.tools.cli"]
    item, audit_call = audit_one_judgement(items)
    steps = {"audit_call": [*cli, *audit_call]}
    if by_key:
        steps["audit_key"] = [*cli, "audit", "--key", judgement_key(root, audit_call)]
    steps["audit_item"] = [*cli, "audit", "--item", item]
    return steps


def judgement_key(root: Path, audit_call: list[str]) -> str:
    """The key of the call `audit_call` shows, found here (not timed)."""
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", *audit_call, "--format", "jsonl"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    [line] = out.splitlines()
    key: str = json.loads(line)["key"]
    return key


Shown = Callable[[dict[str, Any]], str]
COLUMNS: tuple[tuple[str, str, Shown], ...] = (
    ("calls", "calls", lambda r: f"{r['calls']:,}"),
    ("record", "calls/s", lambda r: f"{r['calls'] / r['record_s']:,.0f}"),
    ("replay", "calls/s", lambda r: f"{r['calls'] / r['replay_s']:,.0f}"),
    ("status", "s", lambda r: f"{r['status_s']:.1f}"),
    ("audit call", "s", lambda r: f"{r['audit_call_s']:.2f}"),
    ("audit key", "s", lambda r: f"{r['audit_key_s']:.2f}"),
    ("audit item", "s", lambda r: f"{r['audit_item_s']:.2f}"),
    ("verify", "s", lambda r: f"{r['verify_s']:.1f}"),
    ("gc", "s", lambda r: f"{r['gc_s']:.1f}"),
    ("report", "s", lambda r: f"{r['report_s']:.1f}"),
)
MEMORY = ("record", "replay", "status", "audit_call", "audit_key", "audit_item", "verify", "gc", "report")
BYTES = (("recordings", "recordings_bytes"), ("local cache", "cache_bytes"), ("interviews", "data_bytes"))


def table(rows: list[dict[str, Any]]) -> str:
    out = ["time          " + "".join(f"{name:>12}" for name, _, _ in COLUMNS)]
    out += ["              " + "".join(f"{unit:>12}" for _, unit, _ in COLUMNS)]
    out += ["              " + "".join(f"{show(r):>12}" for _, _, show in COLUMNS) for r in rows]
    out += ["CPU time (s)    " + "".join(f"{name:>12}" for name in MEMORY)]
    out += [f"{r['calls']:>16,}" + "".join(f"{r[f'{name}_cpu']:>12,.1f}" for name in MEMORY) for r in rows]
    out += ["peak memory (MB)" + "".join(f"{name:>12}" for name in MEMORY)]
    out += [
        f"{r['calls']:>16,}" + "".join(f"{r[f'{name}_rss'] / 2**20:>12,.0f}" for name in MEMORY) for r in rows
    ]
    out += ["bytes a call    " + "".join(f"{name:>14}" for name, _ in BYTES)]
    out += [
        f"{r['calls']:>16,}" + "".join(f"{r[key] / r['calls']:>14,.0f}" for _, key in BYTES) for r in rows
    ]
    for before, after in itertools.pairwise(rows):
        scale = after["calls"] / before["calls"]
        growth = {
            # ratio ** (1 / log10(scale)): the factor per 10x calls of a power law through both sizes
            key.removesuffix("_s"): (after[key] / before[key]) ** (1 / math.log10(scale))
            for key in after
            if key.endswith(("_s", "_rss", "_cpu"))
        }
        out.append(
            f"growth per 10x calls, {before['calls']:,} -> {after['calls']:,} (10 = linear): "
            + ", ".join(f"{key} {value:.1f}" for key, value in growth.items())
        )
    return "\n".join(out)


@click.group(invoke_without_command=True)
@click.option(
    "--calls", "sizes", type=int, multiple=True, help="A run of about this many calls (repeatable)."
)
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option(
    "--keep", type=click.Path(file_okay=False, path_type=Path), help="Build the runs here and keep them."
)
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the rows here.")
@click.pass_context
def main(
    ctx: click.Context, sizes: tuple[int, ...], chars: int, keep: Path | None, json_out: Path | None
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    rows = []
    for size in sizes or (10_000, 100_000):
        base = keep or Path(tempfile.mkdtemp(prefix="judgeloop-million-"))
        root = base / f"calls-{size}"
        root.mkdir(parents=True)
        load = os.getloadavg()
        try:
            row = bench_size(root, size, chars)
        finally:
            if keep is None:
                shutil.rmtree(base, ignore_errors=True)
        row["load"] = (load, os.getloadavg())
        rows.append(row)
        click.echo(json.dumps(row), err=True)
    if json_out is not None:
        json_out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    click.echo(table(rows))


@main.command("stages", hidden=True)
@click.argument("root", type=click.Path(file_okay=False, path_type=Path))
@click.argument("mode")
def stages_command(root: Path, mode: str) -> None:
    """The three LLM stages in this process (a step of the bench, for its own peak memory)."""
    click.echo(run_stages(root, mode))


@main.command("audits")
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--code",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=ROOT,
    help="judgeloop's code to run (a checkout of another commit, for a before/after).",
)
@click.option("--no-key", is_flag=True, help="No audit --key step (code from before it existed).")
@click.option("--repeat", type=int, default=3, show_default=True)
def audits_command(root: Path, code: Path, no_key: bool, repeat: int) -> None:
    """Only the audit steps, on a run kept with --keep (ROOT: its calls-N folder): CPU s and peak MB."""
    items = sum(1 for _ in (root / "data").glob("*_P"))  # an interview's folder each (make_project)
    for name, args in audit_steps(root, items, by_key=not no_key).items():
        for _ in range(repeat):
            wall, peak, _, cpu = measured(args, root, code.resolve())
            click.echo(f"{name:<12} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak {peak / 2**20:6.0f} MB")


if __name__ == "__main__":
    main()
