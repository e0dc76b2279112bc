"""Each LLM stage's head, profiled by CPU: from its process's start to its first request to the model,
as `dvc repro` runs it in the 133-item paper experiment (bench/scale.py's project and server).

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/stage_head.py --keep /tmp/heads
    .venv/bin/python bench/stage_head.py --keep /tmp/heads --code main=/tmp/main --code branch=. --rounds 3

The first run builds, in --keep, the project as each LLM stage finds it when DVC starts it in a
fresh `dvc repro` (bench/scale.py's project, one 4-slot fake Ollama, every reply 100 ms):
before-assess (nothing run), before-judge (`dvc repro assess` done: its results, its recording,
dvc.lock pinning it, the local cache) and before-refine (`dvc repro judge` done). Later runs reuse
them.

Each measurement copies a snapshot, puts one checkout's pipeline/ and stages/ in it (--code
NAME=DIR; byte-compiled first, as a checkout that has run before), points params.yaml at this run's
server, and runs `python -m stages paper STAGE` there under a probe that stops the process at its
first `POST /api/chat`. The probe profiles every thread with cProfile timed by that thread's own
CPU clock (the machine is shared: wall time says more about the others' load than about the stage),
so a function's time is the CPU its thread spent in it. It reports: the process's CPU at the first
request (user + system, the interpreter's start included), each thread's CPU, and the phases below
(inclusive CPU seconds, summed over threads; phases nest, so they do not add up). The profiles are
left in --keep/profiles/CODE-STAGE-ROUND-THREAD.prof. Codes alternate within each round.
"""

from __future__ import annotations

import json
import os
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import yaml

os.environ.setdefault("JUDGELOOP_BENCH_MEDIAN_S", "0.1")
os.environ.setdefault("JUDGELOOP_BENCH_FIXED", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import scale  # after the latency is set, for the server's process

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("assess", "judge", "refine")

# Run in the stage's process as `python -c PROBE paper STAGE`: per-thread CPU profiles until the
# first chat request is sent, then the numbers to STAGE_HEAD_OUT and exit at once.
PROBE = r"""
import resource, time
_start = resource.getrusage(resource.RUSAGE_SELF)
import cProfile, functools, json, marshal, os, runpy, socket, sys, threading
OUT = os.environ["STAGE_HEAD_OUT"]
PROFILE = os.environ.get("STAGE_HEAD_PROFILE") == "1"
profilers = {}
ended = {}
def _profiler(name):
    name = f"{name}@{len(profilers)}"  # two sessions' pools may name their threads alike
    clock = time.pthread_getcpuclockid(threading.get_ident())
    profiler = cProfile.Profile(functools.partial(time.clock_gettime, clock))
    profilers[name] = (profiler, clock)
    return name, profiler
_run = threading.Thread.run
def _profiled_run(self):
    name, profiler = _profiler(self.name)
    if PROFILE:
        profiler.enable()
    try:
        _run(self)
    finally:
        profiler.disable()
        ended[name] = time.thread_time()
threading.Thread.run = _profiled_run
_first = threading.Lock()
_send = socket.socket.send
def _reached(thread):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    at = time.time()
    sys.setswitchinterval(1000)  # no other thread runs on while the profiles are taken (no I/O until then)
    cpu = {}
    for name, (profiler, clock) in list(profilers.items()):
        try:
            cpu[name] = time.clock_gettime(clock)
        except OSError:
            cpu[name] = ended.get(name, 0.0)
        if PROFILE:
            profiler.create_stats()
    for name, (profiler, clock) in list(profilers.items()) if PROFILE else ():
        with open(f"{OUT}-{name}.prof", "wb") as out:
            marshal.dump(profiler.stats, out)  # as taken above (dump_stats would take them again)
    record = {
        "at": at, "cpu": usage.ru_utime + usage.ru_stime, "threads": cpu, "sender": thread,
        "start_cpu": _start.ru_utime + _start.ru_stime, "modules": sorted(sys.modules),
    }
    with open(f"{OUT}.json", "w") as out:
        json.dump(record, out)
    os._exit(0)
def _probe_send(self, data, *args):  # httpcore's sync stream writes by send()
    if bytes(data[:15]) == b"POST /api/chat " and _first.acquire(blocking=False):
        _reached(threading.current_thread().name)
    return _send(self, data, *args)
socket.socket.send = _probe_send
sys.argv = ["stages", *sys.argv[1:]]
_name, _main = _profiler("MainThread")
if PROFILE:
    _main.enable()
runpy.run_module("stages", run_name="__main__", alter_sys=True)
"""

# (file ending, function): inclusive CPU, summed over threads. Nested: "imports" holds every import
# wherever made (also inside the others); "identity" holds "backend built".
PHASES = {
    "imports, wherever made": ("<frozen importlib._bootstrap>", "_find_and_load"),
    "import stages.runner": ("stages/runner.py", "<module>"),
    "design and stage loaded": ("stages/runner.py", "load"),
    "params read": ("pipeline/experiments/design.py", "load_params"),
    "inputs read (interviews, results)": ("pipeline/data/transcripts.py", "index_transcripts"),
    "inputs: earlier results": ("stages/runner.py", "__call__"),
    "recording pinned? (dvc.lock)": ("pipeline/llm/stage.py", "check_recordings_here"),
    "session opened": ("pipeline/llm/session.py", "open_session"),
    "dry run, to the first send": ("stages/runner.py", "dry_run"),
    "identity (backend + GET /api/tags)": ("pipeline/llm/model_identity.py", "resolve_identity"),
    "backend built (httpx, client)": ("pipeline/llm/backends/__init__.py", "make_backend"),
    "other recordings read (first miss)": ("pipeline/llm/recordings/stage_read.py", "read"),
    "scores read (dry run's placeholders)": ("pipeline/judges/scores/extract.py", "extract_score"),
}


def build_snapshots(keep: Path, server: scale.SlotServer) -> None:
    work = keep / "work"
    scale.project(work, [server], None)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    shutil.copytree(work, keep / "before-assess", symlinks=True)
    for done, following in (("assess", "judge"), ("judge", "refine")):
        subprocess.run([sys.executable, "-m", "dvc", "repro", done], cwd=work, env=env, check=True)
        shutil.copytree(work, keep / f"before-{following}", symlinks=True)
    shutil.rmtree(work)


def prepare(keep: Path, stage: str, code: Path, server: scale.SlotServer) -> Path:
    """A copy of the snapshot before `stage`, with `code`'s pipeline/ and stages/, its params at `server`."""
    root = keep / "run"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(keep / f"before-{stage}", root, symlinks=True)
    for name in ("pipeline", "stages"):
        shutil.rmtree(root / name)
        shutil.copytree(code / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pipeline", "stages"], cwd=root, check=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["llm"].update(scale.llm_params([server]))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def phases(profiles: list[Path]) -> dict[str, float]:
    found = dict.fromkeys(PHASES, 0.0)
    for path in profiles:
        rows = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
        for name, (ending, function) in PHASES.items():
            found[name] += sum(
                row[3] for (file, _, func), row in rows.items() if file.endswith(ending) and func == function
            )
    return found


def measure(
    keep: Path, label: str, code: Path, stage: str, round_: int, server: scale.SlotServer, profile: bool
) -> dict[str, Any]:
    root = prepare(keep, stage, code, server)
    out = keep / "profiles" / f"{label}-{stage}-{round_}"
    out.parent.mkdir(exist_ok=True)
    for stale in out.parent.glob(f"{out.name}[-.]*"):
        stale.unlink()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["STAGE_HEAD_OUT"] = str(out)
    env["STAGE_HEAD_PROFILE"] = "1" if profile else "0"
    env.pop("JUDGELOOP_CACHE_MODE", None)
    load = float(Path("/proc/loadavg").read_text().split()[0])
    began = time.time()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "paper", stage], cwd=root, env=env, capture_output=True, text=True
    )
    record_path = out.with_name(out.name + ".json")
    if not record_path.exists():
        raise SystemExit(f"{label} {stage}: no first request\n{done.stdout}\n{done.stderr}")
    record = json.loads(record_path.read_text())
    profiles = sorted(out.parent.glob(f"{out.name}-*.prof"))
    return {
        "code": label,
        "stage": stage,
        "round": round_,
        "load": load,
        "wall": record["at"] - began,
        **record,
        "phases": phases(profiles),
    }


def show(rows: list[dict[str, Any]]) -> None:
    head = f"{'code':8s} {'stage':7s} {'round':>5s} {'load':>5s} {'wall':>6s} {'cpu':>6s} {'start':>6s}"
    click.echo(f"{head}  threads")
    for row in rows:
        threads = ", ".join(f"{n} {c:.3f}" for n, c in sorted(row["threads"].items()))
        click.echo(
            f"{row['code']:8s} {row['stage']:7s} {row['round']:5d} {row['load']:5.1f} {row['wall']:6.2f} "
            f"{row['cpu']:6.3f} {row['start_cpu']:6.3f}  {threads} (sent by {row['sender']})"
        )
    click.echo("\nphases, CPU s under the profiler (median over rounds):")
    labels = sorted({(r["code"], r["stage"]) for r in rows})
    click.echo(f"{'phase':30s}" + "".join(f"{c[:6] + ' ' + s[:6]:>14s}" for c, s in labels))
    for phase in PHASES:
        cells = []
        for label in labels:
            values = sorted(r["phases"][phase] for r in rows if (r["code"], r["stage"]) == label)
            cells.append(f"{values[len(values) // 2]:14.3f}")
        click.echo(f"{phase:30s}" + "".join(cells))


@click.command()
@click.option("--keep", type=click.Path(path_type=Path), required=True, help="The snapshots and profiles.")
@click.option("--code", "codes", multiple=True, help="NAME=DIR: a checkout whose pipeline/ and stages/ run.")
@click.option("--rounds", default=1, show_default=True)
@click.option("--stage", "stages", multiple=True, type=click.Choice(STAGES), help="Default: all three.")
@click.option(
    "--profile/--no-profile", default=True, show_default=True, help="cProfile (CPU clocks) or only the CPU."
)
def main(keep: Path, codes: tuple[str, ...], rounds: int, stages: tuple[str, ...], profile: bool) -> None:
    if not scale.corpus().is_dir():
        raise SystemExit(f"the AnnoMI corpus is not at {scale.corpus()} (set JUDGELOOP_SHARED)")
    checkouts = [(c.partition("=")[0], Path(c.partition("=")[2]).resolve()) for c in codes]
    checkouts = checkouts or [("this", ROOT)]
    keep.mkdir(parents=True, exist_ok=True)
    server = scale.SlotServer(4)
    server.__enter__()
    try:
        if not (keep / "before-refine").exists():
            build_snapshots(keep, server)
        rows: list[dict[str, Any]] = []
        for round_ in range(rounds):
            for label, code in checkouts:
                for stage in stages or STAGES:
                    rows.append(measure(keep, label, code, stage, round_, server, profile))
                    click.echo(f"  {label} {stage} round {round_}: cpu {rows[-1]['cpu']:.3f} s", err=True)
    finally:
        server.__exit__()
    (keep / "results.json").write_text(json.dumps(rows, indent=1))
    show(rows)


if __name__ == "__main__":
    main()
