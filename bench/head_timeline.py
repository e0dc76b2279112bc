"""Each LLM stage's cold head as a timeline: from its process's start (the kernel's clock) to its first
request to the model, the wall time and the process's CPU (user + sys) at each step it passes, with
no profiler (issue 31: plain `dvc repro` starts each stage as a fresh `python -m stages`).

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/head_timeline.py --keep /tmp/heads
    .venv/bin/python bench/head_timeline.py --keep /tmp/heads --code main=/work/main --code branch=. \
        --rounds 5

It uses bench/stage_head.py's snapshots (the 133-item paper project as each LLM stage finds it in a
fresh `dvc repro`, built in --keep at the first run) and its copy of a checkout's pipeline/ and
stages/, and runs `python -m stages paper STAGE` there under a probe that marks each step and stops
the process at its first `POST /api/chat`. Steps (each mark: when it is first reached):

    python up        the probe's first line (the interpreter and site are done)
    runner imported  `import stages.runner` done (click, pydantic, the settings' models, the design's base)
    design loaded    the design and the stage's code imported (runner.load)
    params read      params.yaml read and validated
    inputs read      the interviews and the earlier stages' results (the session is opened next)
    session opened   the recorded session (its dvc.lock check) and the staged output; the dry run starts
    GET /api/tags    the dry run's backend built (httpx, the Ollama client) and the model asked its digest
    identity         the model's identity resolved
    decided          the dry run met a call for the model (at its first miss: the other stages'
                     recordings read and verified): the step starts
    first request    the step's first POST /api/chat

Codes alternate within each round; the machine is shared, so CPU compares and wall much less.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

os.environ.setdefault("JUDGELOOP_BENCH_MEDIAN_S", "0.1")
os.environ.setdefault("JUDGELOOP_BENCH_FIXED", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import scale, stage_head  # after the latency is set, for the server's process

STEPS = (
    "python up",
    "runner imported",
    "design loaded",
    "params read",
    "inputs read",
    "session opened",
    "GET /api/tags",
    "identity",
    "decided",
    "first request",
)

# Run in the stage's process as `python -c PROBE paper STAGE`: the marks to HEAD_TIMELINE_OUT, then
# exit at the first chat request.
PROBE = r"""
import os, resource, time
def _started():
    ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
    uptime = float(open("/proc/uptime").read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
START = _started()
marks = {}
def mark(name):
    if name not in marks:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        marks[name] = (time.time() - START, usage.ru_utime + usage.ru_stime)
mark("python up")
import json, socket, sys, threading
_send = socket.socket.send
def _probe_send(self, data, *args):
    head = bytes(data[:15])
    if head.startswith(b"GET /api/tags"):
        mark("GET /api/tags")
    if head == b"POST /api/chat ":
        mark("first request")
        with open(os.environ["HEAD_TIMELINE_OUT"], "w") as out:
            json.dump(marks, out)
        os._exit(0)
    return _send(self, data, *args)
socket.socket.send = _probe_send
import stages.runner as runner
mark("runner imported")
def _after(function, name):
    def marked(*args, **kwargs):
        result = function(*args, **kwargs)
        mark(name)
        return result
    return marked
def _before(function, name):
    def marked(*args, **kwargs):
        mark(name)
        return function(*args, **kwargs)
    return marked
runner.load = _after(runner.load, "design loaded")
runner.Design.load_params = _after(runner.Design.load_params, "params read")
import pipeline.llm.stage as llm_stage
llm_stage.recorded_session = _before(llm_stage.recorded_session, "inputs read")
_prediction_init = runner.Prediction.__init__
def _prediction(self, *args, **kwargs):
    mark("session opened")
    _prediction_init(self, *args, **kwargs)
    self.decided.set = _before(self.decided.set, "decided")
runner.Prediction.__init__ = _prediction
import pipeline.llm.session as session
_identity = session.LLMSession.identity.fget
session.LLMSession.identity = property(_after(_identity, "identity"))
sys.argv = ["stages", *sys.argv[1:]]
runner.main()
"""


def measure(keep: Path, label: str, code: Path, stage: str, server: scale.SlotServer) -> dict[str, Any]:
    root = stage_head.prepare(keep, stage, code, server)
    out = keep / f"timeline-{label}-{stage}.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["HEAD_TIMELINE_OUT"] = str(out)
    env.pop("JUDGELOOP_CACHE_MODE", None)
    load = float(Path("/proc/loadavg").read_text().split()[0])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "paper", stage], cwd=root, env=env, capture_output=True, text=True
    )
    if not out.exists():
        raise SystemExit(f"{label} {stage}: no first request\n{done.stdout}\n{done.stderr}")
    time.sleep(0.2)  # the server's replies to the abandoned requests, off the next measurement
    return {"code": label, "stage": stage, "load": load, "marks": json.loads(out.read_text())}


def cell(rows: list[dict[str, Any]], stage: str, label: str, step: str) -> str:
    """The median wall and CPU at `step` over the rounds of `label`'s `stage` (nan: never reached)."""
    at = [r["marks"][step] for r in rows if r["stage"] == stage and r["code"] == label and step in r["marks"]]
    wall = statistics.median(a[0] for a in at) if at else float("nan")
    cpu = statistics.median(a[1] for a in at) if at else float("nan")
    return f"{wall:8.3f} /{cpu:7.3f}"


def show(rows: list[dict[str, Any]]) -> None:
    labels = list(dict.fromkeys(row["code"] for row in rows))
    stages = list(dict.fromkeys(row["stage"] for row in rows))
    loads = [row["load"] for row in rows]
    click.echo(
        f"medians over rounds (load {min(loads):.1f}-{max(loads):.1f}); wall s / process CPU s at each step"
    )
    for stage in stages:
        click.echo(f"\n{stage:16s}" + "".join(f" {label:>17s}" for label in labels))
        for step in STEPS:
            click.echo(f"{step:16s}" + "".join(f" {cell(rows, stage, label, step):>17s}" for label in labels))
    click.echo("\nfirst request, each round: wall / CPU")
    for stage in stages:
        for label in labels:
            at = [r["marks"]["first request"] for r in rows if r["stage"] == stage and r["code"] == label]
            click.echo(f"  {stage:7s} {label:8s} " + ", ".join(f"{w:.3f}/{c:.3f}" for w, c in at))


@click.command()
@click.option("--keep", type=click.Path(path_type=Path), required=True, help="stage_head.py's snapshots.")
@click.option("--code", "codes", multiple=True, help="NAME=DIR: a checkout whose pipeline/ and stages/ run.")
@click.option("--rounds", default=3, show_default=True)
@click.option(
    "--stage", "stages", multiple=True, type=click.Choice(stage_head.STAGES), help="Default: all three."
)
def main(keep: Path, codes: tuple[str, ...], rounds: int, stages: tuple[str, ...]) -> None:
    if not scale.corpus().is_dir():
        raise SystemExit(f"the AnnoMI corpus is not at {scale.corpus()} (set JUDGELOOP_SHARED)")
    checkouts = [(c.partition("=")[0], Path(c.partition("=")[2]).resolve()) for c in codes]
    checkouts = checkouts or [("this", stage_head.ROOT)]
    keep.mkdir(parents=True, exist_ok=True)
    server = scale.SlotServer(4)
    server.__enter__()
    try:
        if not (keep / "before-refine").exists():
            stage_head.build_snapshots(keep, server)
        rows = []
        for round_ in range(rounds):
            for label, code in checkouts if round_ % 2 == 0 else checkouts[::-1]:
                for stage in stages or stage_head.STAGES:
                    rows.append(measure(keep, label, code, stage, server))
                    wall, cpu = rows[-1]["marks"]["first request"]
                    click.echo(
                        f"  {label} {stage} round {round_}: wall {wall:.3f} s, cpu {cpu:.3f} s", err=True
                    )
    finally:
        server.__exit__()
    (keep / "timeline.json").write_text(json.dumps(rows, indent=1))
    show(rows)


if __name__ == "__main__":
    main()
