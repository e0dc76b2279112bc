"""One plain `dvc repro` of bench/scale.py's 133-item project as a timeline of phases (issue 31):
DVC's start, and for each stage DVC's work before it (changed?, the run-cache look-up, its deps
hashed), the stage's process (head to its first request, its calls, its close after the last reply),
DVC's work after it (deps and outs hashed, dvc.lock rewritten), then DVC's end. Each phase's wall and
DVC's CPU in it (the main thread's), without a profiler.

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/dvc_timeline.py --keep /tmp/tl
    .venv/bin/python bench/dvc_timeline.py --keep /tmp/tl --show    # the table again

It runs bench/scale.py --no-replay --trace (its lost-time table gives each stage's slots idle in
its ramp, body and drain) with DVC started through a launcher that wraps DVC's own functions and
writes, at its exit, each call's start and end (time.time()) and the thread's CPU at both to
.judgeloop/dvc-timeline.json; scale's --trace gives each stage process's start, exit and CPU.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The launcher, written into the project and run as `python -m dvc_traced repro ...`.
LAUNCHER = r"""
import atexit, json, os, time
def _started():
    ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
    uptime = float(open("/proc/uptime").read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
EVENTS = [{"name": "process", "stage": "", "start": _started(), "end": time.time(),
           "cpu0": 0.0, "cpu1": time.thread_time()}]
def _wrap(owner, attribute, name):
    original = getattr(owner, attribute)
    def wrapped(*args, **kwargs):
        stage = next((getattr(a, "name", "") for a in args if type(a).__name__ == "PipelineStage"), "")
        event = {"name": name, "stage": stage, "start": time.time(), "cpu0": time.thread_time()}
        try:
            return original(*args, **kwargs)
        finally:
            event.update(end=time.time(), cpu1=time.thread_time())
            EVENTS.append(event)
    setattr(owner, attribute, wrapped)
def _dump():
    EVENTS.append({"name": "exit", "stage": "", "start": time.time(), "end": time.time(),
                   "cpu0": time.thread_time(), "cpu1": time.thread_time()})
    os.makedirs(".judgeloop", exist_ok=True)
    with open(".judgeloop/dvc-timeline.json", "w") as out:
        json.dump(EVENTS, out)
atexit.register(_dump)
from dvc.cli import main
import dvc.repo.reproduce as reproduce, dvc.stage as stage, dvc.stage.run as run
import dvc.stage.cache as cache
EVENTS.append({"name": "imported", "stage": "", "start": EVENTS[0]["end"], "end": time.time(),
               "cpu0": EVENTS[0]["cpu1"], "cpu1": time.thread_time()})
_wrap(stage.Stage, "reproduce", "stage")
_wrap(reproduce, "collect_stages", "collect")
_wrap(stage.Stage, "changed", "changed?")
_wrap(cache.StageCache, "restore", "run-cache look-up")
_wrap(stage.Stage, "save_deps", "deps hashed")
_wrap(stage.Stage, "save_outs", "outs hashed")
_wrap(stage.Stage, "commit", "commit")
_wrap(stage.Stage, "dump", "dvc.lock rewritten")
_wrap(run, "cmd_run", "process")
import sys
sys.exit(main(sys.argv[1:]))
"""


def phases(events: list[dict[str, Any]], traced: dict[str, dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(phase, wall s, CPU s) in the run's order: DVC's main thread's CPU, a stage process's own."""
    imported, ended = events[1], events[-1]
    stages = sorted((e for e in events if e["name"] == "stage"), key=lambda e: e["start"])
    rows = [
        ("dvc: process start to its imports", imported["end"] - events[0]["start"], imported["cpu1"]),
        (
            "dvc: repo, index, stages collected",
            stages[0]["start"] - imported["end"],
            stages[0]["cpu0"] - imported["cpu1"],
        ),
    ]
    for index, outer in enumerate(stages):
        name = outer["stage"]
        following = stages[index + 1] if index + 1 < len(stages) else ended
        inner = [e for e in events if e["stage"] == name and e["name"] != "stage"]
        inner = sorted(
            (e for e in inner if outer["start"] <= e["start"] < following["start"]), key=lambda e: e["start"]
        )
        process = next(e for e in inner if e["name"] == "process")
        rows.append(
            (f"{name}: dvc before", process["start"] - outer["start"], process["cpu0"] - outer["cpu0"])
        )
        rows += [
            (f"{name}:   {e['name']}", e["end"] - e["start"], e["cpu1"] - e["cpu0"])
            for e in _top(inner, process, True)
        ]
        line = traced.get(name, {"user": 0.0, "sys": 0.0})
        rows.append((f"{name}: process", process["end"] - process["start"], line["user"] + line["sys"]))
        rows.append(
            (f"{name}: dvc after", following["start"] - process["end"], following["cpu0"] - process["cpu1"])
        )
        rows += [
            (f"{name}:   {e['name']}", e["end"] - e["start"], e["cpu1"] - e["cpu0"])
            for e in _top(inner, process, False)
        ]
    return rows


def _top(events: list[dict[str, Any]], process: dict[str, Any], before: bool) -> list[dict[str, Any]]:
    """The events before (or after) the stage's process that are not inside another of them (deps
    hashed inside the run-cache look-up, say)."""
    side = [e for e in events if (e["end"] <= process["start"] if before else e["start"] >= process["end"])]
    return [
        e
        for e in side
        if not any(o is not e and o["start"] <= e["start"] and e["end"] <= o["end"] for o in side)
    ]


def busy_histogram(spans: list[list[float]], start: float, end: float, slots: int) -> list[float]:
    """Seconds of [start, end] with 0, 1, ... `slots` (or more) generations running at once."""
    events = sorted(
        [(max(a, start), 1) for a, b in spans if b > start and a < end]
        + [(min(b, end), -1) for a, b in spans if b > start and a < end]
    )
    seconds, busy, at = [0.0] * (slots + 1), 0, start
    for when, step in events:
        seconds[min(busy, slots)] += when - at
        busy, at = busy + step, when
    seconds[min(busy, slots)] += end - at
    return seconds


def tails(root: Path, slots: int = 4) -> None:
    """Per stage, from its first generation to its last reply: seconds with each number of slots
    busy, and its tail: from the last moment every slot was busy to the last reply."""
    kept = json.loads((root / ".judgeloop" / "spans.json").read_text())
    spans, marks = kept["spans"], kept["marks"]
    click.echo(
        f"\n{'slots busy, s':14s}"
        + "".join(f"{n:>7d}" for n in range(slots + 1))
        + f"{'tail s':>8s}{'idle':>7s}{'unfed':>8s}{'queued':>8s}"
    )
    for (stage, start), (_, end) in itertools.pairwise(marks):
        inside = [s for s in spans if start <= s[0] < end]
        if not inside:
            continue
        first, last = min(a for a, _ in inside), max(b for _, b in inside)
        seconds = busy_histogram(inside, first, last, slots)
        full_to = max((b for a, b in _full_spans(inside, slots)), default=last)
        tail = busy_histogram(inside, full_to, last, slots)
        idle = sum((slots - n) * s for n, s in enumerate(tail)) / slots
        unfed, queued = _unfed(inside, kept.get("arrived", []), first, full_to, slots)
        click.echo(
            f"{stage:14s}"
            + "".join(f"{s:7.2f}" for s in seconds)
            + f"{last - full_to:8.2f}{idle:7.2f}{unfed:8.2f}{queued:8.2f}"
        )


def _unfed(
    spans: list[list[float]], arrived: list[float], start: float, end: float, slots: int
) -> tuple[float, float]:
    """Of the seconds in [start, end) with a slot free: those with no request waiting at the server
    (the client had no more out: unfed) and those with one waiting there (the fake server had not
    started it yet: its own threads' wake-up, under load)."""
    events = sorted(
        [(a, 1, 0) for a, _ in spans if start <= a < end]
        + [(b, -1, 0) for _, b in spans if start <= b < end]
        + [(t, 0, 1) for t in arrived if start <= t < end]
    )
    busy = sum(1 for a, b in spans if a < start < b)
    waiting = sum(1 for t in arrived if t < start) - sum(1 for a, _ in spans if a < start)
    unfed = queued = 0.0
    at = start
    for when, step, came in events:
        if busy < slots:
            if waiting > 0:
                queued += when - at
            else:
                unfed += when - at
        # A generation's start takes its request off the queue; an arrival puts one on.
        busy, waiting, at = busy + step, waiting + came - max(step, 0), when
    return unfed, queued


def _full_spans(spans: list[list[float]], slots: int) -> list[tuple[float, float]]:
    """The stretches when every slot was generating."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], -e[1]))
    busy, since, found = 0, 0.0, []
    for when, step in events:
        if busy >= slots and busy + step < slots:
            found.append((since, when))
        if busy < slots <= busy + step:
            since = when
        busy += step
    return found


def show(root: Path) -> None:
    events = json.loads((root / ".judgeloop" / "dvc-timeline.json").read_text())
    trace = root / ".judgeloop" / "trace.jsonl"
    traced = (
        {line["stage"]: line for line in map(json.loads, trace.read_text().splitlines())}
        if trace.exists()
        else {}
    )
    rows = phases(events, traced)
    click.echo(
        f"{'phase':52s} {'wall s':>7s} {'CPU s':>7s}   (CPU: DVC's main thread; a process row: the stage's)"
    )
    for name, wall, cpu in rows:
        click.echo(f"{name:52s} {wall:7.3f} {cpu:7.3f}")
    reaped = root / ".judgeloop" / "dvc-reaped.json"
    if reaped.exists():  # the interpreter's end: modules and objects freed after the exit handlers
        ended = json.loads(reaped.read_text()) - events[-1]["start"]
        click.echo(f"{'dvc: its exit handlers to the process reaped':52s} {ended:7.3f} {'':>7s}")
    total = events[-1]["start"] - events[0]["start"]
    click.echo(f"{'all (DVC process start to exit)':52s} {total:7.3f} {events[-1]['cpu1']:7.3f}")
    if (root / ".judgeloop" / "spans.json").exists():
        tails(root)


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--keep", type=click.Path(path_type=Path), required=True, help="The project's new folder.")
@click.option("--show", "only_show", is_flag=True, help="Only print the table of a kept run.")
@click.argument("scale_args", nargs=-1, type=click.UNPROCESSED)
def main(keep: Path, only_show: bool, scale_args: tuple[str, ...]) -> None:
    """bench/scale.py --no-replay --trace SCALE_ARGS with DVC's phases timed, then the table."""
    if not only_show:
        import os

        from bench import scale  # its servers and project, only for a run

        original = scale.project

        def project(root: Path, *args: Any, **kwargs: Any) -> None:
            original(root, *args, **kwargs)
            (root / "dvc_traced.py").write_text(LAUNCHER)

        reported = scale.report

        def report(elapsed: float, marks: list[Any], slots: int) -> None:
            # The parent's clock once `dvc repro` was reaped: after DVC's interpreter ended.
            (keep / ".judgeloop" / "dvc-reaped.json").write_text(json.dumps(marks[-1].wall))
            reported(elapsed, marks, slots)

        lost = scale.lost_time

        def lost_time(marks: list[Any], servers: list[Any]) -> None:
            # Each reply's generation (began, ended) and DVC's stage marks, for the tails (below).
            spans = [span for server in servers for span in server.slot_times()[0]]
            stages = [(m.stage, m.wall) for m in marks]
            arrived = sorted(t for server in servers for t in server.times()[0])
            kept = {"spans": spans, "marks": stages, "arrived": arrived}
            (keep / ".judgeloop" / "spans.json").write_text(json.dumps(kept))
            lost(marks, servers)

        scale.project, scale.report, scale.lost_time = project, report, lost_time
        os.environ["JUDGELOOP_BENCH_DVC"] = "dvc_traced"
        scale.main(args=["--no-replay", "--trace", "--keep", str(keep), *scale_args], standalone_mode=False)
    show(keep)


if __name__ == "__main__":
    main()
