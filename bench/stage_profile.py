"""Where a replay's time goes: per stage, in DVC, and in `judgeloop check`, on the committed demos.

    .venv/bin/python bench/stage_profile.py              # every stage of every design
    .venv/bin/python bench/stage_profile.py --repeat 3   # each measurement 3 times (the best kept)

It copies the committed project (code, params.yaml, dvc.yaml, dvc.lock, data, recordings, outputs)
into a temporary git + DVC project and measures, in cache mode replay (no model):

* per stage, `python -m stages DESIGN STAGE` in a process of its own, as DVC runs it: wall and CPU
  time (user + system), and under cProfile where its time went: importing (until the stage starts),
  the progress line's dry run, reading and verifying recordings (of which: re-deriving each record's
  key and checksum, and hashing the folder against its pin in dvc.lock), the step itself, writing
  its outputs and its recording, and the report of a stage that calls no model;
* `dvc status` (DVC hashing every dep and out) and `dvc repro --force` of every stage (what
  `make replay` runs), against the sum of the stage processes: DVC's own share;
* `judgeloop check`, every stage in one process.

An LLM stage's head in a live run (its process's start to its first request to the model, the
backend's build and pre-flight included, which a replay never reaches) is bench/stage_head.py's.

The machine is shared: wall times vary with its load, CPU times less. Run it twice (the verified
recordings' memo, .judgeloop/verified, is empty on the first run and full on the second; so is
DVC's hash cache) and compare runs made in the same minute.

Measured 2026-11-26 on the 2-core development machine shared by eight engineers (load average
19-26: wall times 5-10 times a quiet machine's; CPU is user + system), main (513ace3) against
issue 31's branch, one after the other, --no-stages:

                                    before                      after
    dvc repro --force (make replay) 45.4, 44.3 s CPU (411, 312)  26.9, 24.4 s CPU (214, 124 s wall)
    judgeloop check                 (none)                       7.3, 7.4 s CPU (50, 31 s wall)
    dvc status                      1.8, 1.9 s CPU               1.8, 1.7 s CPU

Per stage (the table, before, load 12-20, CPU of each stage's process): rag_aggregate 28.9 s and
summeval_calibrate 18.4 s under cProfile (scipy's mannwhitneyu, spearmanr, kendalltau, pearsonr
in their bootstraps, 8,000-28,000 calls each, most of it their array-API and NaN-policy
wrappers), every LLM stage 0.6-0.9 s, of which importing 0.3-0.4 s, reading and verifying every
recording (replay resolves the model's identity from all of them) and hashing each against its
pin about half, the dry run and the step each about 0.1 s, writing 0.05 s. The same stages on
their own, without the profiler, before -> after (load 22): summeval_calibrate 9.7 -> 3.6 s CPU,
rag_aggregate 14.5 -> 1.8 s, the paper's judge 0.5 s either way (alone it reads every recording
for the first time; in a replay the later stages find them verified).
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROJECT = (
    "pipeline",
    "stages",
    "params.yaml",
    "dvc.yaml",
    "dvc.lock",
    ".dvcignore",
    "data",
    "recordings",
    "outputs",
)
REPLAY = {"JUDGELOOP_CACHE_MODE": "replay"}

# Phases, by (file ending, function): their cumulative time in a stage's profile.
PHASES = {
    "dry run": ("pipeline/tools/status/probe.py", "probe_stage"),
    "read recordings": ("pipeline/llm/recordings/stage_read.py", "read"),
    "verify records": ("pipeline/llm/records.py", "problem"),
    "pin hash": ("pipeline/llm/recordings/pins.py", "problem"),
    "run": ("stages/runner.py", "run_stage"),  # the whole stage after its imports
    "write recording": ("pipeline/llm/recordings/stage_writer.py", "write"),
    "write results": ("pipeline/data/jsonl.py", "write_jsonl"),
}


def profile_stage(design: str, stage: str, out: Path) -> None:
    """In the stage's own process: import, run and profile the stage; write the phases to `out`."""
    began = time.perf_counter()
    from stages.runner import load, run_stage

    load(design, stage)
    imported = time.perf_counter() - began
    profiler = cProfile.Profile(time.process_time)  # CPU time: the machine is shared
    with contextlib.suppress(SystemExit):
        profiler.runcall(run_stage, design, stage)
    stats = pstats.Stats(profiler)
    phases = {"import": imported}
    for name, (ending, function) in PHASES.items():
        rows = stats.stats.items()  # type: ignore[attr-defined]
        phases[name] = sum(
            row[3] for (file, _, func), row in rows if file.endswith(ending) and func == function
        )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    phases["cpu"] = usage.ru_utime + usage.ru_stime
    out.write_text(json.dumps(phases))


@dataclass
class Timed:
    wall: float
    cpu: float


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return Timed(wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def best(runs: list[Timed]) -> Timed:
    return min(runs, key=lambda t: t.wall)


def project(root: Path) -> None:
    for name in PROJECT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", ".*.tmp"))
        elif source.exists():
            shutil.copy2(source, root / name)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pipeline", "stages"], cwd=root, check=True)
    for args in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(args, cwd=root, check=True)
    shutil.copy(ROOT / ".dvc" / "config", root / ".dvc" / "config")  # as the repository: analytics off
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "bench"],
        cwd=root,
        check=True,
    )


def stages_of(root: Path) -> list[tuple[str, str]]:
    spec = yaml.safe_load((root / "dvc.yaml").read_text())
    found = []
    for name, stage in spec["stages"].items():
        words = stage["cmd"].split()
        found.append((words[3], name) if words[2] == "stages" else ("", name))
    return found


def stage_rows(root: Path, env: dict[str, str], repeat: int) -> list[dict[str, float | str]]:
    rows: list[dict[str, float | str]] = []
    for design, stage in stages_of(root):
        if not design:  # the report index: `python -m stages.index`
            run = best([timed([sys.executable, "-m", "stages.index"], root, env) for _ in range(repeat)])
            rows.append({"stage": stage, "wall": run.wall, "cpu": run.cpu})
            continue
        attempts = []
        for _ in range(repeat):
            out = root / ".judgeloop" / f"profile-{stage}.json"
            out.parent.mkdir(exist_ok=True)
            code = (
                f"import sys; sys.path.append({str(ROOT)!r}); from bench.stage_profile import profile_stage; "
            )
            code += f"profile_stage({design!r}, {stage!r}, __import__('pathlib').Path({str(out)!r}))"
            run = timed([sys.executable, "-c", code], root, env)
            attempts.append((run, json.loads(out.read_text())))
        run, phases = min(attempts, key=lambda a: a[0].wall)
        rows.append({"stage": stage, "wall": run.wall, "cpu": run.cpu, **phases})
    return rows


COLUMNS = (
    *("wall", "cpu", "import", "run", "dry run", "read recordings", "verify records", "pin hash"),
    *("write recording", "write results"),
)


def show(rows: list[dict[str, float | str]]) -> None:
    click.echo("per stage, in its own process: wall and CPU (s); the phases: CPU under cProfile (slower)")
    click.echo(f"{'stage':20s}" + "".join(f"{c.split()[-1][:9]:>10s}" for c in COLUMNS))
    for row in rows:
        cells = "".join(f"{row[c]:10.2f}" if c in row else f"{'':10s}" for c in COLUMNS)
        click.echo(f"{row['stage']!s:20s}{cells}")
    wall = sum(float(r["wall"]) for r in rows)
    cpu = sum(float(r["cpu"]) for r in rows)
    click.echo(f"{'sum':20s}{wall:10.2f}{cpu:10.2f}")


@click.command()
@click.option("--repeat", default=1, show_default=True, help="Runs of each measurement (the fastest kept).")
@click.option("--keep", type=click.Path(path_type=Path), help="Leave the project in this new folder.")
@click.option("--no-stages", is_flag=True, help="Only DVC and the check, not each stage on its own.")
def main(repeat: int, keep: Path | None, no_stages: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        project(root)
        bin_dir = str(Path(sys.executable).parent)
        env = {**os.environ, **REPLAY, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        env.pop("JUDGELOOP_CACHE_DIR", None)
        click.echo(f"load average {os.getloadavg()[0]:.1f} at the start")
        if not no_stages:
            show(stage_rows(root, env, repeat))
        dvc = [sys.executable, "-m", "dvc"]
        status = best([timed([*dvc, "status"], root, env) for _ in range(repeat)])
        repro = best([timed([*dvc, "repro", "--force"], root, env) for _ in range(repeat)])
        status_after = best([timed([*dvc, "status"], root, env) for _ in range(repeat)])
        check = [*dvc[:1], "-m", "pipeline.tools.cli", "check"]
        has_check = (root / "pipeline" / "tools" / "check.py").is_file()  # not before issue 31
        checked = best([timed(check, root, env) for _ in range(repeat)]) if has_check else Timed(0.0, 0.0)
        diff = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True
        ).stdout
        click.echo(f"dvc status                    wall {status.wall:6.2f} s  cpu {status.cpu:6.2f} s")
        click.echo(f"dvc repro --force (replay)    wall {repro.wall:6.2f} s  cpu {repro.cpu:6.2f} s")
        click.echo(
            f"dvc status after the repro    wall {status_after.wall:6.2f} s  cpu {status_after.cpu:6.2f} s"
        )
        click.echo(f"judgeloop check               wall {checked.wall:6.2f} s  cpu {checked.cpu:6.2f} s")
        click.echo(f"files the replay changed: {diff.strip() or 'none (byte-identical)'}")
        click.echo(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
